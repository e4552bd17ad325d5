"""What every lab test module shares: the repository root, the linkwidth
binary under test ($LINKWIDTH_BIN or build/linkwidth), the lab package, and
the marks that skip a module without root or without the binary."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import lab  # noqa: E402,F401

BIN = os.environ.get("LINKWIDTH_BIN", os.path.join(ROOT, "build", "linkwidth"))

LAB_MARKS = [
    pytest.mark.skipif(os.geteuid() != 0, reason="lab tests need root (network namespaces)"),
    pytest.mark.skipif(not os.path.exists(BIN), reason=f"{BIN} not built"),
]
