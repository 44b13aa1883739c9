#!/usr/bin/env python3
"""Export a (randomly initialised) PyTorch/torchvision model to an ONNX test case.

Usage:
    python3 models/export_torchvision.py NAME OUTDIR [--size N] [--opset N] [--batch N]
        [--layers 2 --d-model 64 --heads 4 --ff 128 --seq 16]   # transformer_encoder only

Writes the ONNX backend-test layout:
    OUTDIR/model.onnx
    OUTDIR/test_data_set_0/input_0.pb      (TensorProto, name = graph input name)
    OUTDIR/test_data_set_0/output_K.pb     (PyTorch reference outputs, same input)

Weights are random (torch.manual_seed(0), weights=None; nothing is downloaded),
the model is in eval() mode, the input is torch.randn from a generator seeded
with 0, shapes are static (no dynamic_axes) and constant folding is on.
Reference outputs are computed with torch.no_grad() on the same input.
Unless --pristine is given, make_testable() first replaces degenerate init
(zero biases/heads, ConvNeXt layer_scale=1e-6, default BatchNorm stats) so
the reference outputs are numerically meaningful; see its docstring.

Supported NAMEs: see MODELS below (`--list` prints them with their default
opset and input size). The default opset per model is the lowest one in
13..17 that exports and passes onnx.checker with torch 1.13.

Exit status: 0 ok, 2 the model cannot be exported with this torch version
(torch.onnx.export raised, e.g. an unsupported operator), 1 any other error
(including usage errors).
"""
import argparse
import os
import sys
import time
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_case import write_test_data_set  # noqa: E402


# --------------------------------------------------------------------------
# Small models defined here
# --------------------------------------------------------------------------
class TinyCNN(nn.Module):
    """conv/bn/relu, maxpool, one residual block, global avg pool, linear."""

    def __init__(self, ch=8, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch),
            nn.ReLU(inplace=True), nn.MaxPool2d(2))
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch)
        self.down = nn.Sequential(
            nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1), nn.ReLU(inplace=True))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2 * ch, num_classes)

    def forward(self, x):
        x = self.stem(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        x = torch.relu(x + y)
        x = self.down(x)
        x = torch.flatten(self.pool(x), 1)
        return self.fc(x)


class SegOut(nn.Module):
    """Wrap a torchvision segmentation model and return only result['out']."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def make_testable(model, make_input_fn, calib_batches=2):
    """Turn a freshly initialised model into one whose outputs are a useful
    numerical reference (torchvision init zeroes many tensors, and BatchNorm
    with default running stats makes deep nets vanish or explode):

      * parameters that are all zeros (biases, ViT head/class token)
        -> N(0, 0.02); all ones (norm scales) -> 1 + N(0, 0.1);
      * ConvNeXt layer_scale (1e-6) -> U(0.1, 0.5) so residual blocks matter;
      * BatchNorm running stats are calibrated: BN layers alone in train mode
        (cumulative average), a few seeded random batches forwarded, then eval.

    Uses the global torch RNG (seeded by the caller). Disabled by --pristine.
    """
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):
                p.uniform_(0.1, 0.5)
            elif torch.all(p == 0):
                p.normal_(0.0, 0.02)
            elif torch.all(p == 1):
                p.add_(torch.randn_like(p) * 0.1)
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    model.eval()
    for m in bns:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average
        m.train()
    with torch.no_grad():
        for _ in range(calib_batches):
            model(make_input_fn())
    model.eval()


# --------------------------------------------------------------------------
# Model table: name -> (builder(args), default opset, default input size)
# --------------------------------------------------------------------------
def _tv(fn_name, **kw):
    def build(args):
        import torchvision.models as tvm
        return getattr(tvm, fn_name)(weights=None, **kw)
    return build


def _build_vit_b_16(args):
    """ViT-B/16 at the requested image size (224 by default; 384 gives 577 tokens)."""
    import torchvision.models as tvm
    return tvm.vit_b_16(weights=None, image_size=args.size)


def _build_deeplab(args):
    import torchvision.models.segmentation as seg
    return SegOut(seg.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, aux_loss=False))


def _build_tiny_cnn(args):
    return TinyCNN()


def _build_tiny_vit(args):
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=args.size, patch_size=8, num_layers=2,
                             num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10)


def _build_transformer_encoder(args):
    layer = nn.TransformerEncoderLayer(
        d_model=args.d_model, nhead=args.heads, dim_feedforward=args.ff,
        dropout=0.1, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=args.layers,
                                 enable_nested_tensor=False)


# Every model exports and passes onnx.checker at opsets 13..17 with torch 1.13
# (swin_t included), so the default is 13 throughout.
MODELS = {
    # name: (builder, default opset, default image size or None)
    "resnet18": (_tv("resnet18"), 13, 224),
    "resnet50": (_tv("resnet50"), 13, 224),
    "squeezenet1_1": (_tv("squeezenet1_1"), 13, 224),
    "googlenet": (_tv("googlenet"), 13, 224),
    "mobilenet_v3_small": (_tv("mobilenet_v3_small"), 13, 224),
    "mobilenet_v3_large": (_tv("mobilenet_v3_large"), 13, 224),
    "efficientnet_b0": (_tv("efficientnet_b0"), 13, 224),
    "convnext_tiny": (_tv("convnext_tiny"), 13, 224),
    "vit_b_16": (_build_vit_b_16, 13, 224),
    "swin_t": (_tv("swin_t"), 13, 224),
    "deeplabv3_mobilenet_v3_large": (_build_deeplab, 13, 224),
    "tiny_cnn": (_build_tiny_cnn, 13, 32),
    "tiny_vit": (_build_tiny_vit, 13, 32),
    "transformer_encoder": (_build_transformer_encoder, 13, None),
}


class ExportUnsupported(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1, keeping exit status 2 for 'cannot be exported'."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(1, "%s: error: %s\n" % (self.prog, message))


def parse_args(argv=None):
    ap = _Parser(
        description="Export a randomly initialised model to an ONNX test case.")
    ap.add_argument("name", nargs="?", help="model name (see --list)")
    ap.add_argument("outdir", nargs="?", help="output case directory")
    ap.add_argument("--list", action="store_true", help="list models and exit")
    ap.add_argument("--size", type=int, default=None,
                    help="input image size N (input is [batch,3,N,N])")
    ap.add_argument("--opset", type=int, default=None,
                    help="ONNX opset, 13..17 (default: per-model)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbose", action="store_true",
                    help="show torch tracer/export warnings")
    ap.add_argument("--pristine", action="store_true",
                    help="keep torchvision's init as is (no make_testable)")
    g = ap.add_argument_group("transformer_encoder")
    g.add_argument("--layers", type=int, default=2)
    g.add_argument("--d-model", type=int, default=64)
    g.add_argument("--heads", type=int, default=4)
    g.add_argument("--ff", type=int, default=128)
    g.add_argument("--seq", type=int, default=16)
    args = ap.parse_args(argv)
    if args.list:
        return args
    if not args.name or not args.outdir:
        ap.error("NAME and OUTDIR are required")
    if args.name not in MODELS:
        ap.error("unknown model %r; choose from: %s" % (args.name, ", ".join(MODELS)))
    _, def_opset, def_size = MODELS[args.name]
    if args.opset is None:
        args.opset = def_opset
    if not 13 <= args.opset <= 17:
        ap.error("--opset must be in 13..17")
    if args.size is None:
        args.size = def_size
    return args


def make_input(args, gen, batch=None):
    batch = args.batch if batch is None else batch
    if args.name == "transformer_encoder":
        shape = (batch, args.seq, args.d_model)
    else:
        shape = (batch, 3, args.size, args.size)
    return torch.randn(*shape, generator=gen)


def export(args):
    builder = MODELS[args.name][0]
    torch.manual_seed(args.seed)
    model = builder(args).eval()
    if not args.pristine:
        calib_gen = torch.Generator().manual_seed(args.seed + 1)
        make_testable(model, lambda: make_input(args, calib_gen, batch=4))
    n_params = sum(p.numel() for p in model.parameters())

    gen = torch.Generator().manual_seed(args.seed)
    x = make_input(args, gen)

    with torch.no_grad():
        ref = model(x)
    refs = list(ref) if isinstance(ref, (tuple, list)) else [ref]
    in_names = ["input"]
    out_names = ["output"] if len(refs) == 1 else ["output_%d" % i for i in range(len(refs))]

    os.makedirs(args.outdir, exist_ok=True)
    model_path = os.path.join(args.outdir, "model.onnx")
    # NB: export with autograd enabled (parameters require grad): under
    # no_grad, torch 1.13 routes nn.MultiheadAttention / TransformerEncoderLayer
    # to fused "fast path" kernels (aten::_native_multi_head_attention,
    # aten::_transformer_encoder_layer_fwd) that have no ONNX symbolic.
    try:
        with torch.enable_grad():
            torch.onnx.export(
                model, (x,), model_path,
                opset_version=args.opset,
                do_constant_folding=True,
                input_names=in_names, output_names=out_names,
                export_params=True, training=torch.onnx.TrainingMode.EVAL)
    except Exception as e:  # unsupported operator / opset in this torch version
        msg = str(e).strip().splitlines()
        raise ExportUnsupported("%s: %s" % (type(e).__name__, msg[0] if msg else ""))

    onnx_model = onnx.load(model_path)
    onnx.checker.check_model(onnx_model)
    # Use the names that actually ended up in the graph.
    g_inits = {i.name for i in onnx_model.graph.initializer}
    g_in = [v.name for v in onnx_model.graph.input if v.name not in g_inits]
    g_out = [v.name for v in onnx_model.graph.output]
    assert len(g_in) == 1 and len(g_out) == len(refs), (g_in, g_out)

    write_test_data_set(args.outdir, [(g_in[0], x.numpy())],
                        [(n, r.detach().numpy()) for n, r in zip(g_out, refs)])
    return n_params, [tuple(r.shape) for r in refs], refs


def main(argv=None):
    args = parse_args(argv)
    if not args.verbose:
        # TracerWarnings (asserts/shape checks baked in as constants) and
        # shape-inference UserWarnings are expected for static-shape export.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=UserWarning)
    if args.list:
        for n, (_, o, s) in MODELS.items():
            print("%-30s opset %d  size %s" % (n, o, s or "- (--seq/--d-model)"))
        return 0
    t0 = time.time()
    try:
        n_params, shapes, refs = export(args)
    except ExportUnsupported as e:
        print("ERROR: %s cannot be exported with torch %s at opset %d: %s"
              % (args.name, torch.__version__, args.opset, e), file=sys.stderr)
        return 2
    maxabs = max(float(np.abs(r.numpy()).max()) for r in refs)
    print("%s opset=%d params=%d outputs=%s max|out|=%.4g time=%.1fs"
          % (args.name, args.opset, n_params,
             ",".join("x".join(map(str, s)) for s in shapes), maxabs, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
