#!/usr/bin/env python3
"""Writes ONNX's node test cases, as the installed (PyPI) onnx defines them, in the ONNX test-case layout.

Usage: generate_pypi_node_cases.py OUTDIR

OUTDIR/test_*/model.onnx and OUTDIR/test_*/test_data_set_N/{input,output}_M.pb, from
onnx.backend.test.case.node.collect_testcases() (each case at the opset its generator chose,
mostly the newest). Idempotent: when OUTDIR/.stamp names the same onnx version, nothing is done.
Prints one summary line.
"""
import os
import shutil
import sys
import time

import warnings

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def serialize(value, value_info):
    t = value_info.type
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, value_info.name).SerializeToString()
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, value_info.name).SerializeToString()
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, value_info.name).SerializeToString()
    if isinstance(value, TensorProto):
        return value.SerializeToString()
    return numpy_helper.from_array(value, value_info.name).SerializeToString()


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    stamp = os.path.join(out, ".stamp")
    if os.path.exists(stamp) and open(stamp).read().strip() == onnx.__version__:
        n = sum(1 for d in os.listdir(out) if d.startswith("test_"))
        print(f"pypi onnx node cases: up to date ({n} in {out}, onnx {onnx.__version__})")
        return 0
    start = time.time()
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node.collect_testcases()
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for case in cases:
        d = os.path.join(out, case.name)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            ds = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(ds)
            for j, value in enumerate(inputs):
                with open(os.path.join(ds, f"input_{j}.pb"), "wb") as f:
                    f.write(serialize(value, graph.input[j]))
            for j, value in enumerate(outputs):
                with open(os.path.join(ds, f"output_{j}.pb"), "wb") as f:
                    f.write(serialize(value, graph.output[j]))
    with open(stamp, "w") as f:
        f.write(onnx.__version__ + "\n")
    print(f"pypi onnx node cases: generated {len(cases)} in {out} ({time.time() - start:.0f}s, onnx {onnx.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
