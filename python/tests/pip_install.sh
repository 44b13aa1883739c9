#!/bin/bash
# CTest fixture `python_install`: pip-installs korch into the venv VENV from the CMake build tree BUILD
# of the source tree SRC (pyproject.toml with KORCH_PYTHON_FROM_BUILD: the tree's _korch module and
# korch CLI are brought up to date and packaged; nothing is compiled again). The python_korch test
# then runs the pytest suite against that installed package.
#
# Usage: pip_install.sh VENV SRC BUILD. Exit 77 (CTest: skipped) when VENV does not exist;
# scripts/setup.sh makes it (.venv-korch).
set -euo pipefail
VENV=$1 SRC=$2 BUILD=$3
if [ ! -x "$VENV/bin/python" ]; then
  echo "skipping: no venv at $VENV (bash scripts/setup.sh makes it)"
  exit 77
fi
if ! "$VENV/bin/python" -c "import scikit_build_core" 2>/dev/null; then
  echo "error: $VENV has no scikit-build-core (bash scripts/setup.sh installs it)" >&2
  exit 1
fi
start=$(date +%s)
"$VENV/bin/python" -m pip install --no-build-isolation --no-deps --no-cache-dir --disable-pip-version-check \
  --config-settings=cmake.define.KORCH_PYTHON_FROM_BUILD="$BUILD" \
  --config-settings=build-dir="$BUILD/python/pip" "$SRC"
echo "pip install from $BUILD: $(($(date +%s) - start)) s"
