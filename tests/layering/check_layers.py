#!/usr/bin/env python3
"""korch's layers include only what lies below them (docs/architecture.md). Each folder of src/
may include headers of the folders listed for it here and nothing else of korch's; the folders
above the backend interface (cost, orchestrate, runtime, export outside the package's own
runtime sources, api) include no CPU-backend header and no Halide or oneDNN header. Prints every
wrong-way include and exits 1 when there is one.

usage: check_layers.py SOURCE_DIR
"""
import os
import re
import sys

BELOW = {
    "util": [],
    "ir": ["util"],
    "reference": ["ir", "util"],
    "fission": ["reference", "ir", "util"],
    "rewrite": ["reference", "ir", "util"],
    "frontend": ["fission", "rewrite", "reference", "ir", "util"],
    "check": ["frontend", "fission", "rewrite", "reference", "ir", "util"],
    "plan": ["reference", "ir", "util"],
    "backend": ["plan", "reference", "ir", "util"],
    "backend/reference": ["backend", "plan", "reference", "ir", "util"],
    "cost": ["backend", "plan", "reference", "ir", "util"],
    "orchestrate": ["cost", "backend", "plan", "reference", "ir", "util"],
    "runtime": ["orchestrate", "cost", "backend", "plan", "reference", "ir", "util"],
    "backend/halide": ["plan", "reference", "ir", "util"],
    "backend/cuda": ["backend/halide", "backend", "cost", "plan", "reference", "ir", "util"],
    "backend/cpu": ["backend/halide", "backend", "cost", "plan", "reference", "ir", "util", "export/runtime"],
    "export": ["runtime", "orchestrate", "cost", "backend", "plan", "frontend", "reference", "ir", "util",
               "export/runtime"],
    # The package's own runtime: compiled into exported packages with the CPU backend's kernels.
    "export/runtime": ["backend/cpu", "backend", "runtime", "plan", "reference", "ir", "util"],
    "api": ["runtime", "orchestrate", "cost", "backend", "plan", "check", "frontend", "fission", "reference", "ir",
            "util", "korch"],
}
# Folders that must not see code generators' libraries.
NO_CODEGEN_LIBRARIES = {"util", "ir", "reference", "fission", "rewrite", "frontend", "check", "plan", "backend",
                        "backend/reference", "cost", "orchestrate", "runtime", "export", "api"}
CODEGEN_HEADER = re.compile(r"^(Halide|HalideRuntime|dnnl|oneapi/dnnl/|omp\.h)")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(path):
    """The layer a source file (relative to src/) belongs to."""
    parts = path.split("/")
    for depth in (2, 1):
        if len(parts) > depth and "/".join(parts[:depth]) in BELOW:
            return "/".join(parts[:depth])
    return None


def layer_of_include(header, known):
    parts = header.split("/")
    for depth in (2, 1):
        if len(parts) > depth and "/".join(parts[:depth]) in known:
            return "/".join(parts[:depth])
    return None


def main():
    src = os.path.join(sys.argv[1], "src")
    known = set(BELOW) | {"korch"}
    problems = []
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith((".h", ".cc")):
                continue
            path = os.path.relpath(os.path.join(root, name), src)
            layer = folder_of(path)
            if layer is None:
                problems.append(f"{path}: in no layer (add its folder to check_layers.py)")
                continue
            for line in open(os.path.join(root, name), encoding="utf-8"):
                m = INCLUDE.match(line)
                if not m:
                    continue
                header = m.group(2)
                if m.group(1) == "<" or layer_of_include(header, known) is None:
                    if layer in NO_CODEGEN_LIBRARIES and CODEGEN_HEADER.match(header):
                        problems.append(f"{path}: includes {header} (code generator libraries live in backends)")
                    continue
                target = layer_of_include(header, known)
                if target != layer and target not in BELOW[layer]:
                    problems.append(f"{path}: {layer} includes {header} ({target} is not below it)")
    for p in problems:
        print(p)
    print("layering:", "PASS" if not problems else f"FAIL ({len(problems)} wrong-way includes)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
