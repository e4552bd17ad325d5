"""Fixtures for the namespace-lab tests (tests/lab/).

* Every test in this directory is skipped, with the reason, unless running as
  root with ip, tc, ethtool, iperf3, ping and ss available.
* ``lab_factory``: ``make(links, **spec_kw)`` builds and starts a lab; links
  are Link objects or rates (``"50M"``, ``1e9``, ``None``).  Every lab it made
  is torn down after the test, also on failure, and the fixture checks that
  no namespace of those labs is left.
"""

import os
import re
import shutil
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))

import lab  # noqa: E402

LAB_PY = os.path.join(REPO, "scripts", "lab.py")
REQUIRED_TOOLS = ("ip", "tc", "ethtool", "iperf3", "ping", "ss")


def _which(tool):
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin:/usr/bin:/bin")


def lab_skip_reason():
    if os.geteuid() != 0:
        return "namespace lab tests need root (ip netns, tc)"
    missing = [t for t in REQUIRED_TOOLS if not _which(t)]
    if missing:
        return f"namespace lab tests need {', '.join(missing)} (run scripts/install-deps.sh)"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test lists the tool's JSON documents it produced (kept under
    LW_LAB_DOCS by scripts/lablib: keep_document), to be read in full."""
    outcome = yield
    rep = outcome.get_result()
    folder = os.environ.get("LW_LAB_DOCS")
    if not folder or not rep.failed or not os.path.isdir(folder):
        return
    prefix = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid.split("/")[-1]) + "-"
    docs = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.startswith(prefix))
    if docs:
        rep.sections.append(("linkwidth documents", "\n".join(docs)))


def pytest_configure(config):
    config.addinivalue_line("markers", "noroot: lab test that needs neither root nor tools")


@pytest.fixture(autouse=True)
def _lab_requirements(request):
    if request.node.get_closest_marker("noroot"):
        return
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def lab_factory():
    made = []

    def make(links, **spec_kw):
        links = [l if isinstance(l, lab.Link) else lab.Link(rate=l) for l in links]
        L = lab.Lab(lab.Spec(links=links, **spec_kw))
        made.append(L)
        return L.start()

    yield make
    errors = []
    for L in reversed(made):
        try:
            L.close()
        except Exception as e:  # keep tearing the others down
            errors.append(f"{L.id}: {e}")
    leftover = [ns for L in made for ns in lab.list_namespaces(L.prefix)]
    assert not leftover, f"namespaces left after teardown: {leftover}"
    assert not errors, f"teardown errors: {errors}"


@pytest.fixture
def chain3(lab_factory):
    """prober - r1 - r2 - target with 1G / 50M / 1G links (both directions)."""
    return lab_factory(["1G", "50M", "1G"])
