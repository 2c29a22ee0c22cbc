#!/usr/bin/env bash
# The query functions of the built library still hold their prefetches.
#
# GCC gives __builtin_prefetch no effect, so a function that only prefetches
# (a pipeline step) is "pure" to it and every call of it is deleted: the
# code reads the same, the binary has no prefetch, and cold queries run
# 15-25% slower (src/common/prefetch.h). This disassembles the static
# library and fails if a hot-path query function has no prefetch left.
# Optimised builds only (at -O0 the prefetches sit in helpers not inlined).
#
# usage: check_prefetches.sh <libshared_cache_index.a>
set -euo pipefail
lib="$1"
listing=$(objdump -d --no-show-raw-insn "$lib" |
  awk '/^[0-9a-f]+ <.*>:$/ { fn = $2 } /\tprefetch/ { count[fn]++ } END { for (f in count) print count[f], f }')
status=0
# name: a pattern of the mangled symbol (its .cold part has none).
check() {
  local what="$1" pattern="$2"
  local n
  n=$(printf '%s\n' "$listing" | awk -v p="$pattern" '$2 ~ p && $2 !~ /\.cold/ { s += $1 } END { print s + 0 }')
  if [ "$n" -eq 0 ]; then
    echo "FAIL: $what has no prefetch instruction (symbol pattern $pattern)"
    status=1
  else
    echo "ok: $what: $n prefetch instructions"
  fi
}
# The round pipeline of check_pages may be inlined into CheckPages or kept
# out of line (RunRounds of its PageRounds): count both.
check "SGLang check_pages (tokens)" '_ZN3sci10CheckPagesERNS_5Index|RunRounds.*PageQuery.*TokenHashes'
check "SGLang check_pages (page hashes)" '_ZN3sci15CheckPageHashes|RunRounds.*CheckPageHashes'
# check_prefix prefetches each page's entry line from page 1 on, in the hold
# that answered the page before, while the next page is hashed.
check "SGLang check_prefix" '_ZN3sci11CheckPrefixERNS_5Index'
# ChunkQuery::Blocks is shared by check_pages and check_tiers, so GCC may keep it
# out of line: count it too.
check "vLLM check_pages (CheckBlocks or its block pass)" '_ZN3sci4vllm11CheckBlocks|vllm.*Query(ILb[01]EE)?6Blocks'
# The vLLM prefix walk (ChunkQuery::WalkRounds) is shared by check_prefix and by
# check_pages' prefix_hits, so GCC may keep it out of line: count it too.
check "vLLM check_prefix (CheckPrefix or its walk)" '_ZN3sci4vllm11CheckPrefix|vllm.*Query(ILb[01]EE)?10WalkRounds'
exit $status
