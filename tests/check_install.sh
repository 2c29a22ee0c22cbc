#!/usr/bin/env bash
# Installs the build tree into a scratch prefix and builds a C consumer
# against it six ways (after checking the .pc file names every library the
# shared library needs, and that --cflags holds nothing but -I): pkg-config shared / static (compiled and linked by the
# C compiler driver), and find_package shared / static from a C-only CMake
# project and from a mixed C/C++ one. Each consumer must run and print
# "consumer OK"; the installed tools must run.
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

run() {  # name, command
  local name=$1; shift
  out=$("$@")
  echo "$name: $out"
  [[ $out == "consumer OK"* ]] || { echo "$name failed"; exit 1; }
}

# --cflags names the header's directory and nothing else: no private
# dependency's definitions (abseil's -DNOMINMAX) reach the consumer.
cflags=$(pkg-config --cflags shared_cache_index)
for flag in $cflags; do
  [[ $flag == -I* ]] || { echo "pkg-config --cflags leaks $flag (all: $cflags)"; exit 1; }
done
echo "pkg-config --cflags: $cflags"

# pkg-config, shared, as the README shows it: the rpath from the .pc file's
# libdir, resolved (the relocatable .pc spells it <libdir>/pkgconfig/../..),
# so the binary runs from any prefix with no LD_LIBRARY_PATH, and still
# does once the pkgconfig folder is gone (checked at the end).
cc -std=c11 -Wall -Wextra -Werror -pedantic "$src/tests/install/consumer.c" -o "$work/pc_shared" \
  $(pkg-config --cflags --libs shared_cache_index) \
  -Wl,-rpath,"$(realpath "$(pkg-config --variable=libdir shared_cache_index)")"
run "pkg-config shared" env -u LD_LIBRARY_PATH "$work/pc_shared"

# Every library the shared library needs is named for static linking: a
# dependency added to the build but forgotten in the .pc file fails here,
# before any consumer does. (libc and libgcc_s come with every link.)
static_libs=" $(pkg-config --static --libs shared_cache_index) "
for needed in $(readelf -d "$libdir/libshared_cache_index.so" | sed -n 's/.*(NEEDED).*\[lib\([^]]*\)\.so[^]]*\]/\1/p'); do
  case $needed in c | gcc_s) continue ;; esac
  if [[ $static_libs != *" -l$needed "* ]]; then
    echo "pkg-config --static --libs lacks -l$needed (libshared_cache_index.so needs lib$needed)"; exit 1
  fi
done
echo "pkg-config --static names every library the shared library needs"

# pkg-config, static: the archive by path, its dependencies (the C++ runtime
# included) from --static; cc, not c++, links it.
cc -std=c11 -Wall -Wextra -Werror -pedantic "$src/tests/install/consumer.c" -o "$work/pc_static" \
  $(pkg-config --cflags shared_cache_index) "$(pkg-config --variable=libdir shared_cache_index)/libshared_cache_index.a" \
  $(pkg-config --static --libs shared_cache_index | sed 's/-lshared_cache_index//')
if ldd "$work/pc_static" | grep -q libshared_cache_index; then
  echo "pkg-config static: still links the shared library"; exit 1
fi
run "pkg-config static" "$work/pc_static"

# find_package(shared_cache_index CONFIG), shared and static: from a C-only
# project (project(x C): the static target must bring the C++ runtime
# itself) and from a mixed C/C++ one.
for languages in C "C;CXX"; do
  name=find_package-${languages/;/+}
  dir=$work/$name
  cmake -S "$src/tests/install" -B "$dir" -DCMAKE_PREFIX_PATH="$prefix" \
    -DSCI_CONSUMER_LANGUAGES="$languages" >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
  cmake --build "$dir" -j2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; echo "$name: does not link"; exit 1; }
  run "$name shared" "$dir/consumer_shared"
  run "$name static" "$dir/consumer_static"
  if ldd "$dir/consumer_static" | grep -q libshared_cache_index; then
    echo "$name static: still links the shared library"; exit 1
  fi
done

# A runtime-only install keeps no pkgconfig folder: the shared consumer's
# rpath must not go through it.
rm -rf "$libdir/pkgconfig"
run "pkg-config shared, pkgconfig folder removed" env -u LD_LIBRARY_PATH "$work/pc_shared"
