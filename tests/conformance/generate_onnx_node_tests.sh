#!/usr/bin/env bash
# Generate ONNX's backend node conformance cases with the system onnx package.
#
# Usage: tests/conformance/generate_onnx_node_tests.sh OUTDIR
#
# Produces OUTDIR/node/test_*/model.onnx and
# OUTDIR/node/test_*/test_data_set_0/{input,output}_N.pb (plus OUTDIR/simple,
# OUTDIR/real etc. from onnx's model test collection), using onnx's own
# generator (onnx.backend.test.cmd_tools generate-data). Debian's onnx 1.12
# predates numpy's removal of the np.float/np.int/... aliases, so they are
# restored before the generator is imported.
#
# Idempotent: if OUTDIR/.onnx_node_cases.stamp exists and OUTDIR/node holds
# more than MIN_CASES (500) case directories, nothing is done.
# Quiet: generator output goes to OUTDIR/generate.log; prints one summary line.
# Exit status: 0 ok/skipped, 1 generation failed, 2 usage error.
#
# Environment: PYTHON (default /usr/bin/python3, Debian's python3 + python3-onnx).
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi

OUTDIR=$1
PYTHON=${PYTHON:-/usr/bin/python3}
MIN_CASES=500
STAMP="$OUTDIR/.onnx_node_cases.stamp"
LOG="$OUTDIR/generate.log"

count_cases() {
    if [ -d "$OUTDIR/node" ]; then
        find "$OUTDIR/node" -mindepth 1 -maxdepth 1 -type d -name 'test_*' | wc -l
    else
        echo 0
    fi
}

if [ -f "$STAMP" ] && [ "$(count_cases)" -gt "$MIN_CASES" ]; then
    echo "onnx node cases: up to date ($(count_cases) in $OUTDIR/node)"
    exit 0
fi

mkdir -p "$OUTDIR"
rm -f "$STAMP"
start=$(date +%s)

if ! "$PYTHON" -c '
import sys
import numpy as np
np.float = float; np.int = int; np.bool = bool; np.object = object; np.complex = complex
out = sys.argv[1]
sys.argv = ["x", "generate-data", "-o", out]
from onnx.backend.test import cmd_tools
cmd_tools.main()
' "$OUTDIR" >"$LOG" 2>&1; then
    echo "error: onnx test-data generation failed (last lines of $LOG):" >&2
    tail -n 20 "$LOG" >&2
    exit 1
fi

n=$(count_cases)
if [ "$n" -le "$MIN_CASES" ]; then
    echo "error: only $n node cases generated in $OUTDIR/node (expected > $MIN_CASES); see $LOG" >&2
    exit 1
fi

onnx_version=$("$PYTHON" -c 'import onnx; print(onnx.__version__)' 2>/dev/null || echo unknown)
printf 'onnx=%s cases=%s generated=%s\n' "$onnx_version" "$n" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$STAMP"
echo "onnx node cases: generated $n in $OUTDIR/node ($(( $(date +%s) - start ))s, onnx $onnx_version)"
