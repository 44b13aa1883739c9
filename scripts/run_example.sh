#!/bin/bash
# Sets up, builds, and runs korch on the example model that ships in examples/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
./build/korch inspect examples/tiny_cnn/model.onnx --dot build/tiny_cnn.dot
./build/korch check examples/tiny_cnn --backend reference
