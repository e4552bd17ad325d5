#!/usr/bin/env bash
# One command on a fresh machine (as root): install, build, run every test:
# the Catch2 unit tests and the namespace lab tests (both through CTest), then
# the unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python3 scripts/lab.py cleanup >/dev/null 2>&1 || true
passed=0
failed=0
record() { if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi; }

rc=0
ctest --test-dir build --output-on-failure --timeout 1500 -R '^unit$' || rc=$?
record $rc
rc=0
ctest --test-dir build --output-on-failure --timeout 1500 -R '^lab$' || rc=$?
record $rc
python3 scripts/lab.py cleanup >/dev/null 2>&1 || true

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLINKWIDTH_SANITIZE=ON \
  -DBUILD_TESTING=ON >/dev/null
cmake --build build-asan -j"$(nproc)" --target linkwidth_tests
rc=0
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  build-asan/linkwidth_tests || rc=$?
record $rc

echo
echo "test suites: unit (Catch2), lab (pytest, namespaces), unit under ASan+UBSan"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
