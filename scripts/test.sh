#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test, in this
# order:
#   1. scripts/install-deps.sh (cheap when every package is there),
#   2. the RelWithDebInfo build into [build-dir] (default build/),
#   3. the lock discipline: the library's objects compiled by clang with
#      -Wthread-safety as errors (compile only, build-thread-safety/): the
#      abseil annotations of src/index/ are checked, not just written,
#   4. the suite under AddressSanitizer + UBSan, and the concurrent suites
#      under ThreadSanitizer (scripts/test-sanitizers.sh: build-asan/,
#      build-tsan/),
#   5. the whole ctest suite of the build of stage 2,
#   6. the Rust example (rust-example/): bindings in sync with the header,
#      then its cargo test against that build.
# Usage: scripts/test.sh [build-dir]. SCI_SKIP_SANITIZERS=1 skips stage 4 for
# a quick local run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
jobs=$(nproc 2>/dev/null || echo 2)

echo "== dependencies"
scripts/install-deps.sh

echo "== build ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$jobs"

echo "== lock discipline: clang -Wthread-safety (build-thread-safety)"
cmake -S . -B build-thread-safety -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" \
  -DSCI_BUILD_TESTS=OFF -DSCI_BUILD_TOOLS=OFF -DSCI_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build-thread-safety -j"$jobs" --target sci_objects

if [[ ${SCI_SKIP_SANITIZERS:-0} != 1 ]]; then
  echo "== sanitizers"
  scripts/test-sanitizers.sh all
fi

echo "== tests ($build)"
ctest --test-dir "$build" --output-on-failure -j"$jobs" --timeout 900

# The Rust example links the library of this build (and runs its sci-publish).
# cargo runs from inside the crate so it finds rust-example/.cargo/config.toml
# (crates from Debian's packages, offline).
echo "== rust example: bindings match the header; cargo test ($build)"
scripts/regen-bindings.sh --check
build_dir=$(cd "$build" && pwd)
(cd rust-example && SCI_LIB_DIR="$build_dir" cargo test --offline)
