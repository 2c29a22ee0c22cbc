#!/usr/bin/env bash
# Runs the whole benchmark suite in a Release build and refreshes its results:
#   bench/results/<binary>.json   Google Benchmark JSON, one file per binary
#   bench/results/context.txt     date, CPU, cores, load average before and after
#   bench/results/table.md        the performance.md targets table (measured)
#   bench/check_pages.png         the cost plot (scripts/plot-bench.py)
# then copies the table into README.md and bench/README.md (scripts/docs.py
# table; a test fails while a copy differs) and prints it.
#
# usage: bench/run.sh [--quick | --scale] [build-dir]   (default build dir: build-bench)
#   --quick  leave out the 10m index size (its index takes ~15 s to build and
#            ~1 GB) and the repetitions: a rough look in about two minutes.
#   --scale  instead of the suite: one router's index at 1M, 10M, 30M and
#            100M keys (scale_bench, bench/results/scale_bench.json), the
#            30M-key resync (bench/results/resync_bench_30m.json) and a blip
#            on a 10M-key pool (bench/results/resync_bench_blip.json), the
#            index of 1 billion objects (memory_bench keys:1b, about three
#            minutes and 2.6 GB alone, bench/results/memory_bench_1b.json),
#            then the table again with the scale rows and bench/scale.png.
#            About eight minutes; needs ~5 GB free (bench/README.md, "Scale").
# Without --quick each query and ingest benchmark runs 5 times; the table
# reports the median, with the range of the 5 where it matters (about ten
# minutes in all).
# The machine is shared: run it when `uptime` shows a load average under 2.
set -euo pipefail

quick=0
scale=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
elif [ "${1:-}" = "--scale" ]; then
  scale=1
  shift
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build-bench}"
out="$root/bench/results"

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
mkdir -p "$out"
replot() {
  /usr/bin/python3 "$root/scripts/plot-bench.py" "$out"/*.json --png "$root/bench/check_pages.png" \
    --headline "$out/headline.md" \
    --scale-png "$root/bench/scale.png" > "$out/table.md"
  /usr/bin/python3 "$root/scripts/docs.py" table
}

if [ "$scale" = 1 ]; then
  cmake --build "$build" -j2 --target scale_bench resync_bench memory_bench
  {
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"
    echo "cores: $(nproc)"
    echo "memory available before: $(sed -n 's/^MemAvailable: *//p' /proc/meminfo)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  } > "$out/scale_context.txt"
  # One process, the sizes one after the other, each index dropped before
  # the next is built; its peak resident size is the 100M size's.
  echo "== scale_bench" >&2
  /usr/bin/time -f "scale_bench: %e s wall, peak RSS %M KiB" -a -o "$out/scale_context.txt" \
    "$build/bench/scale_bench" --benchmark_filter='^scale/tp8/keys:(1m|10m|30m|100m)/' \
    --benchmark_out="$out/scale_bench.json" --benchmark_out_format=json
  echo "== resync_bench keys:30m" >&2
  /usr/bin/time -f "resync_bench 30m: %e s wall, peak RSS %M KiB" -a -o "$out/scale_context.txt" \
    "$build/bench/resync_bench" --benchmark_filter=keys:30m --benchmark_out="$out/resync_bench_30m.json" \
    --benchmark_out_format=json
  # A blip on a 10M-key pool under each reconnect policy (docs/operations.md,
  # "Reconnects"): what the default's resync after every disconnect costs.
  echo "== resync_bench blip keys:10m" >&2
  "$build/bench/resync_bench" --benchmark_filter='^blip/keys:10m/' --benchmark_out="$out/resync_bench_blip.json" \
    --benchmark_out_format=json
  echo "== memory_bench keys:1b" >&2
  /usr/bin/time -f "memory_bench 1b: %e s wall, peak RSS %M KiB" -a -o "$out/scale_context.txt" \
    "$build/bench/memory_bench" --benchmark_filter='keys:1b' --benchmark_out="$out/memory_bench_1b.json" \
    --benchmark_out_format=json
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/scale_context.txt"
  replot
  cat "$out/scale_context.txt"
  grep '^| scale' "$out/table.md"
  exit 0
fi

cmake --build "$build" -j2 --target query_bench latency_bench latency_bench_absl_mutex apply_bench memory_bench \
  live_ingest_bench resync_bench vllm_query_bench tiers_bench
filter=()
repeat=(--benchmark_repetitions=5 --benchmark_display_aggregates_only=true)
if [ "$quick" = 1 ]; then
  filter=(--benchmark_filter=-keys:10m)
  repeat=()
fi

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p')"
  echo "cores: $(nproc)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/context.txt"

run() {
  local binary="$1"
  shift
  echo "== $binary $*" >&2
  "$build/bench/$binary" --benchmark_out="$out/$binary.json" --benchmark_out_format=json "$@"
}
run query_bench "${repeat[@]}" "${filter[@]}"
run apply_bench "${repeat[@]}"
# vLLM chunk queries (no 512 MiB sweeps: run those by hand).
run vllm_query_bench "${repeat[@]}" --benchmark_filter=-dram512m
# Tiers: check_tiers paired with check_pages, memory per key with media kept.
run tiers_bench "${repeat[@]}"
run latency_bench "${filter[@]}"
# The same with the table lock an absl::Mutex: why the index has its own lock.
run latency_bench_absl_mutex "${filter[@]}"
run live_ingest_bench --benchmark_filter=events:1m
# 30M and 100M keys are the scale run's (--scale reads them from scale_bench),
# and so is the billion.
if [ "$quick" = 1 ]; then
  run memory_bench --benchmark_filter='-keys:(10m|30m|100m|1b)'
else
  run memory_bench --benchmark_filter='-keys:(30m|100m|1b)'
fi
run resync_bench --benchmark_filter=keys:1m "${repeat[@]}"

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/context.txt"
replot
cat "$out/context.txt" "$out/table.md"
