#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test.
#
# The quick run (the default: about 9 minutes on an idle 2-core machine):
#   1. scripts/install-deps.sh (cheap when every package is there),
#   2. the RelWithDebInfo build into [build-dir] (default build/),
#   3. the whole ctest suite of that build (the fuzz harnesses' corpora are
#      replayed there too),
#   4. the Rust crates (rust-example/): bindings in sync with the header,
#      then their cargo test against that build,
#   5. the Python package (python/): its pytest suite against that build's
#      library and sci-publish, an offline pip install into a venv included.
# The full run also ends with the end-to-end demo (scripts/demo.sh).
# The full run (--full, or SCI_FULL=1; what .ci/run runs: about 38 minutes)
# adds, after the build:
#   - the lock discipline: the library's objects compiled by clang with
#     -Wthread-safety as errors (compile only, build-thread-safety/): the
#     abseil annotations of src/index/ are checked, not just written,
#   - the suite under AddressSanitizer + UBSan, and the concurrent suites
#     under ThreadSanitizer (scripts/test-sanitizers.sh: build-asan/,
#     build-tsan/),
#   - the libFuzzer harnesses, each for 8 s from its committed corpus
#     (scripts/fuzz.sh ci: clang, ASan+UBSan, build-fuzz/).
# It ends with a summary: each stage, what passed (ctest's and the gtest
# binaries' totals, cargo's test results) and its time; also when a stage
# fails, which then ends the run.
# Usage: scripts/test.sh [--full] [build-dir]. In a full run,
# SCI_SKIP_SANITIZERS=1 skips the sanitizers and SCI_SKIP_FUZZ=1 the fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
full=${SCI_FULL:-0}
if [[ ${1:-} == --full ]]; then
  full=1
  shift
fi
build=${1:-build}
jobs=$(nproc 2>/dev/null || echo 2)

stage_logs=$(mktemp -d)
stage_lines=()

# What a stage's output says passed: ctest's "N tests failed out of T" lines,
# gtest's "[  PASSED  ] N tests." lines (binaries run directly), cargo's
# "test result:" lines; else "ok" or its exit status.
passed() {  # log, status
  awk -v status="$2" '
    /^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+/ {
      ctest_runs++; ctest_failed += $4; ctest_total += $NF }
    /^\[  PASSED  \] [0-9]+ tests?\./ { gtest_runs++; gtest_passed += $4 }
    /^[0-9]+ (passed|failed)|^[0-9]+ failed, [0-9]+ passed/ && / in [0-9.]+s/ {
      pytest_runs++
      for (i = 1; i <= NF; i++) {
        if ($(i) ~ /^passed,?$/) pytest_passed += $(i - 1)
        if ($(i) ~ /^failed,?$/) pytest_failed += $(i - 1)
        if ($(i) ~ /^skipped,?$/) pytest_skipped += $(i - 1)
      }
    }
    /^test result: / {
      cargo_runs++
      for (i = 1; i <= NF; i++) {
        if ($(i) ~ /^passed;?$/) cargo_passed += $(i - 1)
        if ($(i) ~ /^failed;?$/) cargo_failed += $(i - 1)
        if ($(i) ~ /^ignored;?$/) cargo_ignored += $(i - 1)
      }
    }
    END {
      out = ""
      if (ctest_runs) out = sprintf("ctest %d of %d passed", ctest_total - ctest_failed, ctest_total) \
                            (ctest_runs > 1 ? sprintf(" (%d runs)", ctest_runs) : "")
      if (gtest_runs) out = out (out == "" ? "" : "; ") sprintf("gtest %d passed (%d binaries)", gtest_passed, gtest_runs)
      if (cargo_runs) out = out (out == "" ? "" : "; ") \
          sprintf("cargo %d passed, %d failed, %d ignored (%d test targets)", cargo_passed, cargo_failed, cargo_ignored, cargo_runs)
      if (pytest_runs) out = out (out == "" ? "" : "; ") \
          sprintf("pytest %d passed, %d failed, %d skipped", pytest_passed, pytest_failed, pytest_skipped)
      if (out == "") out = status == 0 ? "ok" : ""
      if (status != 0) out = out (out == "" ? "" : "; ") "FAILED (exit " status ")"
      print out
    }' "$1"
}

summary() {
  echo
  echo "== summary"
  printf '%s\n' "${stage_lines[@]}"
  rm -rf "$stage_logs"
}
trap summary EXIT

# Runs one stage, its output shown and kept; a failure ends the run (after
# the summary).
stage() {  # name, command...
  local name=$1 log=$stage_logs/${#stage_lines[@]}.log start=$SECONDS status=0
  shift
  echo "== $name"
  "$@" 2>&1 | tee "$log" || status=$?
  stage_lines+=("$(printf '%-62s %6ss  %s' "$name" $((SECONDS - start)) "$(passed "$log" "$status")")")
  if [[ $status != 0 ]]; then exit "$status"; fi
}

stage "dependencies" scripts/install-deps.sh

# (A stage's commands are chained with &&: errexit does not apply inside a
# command whose status is tested, as stage tests it.)
build_normal() {
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null &&
    cmake --build "$build" -j"$jobs"
}
stage "build ($build)" build_normal

thread_safety() {
  cmake -S . -B build-thread-safety -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" \
    -DSCI_BUILD_TESTS=OFF -DSCI_BUILD_TOOLS=OFF -DSCI_BUILD_BENCHMARKS=OFF >/dev/null &&
    cmake --build build-thread-safety -j"$jobs" --target sci_objects
}
if [[ $full == 1 ]]; then
  stage "lock discipline: clang -Wthread-safety (build-thread-safety)" thread_safety
fi

if [[ $full == 1 && ${SCI_SKIP_SANITIZERS:-0} != 1 ]]; then
  stage "sanitizers: ASan+UBSan (ctest), TSan (gtest binaries)" scripts/test-sanitizers.sh all
fi

if [[ $full == 1 && ${SCI_SKIP_FUZZ:-0} != 1 ]]; then
  stage "fuzz: each harness 8 s from its corpus (build-fuzz)" scripts/fuzz.sh ci 8
fi

stage "tests ($build)" ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 900

# The Rust crates link the library of this build (SCI_LIB_DIR; and run its sci-publish).
# cargo runs from inside rust-example/ so it finds its .cargo/config.toml
# (crates from Debian's packages, offline).
stage "rust example: bindings match the header" scripts/regen-bindings.sh --check
build_dir=$(cd "$build" && pwd)
cargo_test() { (cd rust-example && SCI_LIB_DIR="$build_dir" cargo test --offline --features json); }
stage "rust example: cargo test ($build)" cargo_test

# The Python package against the same build: Debian's interpreter (it sees
# python3-pytest and python3-numpy); the suite finds sci-publish under
# SCI_LIB_DIR and includes the offline pip install into a temporary venv.
python_test() { SCI_LIB_DIR="$build_dir" /usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests; }
stage "python: pytest ($build)" python_test

# The README's other command, on the same build (full run): its three acts
# end in a non-zero exit when a published prompt does not hit in time (1.3.0
# broke it unnoticed: its masters exited, and a disconnect now clears).
if [[ $full == 1 ]]; then
  stage "demo: scripts/demo.sh ($build)" scripts/demo.sh "$build"
fi
