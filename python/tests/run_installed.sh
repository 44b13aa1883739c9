#!/bin/bash
# CTest test `python_korch`: runs python/tests (run_pytest.py ARGS...) with the interpreter of the venv
# VENV that pip_install.sh installed korch into. Exit 77 (CTest: skipped) when VENV does not exist.
#
# Usage: run_installed.sh VENV ARGS...
set -euo pipefail
VENV=$1
shift
if [ ! -x "$VENV/bin/python" ]; then
  echo "skipping: no venv at $VENV (bash scripts/setup.sh makes it)"
  exit 77
fi
exec "$VENV/bin/python" "$(dirname "$0")/run_pytest.py" "$@"
