#!/usr/bin/env bash
# Installs the build tree into a scratch prefix and builds a C consumer
# against it four ways: pkg-config shared / static, find_package shared /
# static. Each consumer must run and print "consumer OK"; the installed tools
# must run.
# Usage: check_install.sh <build-dir> <source-dir>
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name 'libshared_cache_index.so' | head -1)")
export PKG_CONFIG_PATH=$libdir/pkgconfig

# The tools are installed and run from the prefix.
for tool in sci-tail sci-publish; do
  "$prefix/bin/$tool" --help >/dev/null || { echo "installed $tool does not run"; exit 1; }
done
echo "installed tools: sci-tail, sci-publish run"

run() {  # name, binary
  out=$("$2")
  echo "$1: $out"
  [[ $out == "consumer OK"* ]] || { echo "$1 failed"; exit 1; }
}

# pkg-config, shared: the rpath stands in for an ldconfig'd system path.
cc -std=c11 -Wall -Wextra -Werror -pedantic "$src/tests/install/consumer.c" -o "$work/pc_shared" \
  $(pkg-config --cflags --libs shared_cache_index) -Wl,-rpath,"$libdir"
run "pkg-config shared" "$work/pc_shared"

# pkg-config, static: the archive by path, its dependencies from --static.
cc -std=c11 -Wall -Wextra -Werror -pedantic "$src/tests/install/consumer.c" -o "$work/pc_static" \
  $(pkg-config --cflags shared_cache_index) "$libdir/libshared_cache_index.a" \
  $(pkg-config --static --libs shared_cache_index | sed 's/-lshared_cache_index//')
if ldd "$work/pc_static" | grep -q libshared_cache_index; then
  echo "pkg-config static: still links the shared library"; exit 1
fi
run "pkg-config static" "$work/pc_static"

# find_package(shared_cache_index CONFIG), shared and static.
cmake -S "$src/tests/install" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cmake" -j2 >/dev/null
run "find_package shared" "$work/cmake/consumer_shared"
run "find_package static" "$work/cmake/consumer_static"
if ldd "$work/cmake/consumer_static" | grep -q libshared_cache_index; then
  echo "find_package static: still links the shared library"; exit 1
fi
