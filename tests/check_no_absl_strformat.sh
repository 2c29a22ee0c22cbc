#!/usr/bin/env bash
# The library formats with sci::StrFormat (src/common/format.h), never with
# absl::StrFormat / StrAppendFormat: in Debian's Abseil an allocation that
# fails inside them calls std::terminate, and the library formats messages
# on exactly the paths where allocations fail. Tools may use Abseil's.
#
# usage: check_no_absl_strformat.sh <source root>
set -euo pipefail
root="$1"
hits=$(grep -rnE 'absl::(StrFormat|StrAppendFormat|FPrintF|PrintF)\(' "$root/src" "$root/capi" \
         --include='*.cpp' --include='*.h' | grep -v "^$root/src/tools/" | grep -v "^$root/src/common/format.h:" || true)
if [ -n "$hits" ]; then
  echo "FAIL: the library calls Abseil's allocating formatters (use sci::StrFormat, src/common/format.h):"
  echo "$hits"
  exit 1
fi
echo "ok: no absl::StrFormat in the library"
