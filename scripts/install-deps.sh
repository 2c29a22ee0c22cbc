#!/usr/bin/env bash
# Installs the Debian packages shared-cache-index needs (tested on Debian 12,
# bookworm). Idempotent: packages already present are skipped, so re-running
# it is cheap.
#
#   scripts/install-deps.sh [runtime | build | dev]
#
#   runtime  the shared libraries libshared_cache_index.so.1 links to
#   build    build and install the library alone (-DSCI_BUILD_TESTS=OFF
#            -DSCI_BUILD_TOOLS=OFF -DSCI_BUILD_BENCHMARKS=OFF)
#   dev      the default: everything to build, test, benchmark and run the
#            Rust example (what scripts/test.sh, scripts/demo.sh and CI use)
#
# Each mode includes the one before it. One package per line, so that a
# package added or removed is a one-line change.
set -euo pipefail

mode=${1:-dev}

runtime_packages=(
  libabsl20220623        # flat_hash_map/set, hashing, Mutex
  libcurl4               # snapshot downloads, the etcd leader view
  libhiredis0.14         # the Redis leader view
  libssl3                # SHA-256 (libcrypto)
  libstdc++6
  libzmq5                # ZeroMQ
)

build_packages=(
  build-essential
  cmake
  pkg-config
  libzmq3-dev
  cppzmq-dev             # ZeroMQ's C++ binding
  libmsgpack-cxx-dev     # msgpack decoding (header-only)
  libabsl-dev
  libssl-dev
  libxxhash-dev          # XXH3-128 key fingerprints (header-only)
  libcurl4-openssl-dev
  libhiredis-dev         # the leader view in Redis (HA following through Redis)
  nlohmann-json3-dev     # etcd's JSON answers (header-only)
)

dev_packages=(
  libcpp-httplib-dev     # sci-publish's admin server and etcd calls; the tests' HTTP servers
  googletest
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  abi-dumper             # the ABI baseline check (scripts/check-abi.sh)
  abi-compliance-checker
  clang                  # -Wthread-safety (scripts/test.sh), libFuzzer (scripts/fuzz.sh)
  libclang-rt-14-dev
  etcd-server            # a real etcd for the HA tests (tests/etcd_process.h)
  etcd-client
  redis-server           # a real Redis for the Redis HA tests (tests/redis_process.h)
  python3-matplotlib     # scripts/plot-bench.py draws bench/check_pages.png
  # The Rust crates (rust-example/): a toolchain (a rustup one on PATH takes
  # precedence), bindgen and rustfmt for scripts/regen-bindings.sh, and the
  # crates they build with offline from /usr/share/cargo/registry.
  cargo
  rustc
  rustfmt
  bindgen
  librust-serde-json-dev
  librust-dashmap-dev
  librust-sha2-dev
  librust-pkg-config-dev # shared-cache-index-sys's build.rs finds the installed library
  # The Python package (python/): its tests, run by /usr/bin/python3 (Debian's,
  # which sees these packages), and the offline install check.
  python3-pytest         # python/tests
  python3-numpy          # the tests of numpy token arrays (optional at run time)
  python3-pip            # pip install --no-build-isolation ./python (the install test)
  python3-setuptools     # the build backend of python/pyproject.toml, used offline
  python3-venv           # the install test's virtual environment (Debian's pip refuses system installs)
)

case $mode in
  runtime) packages=("${runtime_packages[@]}") ;;
  build) packages=("${runtime_packages[@]}" "${build_packages[@]}") ;;
  dev) packages=("${runtime_packages[@]}" "${build_packages[@]}" "${dev_packages[@]}") ;;
  -h | --help)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "install-deps: unknown mode \"$mode\" (runtime, build or dev)" >&2
    exit 2
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps ($mode): all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install-deps ($mode): installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
