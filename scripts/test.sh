#!/usr/bin/env bash
# Builds everything and runs every test:
#   1. the release build and its whole ctest suite,
#   2. the suite again under AddressSanitizer + UBSan, and the concurrent
#      suites under ThreadSanitizer (scripts/test-sanitizers.sh),
#   3. the Rust example (rust-example/): bindings in sync with the header,
#      then its cargo test against this build,
# Usage: scripts/test.sh [build-dir]. SCI_SKIP_SANITIZERS=1 skips stage 2 for
# a quick local run. Assumes scripts/install-deps.sh has run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
jobs=$(nproc 2>/dev/null || echo 2)

echo "== build ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$jobs"

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
