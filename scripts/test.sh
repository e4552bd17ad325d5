#!/usr/bin/env bash
# One command on a fresh machine (as root): install, build, run every test
# (Catch2 unit tests and the namespace lab tests, both through CTest).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
python3 scripts/lab.py cleanup >/dev/null 2>&1 || true
status=0
ctest --test-dir build --output-on-failure --timeout 1500 || status=$?
# The unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLINKWIDTH_SANITIZE=ON \
  -DBUILD_TESTING=ON >/dev/null
cmake --build build-asan -j"$(nproc)" --target linkwidth_tests
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  build-asan/linkwidth_tests || status=$?
python3 scripts/lab.py cleanup >/dev/null 2>&1 || true
exit $status
