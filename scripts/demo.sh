#!/usr/bin/env bash
# The end-to-end demo: a Mooncake master stand-in (sci-publish) publishes the
# objects SGLang HiCache workers store for a few prompts, in the production
# wire format, on a loopback port; the Rust router example (rust-example,
# src/bin/router_demo.rs) follows it through the library's subscriber and
# asks, for a handful of prompts, which pages are in the pool.
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

echo "== building the library and sci-publish ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$jobs" --target shared_cache_index sci-publish >/dev/null
echo "== building the Rust router example (cargo, offline)"
# From inside the crate, so cargo finds its .cargo/config.toml (Debian's crates).
(cd rust-example && SCI_LIB_DIR=$build cargo build --quiet --offline --release --bin router_demo)

work=$(mktemp -d)
publisher=""
cleanup() {
  if [ -n "$publisher" ]; then kill "$publisher" 2>/dev/null || true; wait "$publisher" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The model's layout, as its SGLang workers publish it: read by both sides.
cat >"$work/layout.json" <<'JSON'
{"page_size": 64, "tp_size": 8, "pp_size": 1, "is_mla_model": false, "is_eagle": false,
 "should_split_heads": false, "extra_backend_tag": null, "key_prefix": null}
JSON

echo "== starting sci-publish: 4 prompts of 169 pages (64 tokens), 100 pages shared, tp 8"
"$build/src/tools/sci-publish" --endpoint 'tcp://127.0.0.1:*' --sglang-workload \
  --layout-json "$work/layout.json" --prompts 4 --pages 169 --shared-prefix-pages 100 --seed 2024 \
  --prompts-out "$work/prompts.jsonl" --wait-subscribers-ms 30000 \
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
"$root/rust-example/target/release/router_demo" --endpoint "$endpoint" \
  --layout-json "$work/layout.json" --prompts "$work/prompts.jsonl" --published "$work/published.json"

wait "$publisher"
publisher=""
echo
echo "== sci-publish summary: $(cat "$work/published.json")"
