#!/bin/bash
# Sets up, builds, and runs korch on the example model that ships in examples/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
./build/korch inspect examples/tiny_cnn/model.onnx --dot build/tiny_cnn.dot
./build/korch check examples/tiny_cnn --backend reference
./build/korch optimize examples/tiny_cnn/model.onnx -o build/tiny_cnn_plan.json --dot build/tiny_cnn_plan.dot
./build/korch check examples/tiny_cnn --backend reference --plan build/tiny_cnn_plan.json
# The main job on the CPU: optimise with measured costs (profiled, cached) and run the plan.
./build/korch check examples/tiny_cnn --backend cpu --plan korch
