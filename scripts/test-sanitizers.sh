#!/usr/bin/env bash
# The test suite under sanitizers:
#   - AddressSanitizer + UndefinedBehaviorSanitizer: every test except the
#     packaging checks (install, the Rust crates against an install, ABI,
#     exports), benchmark smoke runs and the
#     documents' checks (docs_*: they compile the README's C program with a
#     plain compiler, which cannot link an instrumented library), which test
#     the release artefacts and the documents, not the code;
#   - ThreadSanitizer: the suites that exercise concurrency.
# Usage: scripts/test-sanitizers.sh [asan|tsan|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
jobs=$(nproc 2>/dev/null || echo 2)
packaging='installed_library|rust_crate_builds_outside|abi_compatible|exports_only|bench_smoke|docs_'

if [[ $which == all || $which == asan ]]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCI_SANITIZE=address,undefined \
        -DSCI_DEBUG_CHECKS=ON -DSCI_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  # The randomized model test runs a tenth of its seeds: the rest is speed, not coverage.
  # (LSan: tests/lsan.supp, inherited by the tools the tests spawn.)
  SCI_MODEL_TEST_SEEDS=40 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" --timeout 900 -E "$packaging"
fi

if [[ $which == all || $which == tsan ]]; then
  # The tools too: failover_test runs two sci-publish masters (built with
  # TSan as well, so a race in them fails the test).
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCI_SANITIZE=thread \
        -DSCI_DEBUG_CHECKS=ON -DSCI_BUILD_BENCHMARKS=OFF -DSCI_BUILD_TOOLS=ON >/dev/null
  # The suites where threads meet: readers against a writer, the subscriber
  # thread against queries, the model test's concurrent readers, and the
  # subscriber thread under injected faults, the table lock itself, the
  # readers' striped counters, callbacks that stop their own subscriber,
  # resync and leader following, and a whole failover (real etcd and real
  # Redis, the leader killed, the subscriber following the new one), the
  # vLLM chunk queries against a writer flipping their keys, the
  # Redis view read cancelled from another thread, the stuck warnings,
  # tier queries against a writer moving objects between media, a resync
  # anchored to a lagging publisher queue (its worker, the admin server),
  # and the per-thread state freed as threads exit (common/thread_owned.h).
  tsan_targets=""
  for t in index_concurrency_test page_query_concurrency_test vllm_concurrency_test index_model_test subscriber_test \
           fault_injection_test rw_lock_test striped_counter_test capi_callback_test resync_test leader_follow_test \
           failover_test redis_ha_test subscriber_stuck_test tiers_test anchored_catch_up_test \
           publisher_restart_test resync_against_restarts_test thread_exit_test; do
    grep -q "_test($t " tests/CMakeLists.txt && tsan_targets+=" $t"
  done
  # shellcheck disable=SC2086
  cmake --build build-tsan -j"$jobs" --target $tsan_targets library_unload_test
  for t in $tsan_targets; do
    echo "== tsan: $t"
    SCI_MODEL_TEST_SEEDS=20 TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp" "build-tsan/tests/$t"
  done
  # The library loaded and unloaded while its threads exit. Without
  # tests/tsan.supp: TSan stops when a library its called_from_lib lines
  # match (libzmq) is unloaded, and this test uses no socket.
  echo "== tsan: library_unload_test"
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" build-tsan/tests/library_unload_test
fi
