#!/usr/bin/env bash
# One command on a fresh machine (as root): install, build, run every test:
# the Catch2 unit tests and the namespace lab tests (both through CTest), then
# the unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer
# and, beside them, the decoder fuzz target for FUZZ_SECONDS (default 60).
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

# One clang build (build-fuzz: ASan + UBSan, the fuzzer's coverage
# instrumentation) for the unit tests under the sanitizers and the decoder
# fuzz target; the two runs are single-threaded and go side by side.
# The fuzz target covers the reply decoder and the pcap reading path; it runs
# for FUZZ_SECONDS from the committed seeds (tests/fuzz/corpus); a crash
# leaves its input as build-fuzz/crash-* and fails the suite.
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
rc_san=0
rc_fuzz=0
if cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
     -DLINKWIDTH_FUZZ=ON -DBUILD_TESTING=ON >/dev/null &&
   cmake --build build-fuzz -j"$(nproc)" --target linkwidth_tests fuzz_decode; then
  mkdir -p build-fuzz/corpus
  build-fuzz/fuzz_decode -max_total_time="$FUZZ_SECONDS" -timeout=5 -rss_limit_mb=1024 \
    -artifact_prefix=build-fuzz/ -print_final_stats=1 build-fuzz/corpus tests/fuzz/corpus \
    2>build-fuzz/fuzz.log &
  fuzz_pid=$!
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    build-fuzz/linkwidth_tests || rc_san=$?
  wait "$fuzz_pid" || rc_fuzz=$?
  if [ "$rc_fuzz" -eq 0 ]; then tail -n 3 build-fuzz/fuzz.log; else tail -n 40 build-fuzz/fuzz.log; fi
else
  rc_san=1
  rc_fuzz=1
fi
record $rc_san
record $rc_fuzz

echo
echo "test suites: unit (Catch2), lab (pytest, namespaces), unit under ASan+UBSan, fuzz_decode (libFuzzer)"
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
