#!/usr/bin/env bash
# Compares the ABI of a built libshared_cache_index.so with every committed
# baseline of this ABI major version (abi/shared_cache_index.abi-<release>.dump,
# one per release: 1.0.0, 1.1.0, ...), and fails on any incompatible change
# against any of them: a 1.1 library must still serve callers built on 1.0.
#   scripts/check-abi.sh [build-dir]            check
#   scripts/check-abi.sh [build-dir] --update   write this release's baseline
# Needs abi-dumper and abi-compliance-checker (scripts/install-deps.sh).
# abi-dumper reads the library's debug info. A build without it (Release,
# MinSizeRel) is not skipped: the library is rebuilt with debug info into
# <build-dir>/abi-debuginfo (library only; later runs reuse it), and that
# copy is checked. Exit status: 0 compatible, 1 incompatible or the check
# could not run, 77 (ctest's SKIP) only when a debug-info copy cannot even be
# configured.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
lib=$(readlink -f "$build/libshared_cache_index.so")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

has_debug_info() { readelf -S "$1" | grep -q '\.debug_info'; }

if ! has_debug_info "$lib"; then
  copy=$build/abi-debuginfo
  echo "check-abi: ${lib#$build/} has no debug info; building a copy with it in ${copy#$build/}"
  if ! cmake -S "$root" -B "$copy" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSCI_BUILD_TESTS=OFF \
         -DSCI_BUILD_TOOLS=OFF -DSCI_BUILD_BENCHMARKS=OFF >"$work/configure.log" 2>&1; then
    cat "$work/configure.log"
    echo "check-abi: SKIPPED: cannot configure a debug-info build of the library"
    exit 77
  fi
  cmake --build "$copy" -j2 --target shared_cache_index >"$work/build.log" 2>&1 || {
    cat "$work/build.log"; echo "check-abi: the debug-info copy of the library does not build"; exit 1; }
  build=$copy
  lib=$(readlink -f "$build/libshared_cache_index.so")
  has_debug_info "$lib" || { echo "check-abi: ${lib} still has no debug info"; exit 1; }
fi

version=$(sed -n 's/.*SCI_VERSION_STRING "\(.*\)"/\1/p' "$build/generated/version.h")
abi-dumper "$lib" -o "$work/current.dump" -lver "$version" -public-headers "$root/include" >/dev/null

if [ "${2:-}" = "--update" ]; then
  baseline=$root/abi/shared_cache_index.abi-$version.dump
  cp "$work/current.dump" "$baseline"
  echo "check-abi: baseline written to ${baseline#$root/} (version $version)"
  exit 0
fi

major=${version%%.*}
shopt -s nullglob
baselines=("$root"/abi/shared_cache_index.abi-"$major".*.dump)
[ ${#baselines[@]} -gt 0 ] || { echo "check-abi: no baseline of ABI $major in abi/"; exit 1; }
for baseline in "${baselines[@]}"; do
  if abi-compliance-checker -l shared_cache_index -old "$baseline" -new "$work/current.dump" \
       -report-path "$work/report.html" >"$work/log" 2>&1; then
    grep -E '^(Binary|Source) compatibility' "$work/log" | sed "s|^|check-abi: against ${baseline#$root/}: |"
  else
    cat "$work/log"
    echo "check-abi: the ABI changed incompatibly against ${baseline#$root/}; bump SCI_ABI_VERSION or restore it"
    exit 1
  fi
done
