#!/usr/bin/env bash
# korch's CUDA backend checked and raced on a bare GPU machine: an NVIDIA driver, PyTorch with
# cuBLAS/cuDNN as pip packages, no Debian packages, no network. Run from the repository root with
# .gpu/ made beforehand by scripts/gpu_bundle.sh on a Debian 12 machine.
#
# Usage: scripts/gpu_check.sh OUT_DIR [--minutes N] [--models a,b,...] [--skip-tiny] [--skip-bench]
#                                     [--budget SECONDS] [--tf32]
#   --minutes N     wall-clock time for the whole check (default 9): the benchmark starts no model
#                   in its last 90 s (reported as not run) and is stopped 30 s after it (the models
#                   finished by then are in the report)
#   --models        paper models to benchmark, in this order (default the paper's five, by their
#                   cold optimisation time on the CPU: candy,efficientvit_b1,yolov4,yolox_nano,segformer_b0)
#   --budget S      korch optimize --budget for each benchmarked model (default 20)
#
# Steps, each recorded in OUT_DIR whatever the others do:
#  1. environment.txt: GPU, driver, PyTorch/CUDA/cuDNN versions, the bundle's manifest, which
#     bundled libraries were used (the machine's own copy of a soname wins when korch runs with it);
#  2. tiny.json: `korch check --backend cuda` on every tiny paper model in models/paper/cases
#     (korch's plan under the built-in H200 figures, then greedy and per-op plans; candy_tiny also
#     with measured costs, which exercises the GPU profiler: event timing, L2 flush, verification);
#  3. benchmarks.{json,md,png}: bench/run_benchmarks.py --device cuda on the full-size models,
#     exported there with the machine's PyTorch: korch (cold optimize with measured costs, then
#     warm) vs PyTorch eager vs torch.compile, fp32 with TF32 off on both sides, outputs checked
#     against PyTorch (|a-b| <= 1e-3 + 1e-3|b|) and float64;
#  4. gpu_check.log (everything printed) and logs.tar.gz (plans, per-step logs).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/gpu_check.sh OUT_DIR [--minutes N] [--models a,b] [--skip-tiny] [--skip-bench] [--budget S] [--tf32]}
shift
minutes=9
models=candy,efficientvit_b1,yolov4,yolox_nano,segformer_b0
budget=20
tiny=1
bench=1
tf32=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --minutes) minutes=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --skip-tiny) tiny=0; shift ;;
    --skip-bench) bench=0; shift ;;
    --tf32) tf32=(--tf32); shift ;;
    *) echo "gpu_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
start=$(date +%s)
deadline=$((start + minutes * 60))
work=${TMPDIR:-/tmp}/korch-gpu
rm -rf "$work"
mkdir -p "$work/logs"
exec > >(tee -a "$out/gpu_check.log") 2>&1
log() { echo "[gpu_check $(date +%H:%M:%S) +$(($(date +%s) - start))s] $*"; }
PY=${PYTHON:-python3}
korch=$root/.gpu/korch

finish() {
  # logs, plans and profile caches; not the tensors (outputs of large models) nor the korch copy
  tar -C "$work" --exclude='*.npy' --exclude='*.pb' --exclude='bench/work/korch' -czf "$out/logs.tar.gz" \
    logs $( [[ -d $work/bench/work ]] && echo bench/work)
  log "done; results in $out"
}
trap finish EXIT

[[ -x $korch && -f $root/.gpu/korch-libs.tar.xz ]] ||
  { log "error: no .gpu/korch bundle: run scripts/gpu_bundle.sh on the build machine first"; exit 1; }

# ---- 1. libraries and environment
libdir=$work/lib
mkdir -p "$libdir" "$work/lib-unused"
tar -C "$libdir" -xJf "$root/.gpu/korch-libs.tar.xz"
for f in "$libdir"/*; do  # the machine's own library where it has the soname
  so=$(basename "$f")
  if ldconfig -p | grep -q "^[[:space:]]*$so "; then mv "$f" "$work/lib-unused/"; fi
done
site=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null)
cuda_dirs=$(find "$site/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)
driver_dir=$(for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu; do
  [[ -e $d/libcuda.so.1 ]] && echo "$d" && break; done)
export LD_LIBRARY_PATH=$libdir:$cuda_dirs${driver_dir:+:$driver_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ! "$korch" ops >/dev/null 2>"$work/logs/korch_start.log"; then
  log "korch does not start with the machine's libraries ($(head -c 300 "$work/logs/korch_start.log")); using all bundled ones"
  mv "$work"/lib-unused/* "$libdir/" 2>/dev/null
fi
export PYTHONPATH=$root/.gpu/python${PYTHONPATH:+:$PYTHONPATH}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "repository commit: $(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
  sed 's/^/bundle: /' "$root/.gpu/MANIFEST"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap,clocks.max.sm --format=csv,noheader 2>&1 | head -1)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) x $(nproc)"
  echo "os: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")"
  "$PY" -c "import torch, sys; print('python', sys.version.split()[0], '| torch', torch.__version__, '| cuda', torch.version.cuda, '| cudnn', torch.backends.cudnn.version())" 2>&1 | tail -1
  echo "libraries bundled and used: $(ls "$libdir" | paste -sd' ')"
  echo "libraries the machine has (bundled copy unused): $(ls "$work/lib-unused" | paste -sd' ')"
  echo "CUDA libraries from: $cuda_dirs"
  echo "missing for korch: $(ldd "$korch" | grep 'not found' | paste -sd' ' || true)"
} >"$out/environment.txt" 2>&1
cat "$out/environment.txt"
if ldd "$korch" | grep -q 'not found'; then log "error: korch lacks libraries (environment.txt)"; exit 1; fi

# ---- 2. tiny paper models: korch check --backend cuda
if [[ $tiny == 1 ]]; then
  echo "[" >"$out/tiny.json"
  sep=""
  check() {  # NAME PLAN [FLAGS...]
    local name=$1 plan=$2
    shift 2
    local case=$root/models/paper/cases/${name}_tiny tol=()
    [[ $name == yolo* ]] && tol=(--atol 1e-3)  # as the CPU tests: long fp32 sums in the YOLO heads
    local t0 rc line logf=$work/logs/tiny_${name}_${plan}$(printf '%s' "$*" | tr -c 'a-z0-9' '_').log
    t0=$(date +%s%N)
    timeout 300 "$korch" check "$case" --backend cuda --plan "$plan" "${tol[@]}" "${tf32[@]}" "$@" >"$logf" 2>&1
    rc=$?
    line=$( (grep -E '^(error:|FAIL|PASS)' "$logf" || tail -1 "$logf") | tail -1 | tr -d '"\\' | cut -c1-300)
    [[ $line == PASS ]] && line="PASS ($(grep -o 'max abs [^,]*' "$logf" | sort -k3 -g | tail -1))"
    printf '%s  {"model": "%s", "plan": "%s", "flags": "%s", "rc": %d, "seconds": %.1f, "result": "%s"}\n' \
      "$sep" "$name" "$plan" "$*" "$rc" "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN {print (b - a) / 1e9}')" \
      "$line" >>"$out/tiny.json"
    sep=","
    log "tiny $name --plan $plan $*: rc $rc: $line"
  }
  for m in candy segformer_b0 efficientvit_b1 yolox_nano yolov4 bert_base resnet50; do
    check "$m" korch --cost analytic
  done
  check candy greedy --cost analytic
  check candy per-op --cost analytic
  check candy korch --cost measured --budget 30 --cache "$work/logs/tiny_profile_cache.sqlite"
  echo "]" >>"$out/tiny.json"
fi

# ---- 3. full-size paper models: korch vs PyTorch eager vs torch.compile
left=$((deadline - $(date +%s)))
if [[ $bench == 1 && $left -lt 120 ]]; then
  log "benchmark not run: $left s of the $minutes minutes left"
elif [[ $bench == 1 ]]; then
  log "benchmark: $models (korch optimize --budget $budget), $left s left"
  timeout $((left + 30)) env PYTHONUNBUFFERED=1 "$PY" "$root/bench/run_benchmarks.py" \
    --device cuda "${tf32[@]}" --models "$models" --korch "$korch" --threads "$(nproc)" \
    --optimize-budget "$budget" --deadline "$deadline" --model-reserve-s 90 \
    --cases "$work/bench/cases" --work "$work/bench/work" --out-dir "$out" \
    --warmup 3 --rounds 20 --round-budget-s 8 --fast-budget-s 4 --gap-ms 0 \
    --optimize-timeout 240 --start-timeout 240 --compile-timeout 240 --run-timeout 60 --export-timeout 240
  log "benchmark exit status $?"
fi
