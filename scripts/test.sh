#!/bin/bash
# Sets up, builds, and runs the whole test suite (unit tests, ONNX conformance, exported models).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
