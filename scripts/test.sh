#!/usr/bin/env bash
# One command on a fresh machine (as root): install, build, run every test
# (Catch2 unit tests and the namespace lab tests, both through CTest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python3 scripts/lab.py cleanup >/dev/null 2>&1 || true
status=0
ctest --test-dir build --output-on-failure --timeout 1500 || status=$?
python3 scripts/lab.py cleanup >/dev/null 2>&1 || true
exit $status
