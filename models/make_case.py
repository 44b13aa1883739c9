#!/usr/bin/env python3
"""Write and inspect ONNX backend-test-style case directories.

Layout (same as onnx/backend/test/data/node/*):

    CASE/model.onnx
    CASE/test_data_set_0/input_0.pb, input_1.pb, ...
    CASE/test_data_set_0/output_0.pb, output_1.pb, ...

Each .pb file is a serialized onnx.TensorProto whose ``name`` is the graph
input/output name it belongs to.

Library use:
    from make_case import write_test_data_set, read_test_data_set
    write_test_data_set(case_dir, [("input", x)], [("logits", y)])

Command line:
    python3 models/make_case.py --check CASE_DIR
        prints model opset, inputs/outputs, op_type counts and every tensor
        file (name, shape, dtype).
"""
import argparse
import glob
import os
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def _tensor(name, array):
    t = numpy_helper.from_array(np.ascontiguousarray(array))
    t.name = name
    return t


def write_test_data_set(case_dir, inputs, outputs, index=0):
    """Write test_data_set_<index>/ under case_dir.

    inputs, outputs: sequences of (name, numpy array) in graph order.
    Returns the data-set directory path.
    """
    ds = os.path.join(case_dir, "test_data_set_%d" % index)
    os.makedirs(ds, exist_ok=True)
    for prefix, items in (("input", inputs), ("output", outputs)):
        for i, (name, arr) in enumerate(items):
            with open(os.path.join(ds, "%s_%d.pb" % (prefix, i)), "wb") as f:
                f.write(_tensor(name, arr).SerializeToString())
    return ds


def read_tensor(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return t.name, numpy_helper.to_array(t)


def _index(path):
    m = re.search(r"_(\d+)\.pb$", path)
    return int(m.group(1)) if m else -1


def read_test_data_set(ds_dir):
    """Return (inputs, outputs) as lists of (name, numpy array), index order."""
    res = []
    for prefix in ("input", "output"):
        files = sorted(glob.glob(os.path.join(ds_dir, prefix + "_*.pb")), key=_index)
        res.append([read_tensor(p) for p in files])
    return tuple(res)


def _graph_io(model_path):
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}

    def desc(v):
        tt = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                for d in tt.shape.dim]
        return "%s %s %s" % (v.name, onnx.TensorProto.DataType.Name(tt.elem_type), dims)

    opsets = ", ".join("%s:%d" % (o.domain or "ai.onnx", o.version) for o in m.opset_import)
    ins = [desc(v) for v in m.graph.input if v.name not in inits]
    outs = [desc(v) for v in m.graph.output]
    return opsets, ins, outs, op_histogram(m.graph)


def op_histogram(graph):
    """Count op_types in a graph, including If/Loop/Scan subgraphs."""
    counts = {}
    for node in graph.node:
        key = node.op_type if not node.domain else "%s::%s" % (node.domain, node.op_type)
        counts[key] = counts.get(key, 0) + 1
        for attr in node.attribute:
            subs = list(attr.graphs) + ([attr.g] if attr.HasField("g") else [])
            for sub in subs:
                for k, v in op_histogram(sub).items():
                    counts[k] = counts.get(k, 0) + v
    return counts


def check(case_dir):
    model_path = os.path.join(case_dir, "model.onnx")
    if os.path.exists(model_path):
        opsets, ins, outs, ops = _graph_io(model_path)
        print("model.onnx  opset: %s" % opsets)
        for s in ins:
            print("  graph input  " + s)
        for s in outs:
            print("  graph output " + s)
        print("  ops (%d nodes): %s" % (sum(ops.values()), " ".join(
            "%s:%d" % kv for kv in sorted(ops.items()))))
    else:
        print("(no model.onnx)")
    sets = sorted(glob.glob(os.path.join(case_dir, "test_data_set_*")))
    if not sets:
        print("no test_data_set_* directories")
        return 1
    for ds in sets:
        print(os.path.basename(ds))
        inputs, outputs = read_test_data_set(ds)
        for kind, items in (("input", inputs), ("output", outputs)):
            for i, (name, arr) in enumerate(items):
                print("  %s_%d  name=%-24s shape=%-20s dtype=%s" %
                      (kind, i, name, list(arr.shape), arr.dtype))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", metavar="DIR", required=True,
                    help="print names/shapes/dtypes of a case directory")
    args = ap.parse_args(argv)
    return check(args.check)


if __name__ == "__main__":
    sys.exit(main())
