#!/usr/bin/env bash
# One command on a fresh machine (as root): install, build, run every test:
# the Catch2 unit tests and the namespace lab tests (both through CTest), then
# the unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer,
# then the decoder fuzz target for FUZZ_SECONDS (default 60).
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
ctest --test-dir build --output-on-failure --timeout 3000 -R '^lab$' || rc=$?
record $rc
python3 scripts/lab.py cleanup >/dev/null 2>&1 || true

cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLINKWIDTH_SANITIZE=ON \
  -DBUILD_TESTING=ON >/dev/null
cmake --build build-asan -j"$(nproc)" --target linkwidth_tests
rc=0
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  build-asan/linkwidth_tests || rc=$?
record $rc

# The reply decoder and the pcap reading path under libFuzzer (+ASan+UBSan),
# for a bounded time from the committed seeds (tests/fuzz/corpus); a crash
# leaves its input as build-fuzz/crash-* and fails the suite.
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
rc=0
{
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DLINKWIDTH_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null &&
    cmake --build build-fuzz --target fuzz_decode &&
    mkdir -p build-fuzz/corpus &&
    build-fuzz/fuzz_decode -max_total_time="$FUZZ_SECONDS" -timeout=5 -rss_limit_mb=1024 \
      -artifact_prefix=build-fuzz/ -print_final_stats=1 build-fuzz/corpus tests/fuzz/corpus \
      2>build-fuzz/fuzz.log &&
    tail -n 3 build-fuzz/fuzz.log
} || { rc=$?; tail -n 40 build-fuzz/fuzz.log 2>/dev/null || true; }
record $rc

echo
echo "test suites: unit (Catch2), lab (pytest, namespaces), unit under ASan+UBSan, fuzz_decode (libFuzzer)"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
