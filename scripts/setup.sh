#!/bin/bash
# Installs what korch needs on Debian 12, by package name. Safe to run repeatedly: it only
# calls apt-get / pip when something is missing.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler   # ONNX import
  libgtest-dev libcli11-dev nlohmann-json3-dev    # tests, command line, plan files
  coinor-libcbc-dev                               # the binary linear program (CBC)
  libdnnl-dev ocl-icd-opencl-dev opencl-headers   # oneDNN (calibration, linear kernels)
  python3 python3-numpy python3-onnx              # conformance case generation (onnx 1.12)
  python3-torch python3-torchvision               # model export (torch 1.13)
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
