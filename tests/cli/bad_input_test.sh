#!/bin/bash
# CLI behaviour on bad input: every case prints exactly one "error: ..." line on stderr and
# exits non-zero (1), never crashes (exit >= 128) or hangs.
# Usage: bad_input_test.sh KORCH_BINARY SCRATCH_DIR
set -u
korch=$1
dir=$2
mkdir -p "$dir"
failures=0
expect_error() {  # description, fragment, command...
  local what=$1 fragment=$2
  shift 2
  local err rc
  err=$(timeout 60 "$@" 2>&1 >/dev/null)
  rc=$?
  if [ $rc -ne 1 ] || [ "$(printf '%s\n' "$err" | grep -c '^error: ')" -ne 1 ] || ! grep -q -- "$fragment" <<<"$err"; then
    echo "FAIL: $what (exit $rc): $err"
    failures=$((failures + 1))
  else
    echo "ok: $what -> $err"
  fi
}
head -c 1000 /dev/urandom > "$dir/garbage.onnx"
printf '' > "$dir/empty.onnx"
expect_error "garbage file" "not a valid ONNX model" "$korch" inspect "$dir/garbage.onnx"
expect_error "empty file" "empty" "$korch" inspect "$dir/empty.onnx"
expect_error "missing file" "cannot open" "$korch" inspect "$dir/nope.onnx"
expect_error "missing case dir" "not a directory" "$korch" check "$dir/no_case"
expect_error "bad --input-shape" "positive integer" "$korch" inspect "$dir/garbage.onnx" --input-shape x=1,b
expect_error "unknown backend" "unknown backend" "$korch" check "$dir" --backend tpu
here=$(cd "$(dirname "$0")/../.." && pwd)
example=$here/examples/tiny_cnn
echo '{"format": "korch-plan-1", "graph_hash": "0", "kernels": []}' > "$dir/foreign_plan.json"
printf '{"format": ' > "$dir/corrupt_plan.json"
expect_error "plan for another model" "different model" "$korch" check "$example" --plan "$dir/foreign_plan.json"
expect_error "corrupt plan file" "not a valid plan" "$korch" check "$example" --plan "$dir/corrupt_plan.json"
expect_error "missing plan file" "cannot open plan" "$korch" check "$example" --plan "$dir/no_plan.json"
echo '{"bandwidth_gbs": "fast"}' > "$dir/bad_machine.json"
expect_error "corrupt machine file" "rerun \`korch calibrate\`" "$korch" optimize "$example/model.onnx" --machine "$dir/bad_machine.json"
expect_error "unknown cost model" "unknown cost model" "$korch" optimize "$example/model.onnx" --cost magic
if [ $failures -ne 0 ]; then
  echo "$failures failed"
  exit 1
fi
echo "all bad-input cases gave one clear error line"
