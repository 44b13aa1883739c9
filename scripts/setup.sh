#!/bin/bash
# Installs what korch needs on Debian 12, by package name. Safe to run repeatedly: it only
# calls apt-get / pip when something is missing.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX import
  libgtest-dev libcli11-dev nlohmann-json3-dev    # tests, command line, plan files
  coinor-libcbc-dev                               # the binary linear program (CBC)
  libhalide14-0-dev                               # memory-bound kernels (Halide 14 JIT/AOT)
  libsqlite3-dev                                  # the persistent profile cache
  libdnnl-dev ocl-icd-opencl-dev opencl-headers   # oneDNN (calibration, linear kernels)
  pocl-opencl-icd                                 # runs the GPU schedules on the CPU in the tests (OpenCL)
  python3 python3-numpy python3-onnx python3-venv # conformance case generation (onnx 1.12)
  python3-torch python3-torchvision               # model export (torch 1.13)
  python3-dev pybind11-dev                        # Python bindings
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: system packages ready"

# ONNX Runtime (PyPI) is the independent oracle for the fission tests; it lives in a venv of
# Debian's python3 so it never mixes with the system's onnx 1.12. Its onnx is pinned: the PyPI node
# suite's expected-failures list (tests/conformance/pypi_expected_failures.txt) is for this version.
VENV="$(cd "$(dirname "$0")/.." && pwd)/.venv"
ONNX_PIN=1.23.2
if ! "$VENV/bin/python" -c "import onnx, onnxruntime, numpy, pytest; assert onnx.__version__ == '$ONNX_PIN'" 2>/dev/null; then
  echo "setup: installing onnx $ONNX_PIN, onnxruntime, numpy, pytest (PyPI) into .venv"
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "onnx==$ONNX_PIN" onnxruntime numpy pytest
fi
echo "setup: python venv ready"

# The venv the korch Python package is pip-installed into and tested with (CTest python_install /
# python_korch): Debian's python3 with its system packages visible (torch 1.13, torchvision, numpy
# 1.24 that torch is built against, onnx 1.12), plus scikit-build-core (pip's build backend),
# pytest and ONNX Runtime from PyPI; numpy stays below 2 so torch keeps working.
VENV_KORCH="$(cd "$(dirname "$0")/.." && pwd)/.venv-korch"
if ! "$VENV_KORCH/bin/python" -c "import scikit_build_core, pytest, onnxruntime, torch, numpy" 2>/dev/null; then
  echo "setup: installing scikit-build-core, pytest, onnxruntime (PyPI) into .venv-korch"
  /usr/bin/python3 -m venv --system-site-packages "$VENV_KORCH"
  "$VENV_KORCH/bin/pip" install --quiet --disable-pip-version-check scikit-build-core pytest onnxruntime "numpy<2"
fi
echo "setup: python package venv ready"
