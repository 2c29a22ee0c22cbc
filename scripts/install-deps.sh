#!/usr/bin/env bash
# Installs every Debian package shared-cache-index needs to build, test,
# benchmark and run its Rust example. Idempotent: packages already present
# are skipped, so re-running it is cheap. It is the only set-up step.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libzmq3-dev cppzmq-dev          # ZeroMQ and its C++ binding
  libmsgpack-cxx-dev              # msgpack decoding
  libabsl-dev                     # flat_hash_map/set, hashing, Mutex
  libssl-dev                      # SHA-256 from libcrypto
  libxxhash-dev                   # XXH3-128 key fingerprints
  libcurl4-openssl-dev            # snapshot downloads and the etcd leader view (resync, HA following)
  googletest libgtest-dev libgmock-dev
  libbenchmark-dev
  abi-dumper abi-compliance-checker  # ABI baseline check (scripts/check-abi.sh)
  nlohmann-json3-dev              # tests read the golden captures' expected.jsonl
  clang libclang-rt-14-dev        # libFuzzer harnesses (scripts/fuzz.sh), -Wthread-safety (scripts/test.sh)
  etcd-server etcd-client         # a real etcd for the HA tests (tests/etcd_process.h)
  libhiredis-dev                  # the leader view in Redis (HA following through Redis)
  redis-server                    # a real Redis for the Redis HA tests (tests/redis_process.h)
  libcpp-httplib-dev              # sci-publish's admin HTTP server and etcd calls; test HTTP
  python3-matplotlib              # scripts/plot-bench.py draws bench/check_pages.png
  # The Rust example (rust-example/): a toolchain (a rustup one on PATH takes
  # precedence), bindgen + rustfmt for scripts/regen-bindings.sh, and the
  # crates it builds with offline from /usr/share/cargo/registry.
  cargo rustc rustfmt bindgen
  librust-serde-json-dev librust-dashmap-dev librust-sha2-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
