#!/usr/bin/env bash
# Regenerates rust-example/shared-cache-index-sys/src/bindings.rs, the raw
# Rust bindings of include/shared_cache_index.h (the -sys crate's lib.rs
# includes it), with bindgen (Debian's CLI, see scripts/install-deps.sh).
#   scripts/regen-bindings.sh           rewrite bindings.rs
#   scripts/regen-bindings.sh --check   fail if bindings.rs is not what bindgen
#                                       makes of the current header
# The check compares after formatting both sides with the local rustfmt, so a
# different rustfmt version never reads as drift; a changed declaration does.
# Doc comments are left out on purpose: the check tracks the ABI, not prose.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
header=$root/include/shared_cache_index.h
out=$root/rust-example/shared-cache-index-sys/src/bindings.rs

for tool in bindgen rustfmt; do
  command -v "$tool" >/dev/null || { echo "regen-bindings: $tool not found (scripts/install-deps.sh)" >&2; exit 1; }
done

generate() {
  bindgen "$header" \
    --allowlist-function 'sci_.*' --allowlist-type 'sci_.*' --allowlist-var 'SCI_.*' \
    --size_t-is-usize --default-macro-constant-type signed --no-doc-comments \
    -- -std=c11 \
    | rustfmt --edition 2021 --emit stdout
}

case "${1:-}" in
  "")
    generate >"$out.tmp"
    mv "$out.tmp" "$out"
    echo "regen-bindings: wrote ${out#$root/}"
    ;;
  --check)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    generate >"$work/generated.rs"
    rustfmt --edition 2021 --emit stdout <"$out" >"$work/committed.rs"
    if ! diff -u "$work/committed.rs" "$work/generated.rs" >"$work/diff"; then
      cat "$work/diff"
      echo "regen-bindings: ${out#$root/} is out of date with include/shared_cache_index.h;" \
           "run scripts/regen-bindings.sh and commit the result" >&2
      exit 1
    fi
    echo "regen-bindings: ${out#$root/} matches include/shared_cache_index.h"
    ;;
  *)
    echo "usage: $0 [--check]" >&2
    exit 2
    ;;
esac
