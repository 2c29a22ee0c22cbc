#!/usr/bin/env bash
# Runs the adversarial simulation (tests/simulation_test.cpp) on random seeds
# for hours: one process per seed, each failing seed printed with its report
# kept in a log, and a summary line "N passed, M failed" at the end (or on
# Ctrl-C). docs/testing.md, "Simulation".
#
#   scripts/soak.sh [--hours H] [--build DIR] [--logs DIR] [--load N]
#
# --load N keeps N busy loops running beside it: the race of a publisher
# restart that wedged the subscriber's ZeroMQ context (I55) showed up only
# on a loaded machine (1 run in 40 of its seed under two busy loops).
# Replay a seed it printed: SCI_SIM_SEED=<seed> DIR/tests/simulation_test
set -u

hours=1
build=build
logs=
load=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hours) hours="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [[ ! "$load" =~ ^[0-9]+$ ]]; then
  echo "soak.sh: --load takes a count of busy loops, not \"$load\"" >&2
  exit 2
fi
binary="$build/tests/simulation_test"
if [[ ! -x "$binary" ]]; then
  echo "soak.sh: $binary not built (cmake --build $build --target simulation_test)" >&2
  exit 2
fi
logs="${logs:-$build/soak-logs}"
mkdir -p "$logs"

passed=0
failed=0
summary() {
  echo "$passed passed, $failed failed (failing seeds' reports in $logs)"
}
hogs=()
stop_hogs() {
  if [[ ${#hogs[@]} -gt 0 ]]; then kill "${hogs[@]}" 2>/dev/null; fi
}
trap 'stop_hogs; summary; exit 130' INT TERM
trap stop_hogs EXIT
for ((i = 0; i < load; i++)); do
  ( while :; do :; done ) &
  hogs+=($!)
done

deadline=$(( $(date +%s) + $(awk -v h="$hours" 'BEGIN { printf "%d", h * 3600 }') ))
while [[ $(date +%s) -lt $deadline ]]; do
  # A 48-bit seed from the kernel's randomness: far from the CI set 1..N.
  seed=$(( $(od -An -N6 -tu8 /dev/urandom | tr -d ' ') ))
  log="$logs/seed-$seed.log"
  if SCI_SIM_SEED="$seed" timeout 300 "$binary" >"$log" 2>&1; then
    passed=$((passed + 1))
    rm -f "$log"
  else
    failed=$((failed + 1))
    check=$(grep -o '^  \[[a-z-]*\]' "$log" | head -1 | tr -d ' []')
    echo "FAIL seed $seed (${check:-see log}): SCI_SIM_SEED=$seed $binary; report: $log"
  fi
done
summary
[[ $failed -eq 0 ]]
