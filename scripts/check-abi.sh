#!/usr/bin/env bash
# Compares the ABI of a built libshared_cache_index.so with the committed
# baseline of this ABI major version, and fails on any incompatible change.
#   scripts/check-abi.sh [build-dir]            check
#   scripts/check-abi.sh [build-dir] --update   write a new baseline (a release)
# Needs abi-dumper and abi-compliance-checker (scripts/install-deps.sh) and a
# library built with debug info (the default RelWithDebInfo build has it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
lib=$(readlink -f "$build/libshared_cache_index.so")
baseline=$root/abi/shared_cache_index.abi-v1.dump
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

version=$(sed -n 's/.*SCI_VERSION_STRING "\(.*\)"/\1/p' "$build/generated/version.h")
abi-dumper "$lib" -o "$work/current.dump" -lver "$version" -public-headers "$root/include" >/dev/null

if [ "${2:-}" = "--update" ]; then
  cp "$work/current.dump" "$baseline"
  echo "check-abi: baseline written to ${baseline#$root/} (version $version)"
  exit 0
fi

if abi-compliance-checker -l shared_cache_index -old "$baseline" -new "$work/current.dump" \
     -report-path "$work/report.html" >"$work/log" 2>&1; then
  grep -E '^(Binary|Source) compatibility' "$work/log" | sed 's/^/check-abi: /'
else
  cat "$work/log"
  echo "check-abi: the ABI changed incompatibly against ${baseline#$root/}; bump SCI_ABI_VERSION or restore it"
  exit 1
fi
