#!/bin/bash
# Runs `korch check --backend cpu` with the korch, greedy and per-op plans (measured costs,
# one profile cache per model) on every exported model case under CASES_DIR, then
# `korch bench` on each. Slow (tens of minutes cold); not part of the default test suite.
# Usage: bench/check_cpu_models.sh [--bench-only] CASES_DIR [OUT_DIR]
#   --bench-only: skip the checks; only `korch bench` (per-op / greedy / korch measured side by
#   side) with a fresh profile cache per model. Run it on an idle machine: profiles taken while
#   other processes compete for the cores are noise, and the cache keeps them.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
korch=$here/build/korch
bench_only=0
if [ "${1:-}" = "--bench-only" ]; then bench_only=1; shift; fi
cases=$1
out=${2:-$here/build/cpu_models}
mkdir -p "$out"
status=0
for case_dir in "$cases"/*/; do
  name=$(basename "$case_dir")
  [ -f "$case_dir/model.onnx" ] || continue
  cache=$out/$name.sqlite
  if [ $bench_only = 1 ]; then rm -f "$cache"; fi
  for plan in korch greedy per-op; do
    [ $bench_only = 1 ] && break
    start=$(date +%s.%N)
    if "$korch" check "$case_dir" --backend cpu --plan $plan --cache "$cache" > "$out/${name}_$plan.log" 2>&1; then v=PASS; else v=FAIL; status=1; fi
    printf '%-36s %-8s %s  %.0f s  %s\n' "$name" "$plan" "$v" "$(echo "$(date +%s.%N) - $start" | bc)" \
      "$(grep -o "max abs [^,]*, max rel [^,]*" "$out/${name}_$plan.log" | head -1)"
  done
  start=$(date +%s)
  "$korch" bench "$case_dir/model.onnx" --cache "$cache" --json "$out/${name}_bench.json" > "$out/${name}_bench.log" 2>&1 \
    && grep -E "^(per-op|greedy|korch) |korch vs greedy" "$out/${name}_bench.log" | sed "s/^/  $name: /"
  echo "  $name: bench incl. optimisation $(( $(date +%s) - start )) s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done
exit $status
