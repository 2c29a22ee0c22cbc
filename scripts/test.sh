#!/usr/bin/env bash
# Builds everything and runs every test:
#   1. the release build and its whole ctest suite,
#   2. the suite again under AddressSanitizer + UBSan, and the concurrent
#      suites under ThreadSanitizer (scripts/test-sanitizers.sh),
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
