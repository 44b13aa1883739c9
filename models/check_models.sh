#!/bin/bash
# Exports every torchvision model named in the foundation issue (random weights) and checks
# korch's reference executor against PyTorch's outputs. Slow (minutes); not in the default
# test suite. Usage: models/check_models.sh [KORCH_BINARY] [OUT_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
korch=${1:-$here/../build/korch}
out=${2:-$here/../build/cases/all_models}
status=0
for spec in "resnet50" "mobilenet_v3_large" "efficientnet_b0" "convnext_tiny" "vit_b_16" "swin_t" \
            "deeplabv3_mobilenet_v3_large" "transformer_encoder --layers 6 --d-model 256 --heads 8 --ff 1024 --seq 64" \
            "convnext_tiny --opset 17" "swin_t --opset 17" "vit_b_16 --opset 17"; do
  read -r name extra <<<"$spec"
  case_dir="$out/${name}${extra:+_$(echo "$extra" | tr -d ' -')}"
  [ -f "$case_dir/model.onnx" ] || /usr/bin/python3 "$here/export_torchvision.py" "$name" "$case_dir" $extra >/dev/null
  start=$(date +%s.%N)
  if result=$("$korch" check "$case_dir" --backend reference 2>&1); then verdict=PASS; else verdict=FAIL; status=1; fi
  printf '%-60s %s  %.1f s  %s\n' "$case_dir" "$verdict" "$(echo "$(date +%s.%N) - $start" | bc)" \
    "$(grep -o "max abs [^,]*, max rel [^,]*" <<<"$result" | head -1)"
done
exit $status
