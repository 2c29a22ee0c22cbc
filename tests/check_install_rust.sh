#!/usr/bin/env bash
# Installs the build tree into a scratch prefix and builds the Rust crates
# (rust-example/, copied out of the checkout) against it as a Rust user
# would: found through pkg-config alone (PKG_CONFIG_PATH to the prefix, no
# SCI_LIB_DIR), offline from Debian's packaged crates. Then:
#   - examples/linked_library runs, linked to the prefix's
#     libshared_cache_index.so.1 (by the rpath the crate gives its own
#     examples: no LD_LIBRARY_PATH);
#   - the doc tests run against it (the crate's front-page example);
#   - with feature "static" (pkg-config --static) the example runs with no
#     libshared_cache_index.so in it;
#   - with no library to be found, the build fails naming what it tried.
# Usage: check_install_rust.sh <build-dir> <source-dir>
# Exits 77 (skipped) when cargo is not installed.
set -euo pipefail
build=$1 src=$2
command -v cargo >/dev/null || { echo "cargo not found (scripts/install-deps.sh): skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libshared_cache_index.so' | head -1)")
export PKG_CONFIG_PATH=$libdir/pkgconfig
unset SCI_LIB_DIR SCI_BIN_DIR LD_LIBRARY_PATH

# A copy outside the checkout, so that nothing is found through the
# repository's own paths (the -sys crate's last resort is its build/).
mkdir "$work/crates"
tar -C "$src/rust-example" --exclude=./target -cf - . | tar -C "$work/crates" -xf -
cd "$work/crates"
export CARGO_TARGET_DIR=$work/target

found_by() {  # what the -sys crate's build script says it linked
  sed -n 's/^cargo:found_by=//p' "$CARGO_TARGET_DIR"/debug/build/shared-cache-index-sys-*/output | sort -u
}

check_example() {  # name, expectation for libshared_cache_index in ldd: prefix | none
  local name=$1 expect=$2 out linked
  out=$("$CARGO_TARGET_DIR/debug/examples/linked_library")
  echo "$name: $out"
  [[ $out == "shared-cache-index "*": libshared_cache_index "*", 0 of 4 pages hit in an empty index" ]] ||
    { echo "$name: unexpected output"; exit 1; }
  linked=$(ldd "$CARGO_TARGET_DIR/debug/examples/linked_library" | sed -n 's/.*libshared_cache_index[^ ]* => \([^ ]*\).*/\1/p')
  case $expect in
    prefix) [[ $linked == "$libdir/"* ]] || { echo "$name: links '$linked', not the prefix's library"; exit 1; } ;;
    none) [[ -z $linked ]] || { echo "$name: still links $linked"; exit 1; } ;;
  esac
}

# Shared, through pkg-config.
cargo build --offline --quiet --example linked_library
[[ $(found_by) == "pkg-config shared_cache_index "* ]] || { echo "the -sys crate found the library by: $(found_by)"; exit 1; }
echo "found by: $(found_by)"
check_example "pkg-config shared" prefix

# The doc tests (the safe crate's front page runs a query) against it.
cargo test --offline --quiet --doc 2>&1 | tee "$work/doctest.log" | grep '^test result' || true
grep -q '^test result: ok' "$work/doctest.log" && ! grep -q 'FAILED\|^error' "$work/doctest.log" ||
  { cat "$work/doctest.log"; echo "doc tests failed against the installed library"; exit 1; }

# Static, through pkg-config --static.
cargo build --offline --quiet --features static --example linked_library
check_example "pkg-config static" none

# Nothing to find: the build fails and says what it tried.
mkdir "$work/no-pc"
if PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR=$work/no-pc cargo build --offline --quiet --example linked_library \
     >"$work/missing.log" 2>&1; then
  echo "built with no library to link"; exit 1
fi
grep -q 'libshared_cache_index not found' "$work/missing.log" && grep -q 'SCI_LIB_DIR' "$work/missing.log" ||
  { cat "$work/missing.log"; echo "no clear error when the library is missing"; exit 1; }
echo "no library: the build fails with: $(grep -m1 'libshared_cache_index not found' "$work/missing.log" | sed 's/^ *//')"
echo "the Rust crates build and run against the installed library"
