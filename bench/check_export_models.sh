#!/usr/bin/env bash
# Exports real models with `korch export` and checks each package end to end, one case after the
# other, with tests/export/export_test.sh: plan (or a given one) -> export -> build package and C
# consumer (examples/c_consumer) from a clean folder -> run both it and `korch run --plan` on the
# case's test input under HL_JIT_TARGET=host-strict_float -> outputs must be bit-identical; the
# shared library's ldd must list no ONNX, protobuf, CBC or Halide library. Prints a summary.
# usage: bench/check_export_models.sh [--threads N] [--plan-dir DIR] [--cache FILE] [--work DIR] CASE_DIR...
#   CASE_DIR: model.onnx + test_data_set_0/input_K.pb (e.g. from models/export_torchvision.py);
#   --plan-dir: use DIR/NAME.json (NAME: the case folder's name) as the plan when it exists,
#     else `korch optimize --cost measured` (--cache: the profile cache, default WORK/profiles.sqlite);
#   --work: default build/export_check. Needs build/korch and build/korch-export (scripts/build.sh).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
THREADS=2 PLAN_DIR="" WORK=$SRC/build/export_check CACHE=""
cases=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --threads) THREADS=$2; shift 2 ;;
    --plan-dir) PLAN_DIR=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) cases+=("$(cd "$1" && pwd)"); shift ;;
  esac
done
[[ ${#cases[@]} -gt 0 ]] || { sed -n 7,12p "$0" >&2; exit 2; }
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
CACHE=${CACHE:-$WORK/profiles.sqlite}
summary=()
status=0
for case_dir in "${cases[@]}"; do
  name=$(basename "$case_dir")
  plan=""
  [[ -n $PLAN_DIR && -f $PLAN_DIR/$name.json ]] && plan=$(cd "$PLAN_DIR" && pwd)/$name.json
  log=$WORK/$name.log
  echo "=== $name (${plan:-optimize --cost measured}); log: $log"
  start=$SECONDS
  rc=0
  KORCH_EXPORT_PLAN=$plan "$SRC/tests/export/export_test.sh" "$SRC/build/korch" "$SRC/build/korch-export" "$SRC" \
    "$WORK/$name" "$case_dir" "$THREADS" "$CACHE" > "$log" 2>&1 || rc=$?
  secs=$((SECONDS - start))
  phases=$(grep -o '^== .*(t=[0-9]*s)' "$log" | sed 's/^== //' | tr '\n' ';' | sed 's/;$//')
  identical=$(grep -c 'bit-identical' "$log" || true)
  ldd_line=$(grep '^ldd: ' "$log" || echo "ldd: (not reached)")
  if [[ $rc -eq 0 ]]; then verdict=PASS; else verdict="FAIL ($(grep -m1 '^FAIL\|differs\|error' "$log" || tail -1 "$log"))"; status=1; fi
  summary+=("$name: $verdict in ${secs}s; bit-identical outputs (both consumers): $identical; $ldd_line; phases: $phases")
  echo "${summary[-1]}"
done
echo
echo "=== summary (threads $THREADS)"
printf '%s\n' "${summary[@]}"
exit $status
