#!/usr/bin/env bash
# What a router's own cargo project does, outside the checkout: a new crate
# that depends on <checkout>/rust-example by path -- no file of the
# checkout copied, no .cargo/config.toml of ours, an empty CARGO_HOME --
# builds offline against an installed prefix (found through pkg-config) and
# runs, as the README says:
#   - features = ["static"]: runs as it is;
#   - shared: runs with the rpath the README's RUSTFLAGS line gives it.
# Usage: check_rust_consumer.sh <build-dir> <source-dir>
# Exits 77 (skipped) when cargo is not installed.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
command -v cargo >/dev/null || { echo "cargo not found (scripts/install-deps.sh): skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(pkg-config --variable=libdir "$(find "$prefix" -name shared_cache_index.pc | head -1)")
export PKG_CONFIG_PATH=$libdir/pkgconfig
unset SCI_LIB_DIR SCI_BIN_DIR LD_LIBRARY_PATH RUSTFLAGS
export CARGO_HOME=$work/cargo-home CARGO_TARGET_DIR=$work/target

mkdir -p "$work/router/src"
cd "$work/router"
cat > src/main.rs <<'RS'
use std::sync::Arc;
use shared_cache_index::{Event, Index, LayoutBuilder, PageScratch, SharedCacheIndex};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let index = Arc::new(Index::new()?);
    let layout = LayoutBuilder::new(4).build()?;
    let mut cache = SharedCacheIndex::new(index.clone());
    cache.register_layout(None, layout.clone()); // one parse, shared
    let tokens: Vec<u32> = (0..12).collect();
    let mut scratch = PageScratch::new();
    let before = index.check_pages(&layout, &tokens, 4, &mut scratch)?.total_hits();
    index.apply_events(1, &[Event::stored("no-such-page")])?;
    let blocks = cache.check_blocks(&tokens, 4, None)?;
    println!("router: {} of 3 pages hit, {} blocks, library {}", before, blocks.total_hits,
             shared_cache_index::version());
    Ok(())
}
RS

build_and_run() {  # name, dependency line, expected libshared_cache_index in ldd: prefix | none
  local name=$1 dependency=$2 expect=$3 out linked
  cat > Cargo.toml <<TOML
[package]
name = "router"
version = "0.1.0"
edition = "2021"

[dependencies]
$dependency
TOML
  rm -f Cargo.lock
  cargo build --offline --quiet
  out=$("$CARGO_TARGET_DIR/debug/router")
  echo "$name: $out"
  [[ $out == "router: 0 of 3 pages hit, 0 blocks, library "* ]] || { echo "$name: unexpected output"; exit 1; }
  linked=$(ldd "$CARGO_TARGET_DIR/debug/router" | sed -n 's/.*libshared_cache_index[^ ]* => \([^ ]*\).*/\1/p')
  case $expect in
    prefix) [[ $linked == "$libdir/"* ]] || { echo "$name: links '$linked', not the prefix's library"; exit 1; } ;;
    none) [[ -z $linked ]] || { echo "$name: still links $linked"; exit 1; } ;;
  esac
}

build_and_run "static" "shared-cache-index = { path = \"$src/rust-example\", features = [\"static\"] }" none
RUSTFLAGS="-C link-arg=-Wl,-rpath,$libdir" \
  build_and_run "shared, rpath" "shared-cache-index = { path = \"$src/rust-example\" }" prefix
echo "a cargo project outside the checkout builds offline and runs against the installed library"
