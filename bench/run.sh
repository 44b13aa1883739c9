#!/bin/bash
# One-command benchmark: korch vs ONNX Runtime, OpenVINO, PyTorch eager and torch.compile on the
# Korch paper's models and torchvision's (see bench/README.md).
#
#   bench/run.sh [--quick] [--models a,b] [--threads 2] [--rounds N] [other run_benchmarks.py options]
#
# Sets up what is missing (Python packages into `python3`, build/korch via scripts/build.sh),
# exports the models that have no case directory yet (run_benchmarks.py calls
# models/paper/export_paper_models.py or models/export_torchvision.py for each, so one failing
# export does not stop the others), then runs bench/run_benchmarks.py, which writes docs/benchmarks.{json,md,png}
# (with --quick: build/bench/quick/benchmarks.{json,md,png}).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# ---- Python packages the harness and the model builders need
need=()
for spec in onnxruntime:onnxruntime torch:torch transformers:transformers timm:timm \
            matplotlib:matplotlib onnx:onnx numpy:numpy torchvision:torchvision openvino:openvino; do
  mod=${spec%%:*}; pkg=${spec#*:}
  "$PY" -c "import $mod" 2>/dev/null || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "bench: installing ${need[*]} into $("$PY" -c 'import sys; print(sys.prefix)')"
  "$PY" -m pip install --quiet "${need[@]}"
fi
# yolox (YOLOX-Nano's own model code) does not build in pip's isolated environment
# (its setup.py imports torch): install it after torch, as models/paper/README.md says.
if ! "$PY" -c "import yolox" 2>/dev/null; then
  echo "bench: installing yolox 0.3.0 (no build isolation) and its runtime imports"
  "$PY" -m pip install --quiet loguru thop opencv-python-headless tabulate || true
  "$PY" -m pip install --quiet --no-build-isolation --no-deps yolox==0.3.0 || \
    echo "bench: warning: yolox did not install; yolox_nano will be reported as failed"
fi

# ---- korch
if [ ! -x build/korch ]; then
  echo "bench: build/korch missing; building with scripts/build.sh"
  bash scripts/build.sh
fi

exec "$PY" bench/run_benchmarks.py "$@"
