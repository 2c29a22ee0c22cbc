#!/usr/bin/env bash
# The end-to-end demo: a Mooncake master stand-in (sci-publish) publishes the
# objects SGLang HiCache workers store for a few prompts, in the production
# wire format, on a loopback port; the Rust router example (rust-example,
# examples/router_demo.rs) follows it through the library's subscriber and
# asks, for a handful of prompts, which pages are in the pool. Act 2: a vLLM
# model (the MooncakeStoreConnector's chunks, a Qwen3-8B-like TP 2
# descriptor); the router reads the same descriptor and prints Dynamo's
# answer, the blocks of the prefix in the pool. Act 3: a Mooncake HA pair (two sci-publish electing a leader through a real etcd,
# on 127.0.0.2 and 127.0.0.3 with the same ports); the router follows the
# leader named in etcd and resyncs from its snapshot; the leader crashes and
# the table shows the hits gone, then back after the standby's resync.
#   scripts/demo.sh [build-dir]      (default: build)
# Installs what is missing (scripts/install-deps.sh, cheap when all is there),
# builds what it needs (cmake, then cargo offline); needs no external service.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${1:-build}
case "$build" in /*) ;; *) build=$root/$build ;; esac
jobs=$(nproc 2>/dev/null || echo 2)

echo "== dependencies"
scripts/install-deps.sh

# The first run compiles for a few minutes: say so, and show how far it is.
# CMake's "[ NN%]" lines become one line of progress; the whole log is kept
# and shown if the build fails.
build_log=$(mktemp)
show_progress() {
  local line pct last=""
  while IFS= read -r line; do
    echo "$line" >>"$build_log"
    if [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
      pct=${BASH_REMATCH[1]}
      if [[ $pct != "$last" ]]; then printf '\r   %3d%% (%ds)' "$pct" "$SECONDS"; last=$pct; fi
    fi
  done
  printf '\r   done (%ds)      \n' "$SECONDS"
}

echo "== building the library and sci-publish ($build; the first time takes a few minutes on 2 cores)"
SECONDS=0
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build_log" 2>&1 || { cat "$build_log" >&2; exit 1; }
if ! cmake --build "$build" -j"$jobs" --target shared_cache_index sci-publish 2>&1 | show_progress; then
  echo "demo: the build failed; its last lines:" >&2
  tail -n 40 "$build_log" >&2
  exit 1
fi
rm -f "$build_log"
echo "== building the Rust router example (cargo, offline; about a minute the first time)"
# From inside the crate, so cargo finds its .cargo/config.toml (Debian's
# crates). Cargo shows its own progress.
SECONDS=0
(cd rust-example && SCI_LIB_DIR=$build cargo build --offline --release --example router_demo)
echo "   done (${SECONDS}s)"

work=$(mktemp -d)
publisher=""
failover_pids=()  # etcd and the two masters of act 3
cleanup() {
  if [ -n "$publisher" ]; then kill "$publisher" 2>/dev/null || true; wait "$publisher" 2>/dev/null || true; fi
  for pid in "${failover_pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# Waits (bounded, 60 s) until FILE holds a line matching PATTERN while
# process PID lives; prints the first such line.
await_line() {
  local file=$1 pattern=$2 pid=$3 line=""
  for _ in $(seq 1200); do
    line=$(grep -m1 -- "$pattern" "$file" 2>/dev/null || true)
    [ -n "$line" ] && { echo "$line"; return 0; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "demo: no \"$pattern\" from pid $pid:" >&2
  cat "$file" >&2
  return 1
}

# The model's layout, as its SGLang workers publish it: read by both sides.
cat >"$work/layout.json" <<'JSON'
{"page_size": 64, "tp_size": 8, "pp_size": 1, "is_mla_model": false, "is_eagle": false,
 "should_split_heads": false, "extra_backend_tag": null, "key_prefix": null}
JSON

# The masters of acts 1 and 2 stay up after publishing (--keep-running), as
# a real master does: a master gone is a disconnect, which clears what a
# subscriber holds (by default: docs/operations.md, "Reconnects").
echo "== starting sci-publish: 4 prompts of 169 pages (64 tokens), 100 pages shared, tp 8"
"$build/src/tools/sci-publish" --endpoint 'tcp://127.0.0.1:*' --workload \
  --layout-json "$work/layout.json" --prompts 4 --pages 169 --shared-prefix-pages 100 --seed 2024 \
  --prompts-out "$work/prompts.jsonl" --wait-subscribers-ms 30000 --keep-running \
  >"$work/published.json" 2>"$work/publisher.log" &
publisher=$!

# It prints {"listening":"tcp://127.0.0.1:<port>"} once bound (bounded wait).
endpoint=""
for _ in $(seq 300); do
  endpoint=$(sed -n 's/.*"listening":"\([^"]*\)".*/\1/p' "$work/publisher.log")
  [ -n "$endpoint" ] && break
  kill -0 "$publisher" 2>/dev/null || break
  sleep 0.05
done
if [ -z "$endpoint" ]; then
  echo "demo: sci-publish did not start:" >&2
  cat "$work/publisher.log" >&2
  exit 1
fi

echo "== the router (Rust) subscribes to $endpoint and queries"
echo
"$root/rust-example/target/release/examples/router_demo" --endpoint "$endpoint" \
  --layout-json "$work/layout.json" --prompts "$work/prompts.jsonl"

kill -TERM "$publisher"
wait "$publisher" || true
publisher=""
echo
echo "== sci-publish summary (stopped by the demo): $(cat "$work/published.json")"

echo
echo "== act 2: a vLLM model (MooncakeStoreConnector chunks, Dynamo's answer)"
# The descriptor Dynamo's worker extension publishes for Qwen/Qwen3-8B at TP 2
# (8 KV heads: each rank writes its own objects), cache_prefix "prod".
cat >"$work/vllm.json" <<'JSON'
{"schema_version": 1, "adapter": "vllm-1085b644",
 "hash": {"algorithm": "sha256", "digest_encoding": "hex", "gpu_event_hash": "low64",
          "seed_policy": "pythonhashseed-0", "key_separator": "@"},
 "main_event_group": 0, "main_event_block_size": 16,
 "coordinator": {"lcm_block_size": 16, "speculative": false, "drop_blocks": false},
 "groups": [{"group_id": 0, "kind": "full_attention", "block_size": 16, "hash_block_size": 16,
             "key_prefixes": ["prod@Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0",
                              "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0"]}]}
JSON
echo "starting sci-publish: 4 prompts of 256 blocks (16 tokens, + 1 token), 100 blocks shared, tp 2"
"$build/src/tools/sci-publish" --endpoint 'tcp://127.0.0.1:*' --workload \
  --layout-json "$work/vllm.json" --prompts 4 --pages 256 --shared-prefix-pages 100 --seed 2025 \
  --prompts-out "$work/vllm-prompts.jsonl" --wait-subscribers-ms 30000 --keep-running \
  >"$work/vllm-published.json" 2>"$work/vllm-publisher.log" &
publisher=$!
ready=$(await_line "$work/vllm-publisher.log" '"listening"' "$publisher")
endpoint=$(sed -n 's/.*"listening":"\([^"]*\)".*/\1/p' <<<"$ready")
echo
"$root/rust-example/target/release/examples/router_demo" --endpoint "$endpoint" \
  --layout-json "$work/vllm.json" --cache-namespace Qwen3-8B --prompts "$work/vllm-prompts.jsonl"
kill -TERM "$publisher"
wait "$publisher" || true
publisher=""

echo
echo "== act 3: the master fails over"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
etcd_port=$(free_port)
etcd_peer=$(free_port)
etcd_url=http://127.0.0.1:$etcd_port
etcd --name demo --data-dir "$work/etcd" --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "demo=http://127.0.0.1:$etcd_peer" --log-level error >"$work/etcd.log" 2>&1 &
failover_pids+=($!)
healthy=""
for _ in $(seq 200); do
  if etcdctl --endpoints "$etcd_url" --dial-timeout 1s endpoint health >/dev/null 2>&1; then healthy=1; break; fi
  sleep 0.05
done
[ -n "$healthy" ] || { echo "demo: etcd did not start:" >&2; cat "$work/etcd.log" >&2; exit 1; }
echo "etcd on $etcd_url"

# The same workload as act 1. Both masters stay up with live traffic (a new
# object every 100 ms); the standby restored the objects and never announces
# them: only a snapshot brings them to a subscriber.
workload=(--workload --layout-json "$work/layout.json" --prompts 4 --pages 169
          --shared-prefix-pages 100 --seed 2024)
master=(--etcd "$etcd_url" --keep-running --live-every-ms 100 --wait-subscribers-ms 30000)
"$build/src/tools/sci-publish" --endpoint 'tcp://127.0.0.2:*' --admin-port 0 --advertise 127.0.0.2:50051 \
  "${master[@]}" "${workload[@]}" >/dev/null 2>"$work/leader.log" &
leader=$!
failover_pids+=("$leader")
disown "$leader"  # the router SIGKILLs it: no "Killed" job notice in the demo's output
ready=$(await_line "$work/leader.log" '"listening"' "$leader")
event_port=$(sed -n 's/.*"listening":"tcp:[^"]*:\([0-9]*\)".*/\1/p' <<<"$ready")
admin_port=$(sed -n 's/.*"admin":"http:[^"]*:\([0-9]*\)".*/\1/p' <<<"$ready")
echo "leader  127.0.0.2 (pid $leader): events tcp://127.0.0.2:$event_port, admin http://127.0.0.2:$admin_port"
"$build/src/tools/sci-publish" --endpoint "tcp://127.0.0.3:$event_port" --admin-port "$admin_port" \
  --advertise 127.0.0.3:50051 "${master[@]}" --restore-workload "${workload[@]:1}" \
  >/dev/null 2>"$work/standby.log" &
standby=$!
failover_pids+=("$standby")
await_line "$work/standby.log" '"standby"' "$standby" >/dev/null
echo "standby 127.0.0.3 (pid $standby): same ports, waiting for the leader's lease"
echo
"$root/rust-example/target/release/examples/router_demo" --etcd "$etcd_url" --event-port "$event_port" \
  --admin-port "$admin_port" --kill-leader-pid "$leader" \
  --layout-json "$work/layout.json" --prompts "$work/prompts.jsonl"
