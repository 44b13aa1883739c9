#!/usr/bin/env bash
# Re-runs each artifact (crash-*, oom-*, timeout-*, or any files given) through fuzz_import
# and prints one signature line per input: the sanitizer/abort message and the first
# korch source frame, so duplicates group together.
#   fuzz/triage.sh [FUZZER] FILES...     (FUZZER defaults to build-fuzz/fuzz_import)
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
fuzzer="$here/../build-fuzz/fuzz_import"
if [[ -x "${1:-}" && ! -d "${1:-}" && "$1" == *fuzz_import* ]]; then fuzzer="$1"; shift; fi
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
for f in "$@"; do
  out="$(timeout 60 "$fuzzer" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 "$f" 2>&1)"
  msg="$(grep -m1 -E 'runtime error|ERROR: AddressSanitizer|ERROR: libFuzzer|terminate called|what\(\)|Assertion|ALARM' <<<"$out" | sed -E 's/0x[0-9a-f]+/0x…/g' | cut -c1-200)"
  frame="$(grep -E "^ +#[0-9]+ .* $repo/src/" <<<"$out" | head -1 | sed -E "s/.* in //; s#$repo/##" | cut -c1-160)"
  [[ -z "$msg" ]] && msg="(no report)"
  printf '%s\t%s\t%s\n' "$(basename "$f")" "$msg" "$frame"
done
