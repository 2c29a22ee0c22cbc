#!/usr/bin/env bash
# Paired before/after benchmark: the same benchmark binary built from a base
# commit and from the working tree (both Release), run alternately, so that
# load and clock drift on this shared machine fall on both sides alike.
#
# usage: bench/compare.sh BASE BINARY FILTER [ROUNDS] [COUNTER]
#   BASE     a commit (e.g. v1.3.0's 52582b4); built once in build-bench-base/
#            from a worktree beside the checkout (left for the next call)
#   BINARY   a bench target present at both commits (vllm_query_bench, ...)
#   FILTER   its --benchmark_filter
#   ROUNDS   alternations, base then head each round (default 5)
#   COUNTER  what to compare: a user counter such as query_us, or real_time
#            (the default)
# Prints, per benchmark row, the median over rounds of each side and
# head / base. A row that exists on one side only is listed as such.
set -euo pipefail

if [ $# -lt 3 ]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
base=$1 binary=$2 filter=$3 rounds=${4:-5} counter=${5:-real_time}
root="$(cd "$(dirname "$0")/.." && pwd)"
base_commit=$(git -C "$root" rev-parse --short "$base")
# Beside the checkout, so that ccache (base_dir) shares the objects of both.
base_tree=$(dirname "$root")/sci-bench-base-$base_commit
base_build="$root/build-bench-base"
head_build="$root/build-bench"

if [ ! -d "$base_tree" ]; then
  git -C "$root" worktree add --detach "$base_tree" "$base_commit" > /dev/null
fi
cmake -S "$base_tree" -B "$base_build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake -S "$root" -B "$head_build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$base_build" -j2 --target "$binary" > /dev/null
cmake --build "$head_build" -j2 --target "$binary" > /dev/null

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((round = 0; round < rounds; ++round)); do
  for side in base head; do
    build=$base_build
    [ "$side" = head ] && build=$head_build
    "$build/bench/$binary" --benchmark_filter="$filter" --benchmark_format=json \
      > "$out/$side.$round.json" 2> /dev/null
  done
  echo "round $((round + 1))/$rounds done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done

/usr/bin/python3 - "$out" "$rounds" "$counter" "$base_commit" <<'EOF'
import json, statistics, sys
out, rounds, counter, base = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
values = {"base": {}, "head": {}}
for side in values:
    for r in range(rounds):
        with open(f"{out}/{side}.{r}.json") as f:
            for b in json.load(f)["benchmarks"]:
                if b.get("run_type") == "aggregate" or counter not in b:
                    continue
                values[side].setdefault(b["name"], []).append(float(b[counter]))
names = sorted(set(values["base"]) | set(values["head"]))
print(f"{counter}, median of {rounds} alternated runs: base {base} vs head (working tree)")
print(f"| benchmark | base | head | head / base |")
print(f"|---|---:|---:|---:|")
for name in names:
    b, h = values["base"].get(name), values["head"].get(name)
    if not b or not h:
        print(f"| {name} | {'-' if not b else f'{statistics.median(b):.3f}'} | "
              f"{'-' if not h else f'{statistics.median(h):.3f}'} | one side only |")
        continue
    mb, mh = statistics.median(b), statistics.median(h)
    print(f"| {name} | {mb:.3f} | {mh:.3f} | {mh / mb:.3f} |")
EOF
