#!/usr/bin/env bash
# The whole allocation-failure sweep in one command (issue #34 §2): every
# suite that fails the library's allocations one by one, run directly so
# that each prints how many allocation sites its scenarios reached, then a
# summary. The sweeps are complete, not sampled: each scenario runs once per
# allocation until a run fails none, so this is what `ctest` runs too (about
# 10 s); here the suites' own lines are kept and, with --asan, the ASan +
# UBSan build of scripts/test-sanitizers.sh is used (a leak or an invalid
# access after a failure then fails the sweep).
#
#   scripts/sweep.sh            the build in build/ (scripts/test.sh makes it)
#   scripts/sweep.sh --asan     the sanitizer build in build-asan/ (built if missing)
#   scripts/sweep.sh DIR        the test binaries of the build in DIR
#
# What each suite covers: docs/testing.md, "Allocation failures".
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build
case "${1:-}" in
  --asan)
    build=$root/build-asan
    if [ ! -d "$build/tests" ]; then
      cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCI_SANITIZE=address,undefined \
            -DSCI_BUILD_BENCHMARKS=OFF >/dev/null
    fi
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0"
    ;;
  "") ;;
  *) build=$(cd "$1" && pwd) ;;
esac
suites=(write_path_allocation_failure_test message_apply_allocation_failure_test
        capi_allocation_sweep_test vllm_query_allocation_failure_test
        subscriber_allocation_failure_test)
cmake --build "$build" -j2 --target "${suites[@]}"
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT
status=0
for suite in "${suites[@]}"; do
  if "$build/tests/$suite" >"$out" 2>&1; then verdict=passed; else verdict=FAILED; status=1; fi
  echo "== $suite: $verdict"
  grep -E 'allocation sites|allocations on' "$out" | sed 's/^/   /' || true
  grep -E '^\[  FAILED  \]' "$out" | sed 's/^/   /' || true
  cat "$out" >>"$log"
done
sites=$(grep -oE '[0-9]+ allocation sites' "$log" | awk '{s += $1} END {print s + 0}')
echo "sweep: $sites allocation sites named by the C API and message suites, each failed in turn;" \
     "$(grep -c '^\[       OK \]' "$log") tests passed, $(grep -c '^\[  FAILED  \]' "$log") failed"
exit $status
