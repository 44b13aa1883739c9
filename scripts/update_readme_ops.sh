#!/usr/bin/env bash
# Regenerates the README's operator table from the fission registry (`korch ops`): the lines
# between <!-- ops:begin --> and <!-- ops:end --> in README.md.
#
# Usage: scripts/update_readme_ops.sh KORCH_BINARY [--check]
# --check: change nothing; exit 1 (with a diff) when the README's table is out of date.
set -euo pipefail
korch=$1
mode=${2:-}
root=$(cd "$(dirname "$0")/.." && pwd)
readme=$root/README.md
table=$(mktemp)
updated=$(mktemp)
trap 'rm -f "$table" "$updated"' EXIT
"$korch" ops >"$table"
awk -v table="$table" '
  /<!-- ops:begin -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
  /<!-- ops:end -->/ { skip = 0 }
  !skip { print }
' "$readme" >"$updated"
if ! grep -q '<!-- ops:begin -->' "$readme"; then
  echo "error: $readme has no <!-- ops:begin --> / <!-- ops:end --> markers" >&2
  exit 1
fi
if [ "$mode" = "--check" ]; then
  if ! diff -u "$readme" "$updated"; then
    echo "error: the README's operator table is out of date; run scripts/update_readme_ops.sh $korch" >&2
    exit 1
  fi
  echo "README operator table: up to date ($(($(wc -l <"$table") - 2)) operators)"
else
  cp "$updated" "$readme"
  echo "README operator table: $(($(wc -l <"$table") - 2)) operators"
fi
