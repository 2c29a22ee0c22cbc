#!/usr/bin/env bash
# Builds the library and runs the C example: an index fed a few batches
# (one after a sequence gap), queried, with its counters printed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)" --target c_example >/dev/null
"$build"/c_example
