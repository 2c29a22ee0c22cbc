#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, -fsanitize=fuzzer,address,undefined,
# in build-fuzz/) and runs one of them for a while, then folds what it found
# into the committed corpus, minimised.
#
#   scripts/fuzz.sh HARNESS [SECONDS] [extra libFuzzer flags...]
#     HARNESS: apply_message_fuzzer | check_pages_fuzzer | layout_json_fuzzer |
#     vllm_query_fuzzer | object_store_fuzzer | index_differential_fuzzer;
#     SECONDS: default 600.
#   scripts/fuzz.sh build        only build the harnesses
#   scripts/fuzz.sh ci [SECONDS] every harness for SECONDS (default 8) from the
#                                committed corpus and seeds, one after the
#                                other; nothing is merged into the tree (CI:
#                                scripts/test.sh runs it)
#
# One process, one job (the machine is shared): run the harnesses one after
# the other. Inputs:
#   tests/fuzz/corpus/HARNESS/        committed, minimised corpus (replayed in CI)
#   build-fuzz/fuzz-seeds/HARNESS/    seeds written by fuzz_seed_corpus (golden
#                                     captures, one message of each wire format)
#   build-fuzz/fuzz-work/HARNESS/     what this machine's runs found (kept between runs)
# A crash, leak or broken invariant leaves its input in
# build-fuzz/fuzz-artifacts/HARNESS/: fix it, then copy the input to
# tests/fuzz/regressions/HARNESS/ so CI replays it forever.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build-fuzz
harness=${1:?usage: scripts/fuzz.sh HARNESS|build|ci [SECONDS] [libFuzzer flags...]}
harnesses=(apply_message_fuzzer check_pages_fuzzer layout_json_fuzzer vllm_query_fuzzer object_store_fuzzer
           index_differential_fuzzer)
seconds=${2:-}
[[ -n $seconds ]] || { [[ $harness == ci ]] && seconds=8 || seconds=600; }
shift $(( $# >= 2 ? 2 : $# ))

for tool in clang clang++; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DSCI_SANITIZE=address,undefined,fuzzer-no-link -DSCI_BUILD_FUZZERS=ON -DSCI_DEBUG_CHECKS=ON \
  -DSCI_BUILD_BENCHMARKS=OFF -DSCI_BUILD_TOOLS=OFF >/dev/null
cmake --build "$build" -j2 --target "${harnesses[@]}" fuzz_seed_corpus
[[ $harness == build ]] && exit 0

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

options() {  # harness: sets max_len and dict
  case $1 in
    apply_message_fuzzer) max_len=65536; dict=(-dict=tests/fuzz/apply_message_fuzzer.dict) ;;
    check_pages_fuzzer) max_len=4096; dict=() ;;
    layout_json_fuzzer) max_len=4096; dict=(-dict=tests/fuzz/layout_json_fuzzer.dict) ;;
    vllm_query_fuzzer) max_len=1024; dict=() ;;
    object_store_fuzzer) max_len=2048; dict=() ;;
    index_differential_fuzzer) max_len=1024; dict=() ;;
    *) echo "fuzz.sh: unknown harness '$1'" >&2; exit 2 ;;
  esac
}

if [[ $harness == ci ]]; then
  # Bounded: each harness for $seconds (default 8), from the committed
  # corpus and reproducers, new inputs in a scratch directory; a finding
  # fails the run with its input in build-fuzz/fuzz-artifacts/HARNESS/.
  status=0
  for h in "${harnesses[@]}"; do
    options "$h"
    scratch=$(mktemp -d)
    mkdir -p "$build/fuzz-artifacts/$h"
    echo "fuzz.sh ci: $h for ${seconds}s"
    run_status=0
    "$build/tests/fuzz/$h" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$h/" "${dict[@]}" \
      "$scratch" "$root/tests/fuzz/corpus/$h" >"$scratch.log" 2>&1 || run_status=$?
    grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR)|invariant broken' "$scratch.log" || true
    if [[ $run_status -ne 0 ]]; then
      tail -n 30 "$scratch.log" >&2
      echo "fuzz.sh ci: $h found something (exit $run_status; input in $build/fuzz-artifacts/$h/)" >&2
      status=1
    fi
    rm -rf "$scratch" "$scratch.log"
  done
  exit $status
fi

options "$harness"

bin=$build/tests/fuzz/$harness
corpus=$root/tests/fuzz/corpus/$harness
seeds=$build/fuzz-seeds/$harness
work=$build/fuzz-work/$harness
artifacts=$build/fuzz-artifacts/$harness
rm -rf "$build/fuzz-seeds"
"$build/tests/fuzz/fuzz_seed_corpus" "$build/fuzz-seeds/apply_message_fuzzer" \
  "$build/fuzz-seeds/check_pages_fuzzer" "$root/testdata/mooncake-publisher" \
  "$build/fuzz-seeds/index_differential_fuzzer"
# (fuzz_seed_corpus writes no seeds for layout_json_fuzzer: its corpus holds them.)
mkdir -p "$corpus" "$work" "$artifacts" "$seeds"

status=0
# New inputs go to the first directory (work); all three are read.
"$bin" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" "$@" \
  "$work" "$corpus" "$seeds" || status=$?

# Fold into the committed corpus: only inputs that add coverage, smallest first.
merged=$(mktemp -d)
"$bin" -merge=1 -max_len="$max_len" "$merged" "$corpus" "$work" "$seeds" 2>&1 | grep -E '^MERGE-OUTER: [0-9]+ new files' || true
rm -rf "$corpus" && mkdir -p "$corpus" && cp "$merged"/* "$corpus"/ 2>/dev/null || true
rm -rf "$merged"
echo "fuzz.sh: corpus $(ls "$corpus" | wc -l) inputs, $(du -sh "$corpus" | cut -f1)"

if [[ $status -ne 0 ]] || compgen -G "$artifacts/*" >/dev/null; then
  echo "fuzz.sh: findings in $artifacts (libFuzzer exit $status):" >&2
  ls -l "$artifacts" >&2
  exit 1
fi
