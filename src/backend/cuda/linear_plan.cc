// Planning a linear kernel on the GPU: the graph's MatMul / Conv / ConvTranspose with its folded
// prologue and epilogue (linear_epilogue.cc) becomes one cuBLASLt matmul or one cuDNN call,
// described as data (linear_internal.h). No CUDA call is made here.
//
//   MatMul        -> cuBLASLt, row-major through the swap D^T = B^T A^T; a Transpose of the last
//                    two axes feeding an operand is its transpose flag; batch dims per operand
//                    all equal to the output's (strided) or all 1 (stride 0); A's batch folded
//                    into rows when B is shared; alpha, bias, ReLU, tanh-GELU, residual as C
//                    (beta = 1).
//   Conv          -> cuDNN, 1-D (H = 1) and 2-D, groups, strides, dilations, symmetric padding
//                    (a preceding zero Pad folded in); bias / ReLU / residual through
//                    cudnnConvolutionBiasActivationForward (residual as z, alpha2 = 1).
//   ConvTranspose -> cudnnConvolutionBackwardData, no epilogue.
// f32 only. Anything else is refused with a one-line reason.
#include <algorithm>
#include <sstream>

#include "backend/cuda/linear_internal.h"
#include "util/error.h"

namespace korch::cuda::linear_detail {

const char* gemm_epilogue_name(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::Default: return "DEFAULT";
    case GemmEpilogue::Relu: return "RELU";
    case GemmEpilogue::Bias: return "BIAS";
    case GemmEpilogue::ReluBias: return "RELU_BIAS";
    case GemmEpilogue::Gelu: return "GELU";
    case GemmEpilogue::GeluBias: return "GELU_BIAS";
  }
  return "?";
}

namespace {

struct Refusal {
  std::string why;
};
template <typename... Args>
[[noreturn]] void refuse(const Args&... args) {
  throw Refusal{str_cat(args...)};
}

class Planner {
 public:
  Planner(const PrimGraph& g, const Kernel& k) : g_(g), k_(k) {
    for (PrimId p : k.prims) inside_.push_back(p);
  }

  PlannedCall plan() {
    PrimId lin = kNone;
    for (PrimId p : k_.prims)
      if (prim_kind(g_.prim(p).op) == PrimKind::Linear) {
        if (lin != kNone)
          refuse("kernel has more than one linear primitive (", prim_op_name(g_.prim(lin).op), ", ",
                 prim_op_name(g_.prim(p).op), ")");
        lin = p;
      }
    if (lin == kNone) refuse("kernel has no linear primitive");
    const Primitive& l = g_.prim(lin);
    for (TensorId t : {l.inputs[0], l.inputs[1], l.output})
      if (g_.tensor(t).dtype != DType::F32)
        refuse("'", g_.tensor(t).name, "' is ", dtype_name(g_.tensor(t).dtype), " (GPU linear kernels are f32 only)");
    covered_.push_back(lin);
    size_t rank = g_.tensor(l.output).shape.size();
    size_t channel_axis = l.op == PrimOp::MatMul ? rank - 1 : 1;
    std::string why;
    if (!analyse_epilogue(g_, k_, lin, channel_axis, &ep_, &why)) refuse(why);
    covered_.insert(covered_.end(), ep_.prims.begin(), ep_.prims.end());
    PlannedCall call;
    if (l.op == PrimOp::MatMul)
      plan_gemm(l, &call);
    else
      plan_conv(l, &call);
    for (PrimId p : k_.prims)
      if (std::find(covered_.begin(), covered_.end(), p) == covered_.end())
        refuse("primitive ", prim_op_name(g_.prim(p).op), " is neither a foldable prologue nor on the epilogue chain");
    call.description = describe(call);
    return call;
  }

 private:
  const PrimGraph& g_;
  const Kernel& k_;
  std::vector<PrimId> inside_, covered_;
  Epilogue ep_;

  bool produced_inside(TensorId t) const {
    PrimId p = g_.tensor(t).producer;
    return p != kNone && std::find(inside_.begin(), inside_.end(), p) != inside_.end();
  }
  int input_index(TensorId t) const {
    auto it = std::find(k_.inputs.begin(), k_.inputs.end(), t);
    if (it == k_.inputs.end()) refuse("'", g_.tensor(t).name, "' is computed inside the kernel");
    return static_cast<int>(it - k_.inputs.begin());
  }
  // The prologue primitive producing linear operand t inside the kernel, or kNone.
  PrimId prologue_of(TensorId t, const char* linear) {
    if (!produced_inside(t)) return kNone;
    PrimId p = g_.tensor(t).producer;
    int uses = 0;
    for (PrimId q : k_.prims)
      for (TensorId in : g_.prim(q).inputs) uses += in == t;
    if (uses != 1) refuse(prim_op_name(g_.prim(p).op), " feeding ", linear, " is also used elsewhere in the kernel");
    if (produced_inside(g_.prim(p).inputs[0]))
      refuse("prologue ", prim_op_name(g_.prim(p).op), " of ", linear, " is itself computed inside the kernel");
    covered_.push_back(p);
    return p;
  }

  // ------------------------------------------------------------------ MatMul -> cuBLASLt
  struct Operand {
    TensorId t = kNone;
    bool trans = false;   // stored with its last two axes swapped
    bool shared = false;  // no batch dims (stride 0)
  };

  Operand matmul_operand(TensorId t, const Shape& out, char name, PlannedCall* call) {
    Operand o;
    o.t = t;
    if (PrimId p = prologue_of(t, "MatMul"); p != kNone) {
      const Primitive& pro = g_.prim(p);
      if (pro.op != PrimOp::Transpose)
        refuse("prologue op ", prim_op_name(pro.op), " of MatMul is not foldable (only a Transpose is)");
      const auto& perm = pro.attrs.ints("perm");
      size_t r = perm.size();
      bool swap = r >= 2 && perm[r - 1] == static_cast<int64_t>(r - 2) && perm[r - 2] == static_cast<int64_t>(r - 1);
      for (size_t i = 0; i + 2 < r; ++i) swap &= perm[i] == static_cast<int64_t>(i);
      if (!swap) refuse("Transpose feeding MatMul ", name, " permutes more than its last two axes");
      o.t = pro.inputs[0];
      o.trans = true;
      if (g_.tensor(o.t).dtype != DType::F32) refuse("MatMul operand is not f32");
      call->folded.push_back(std::string("transposed ") + name);
    }
    const Shape& s = g_.tensor(t).shape;  // the logical (untransposed view) shape
    size_t shift = out.size() - s.size();
    bool all_equal = true, all_one = true;
    for (size_t i = 0; i + 2 < out.size(); ++i) {
      int64_t d = i < shift ? 1 : s[i - shift];
      all_equal &= d == out[i];
      all_one &= d == 1;
    }
    if (!all_equal && !all_one)
      refuse("MatMul operand ", name, " of shape ", shape_str(s), " broadcasts only some batch dims of ",
             shape_str(out));
    o.shared = all_one && out.size() > 2;
    return o;
  }

  void plan_gemm(const Primitive& l, PlannedCall* call) {
    call->gemm = true;
    GemmCall& c = call->g;
    const Shape& out = g_.tensor(l.output).shape;
    size_t r = out.size();
    Operand a = matmul_operand(l.inputs[0], out, 'A', call);
    Operand b = matmul_operand(l.inputs[1], out, 'B', call);
    int64_t rows = out[r - 2], cols = out[r - 1], inner = g_.tensor(l.inputs[0]).shape.back();
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < r; ++i) batch *= out[i];
    bool residual_shared = false;
    if (ep_.residual != kNone) {
      const Shape& rs = g_.tensor(ep_.residual).shape;
      residual_shared = r > 2 && num_elements(rs) == rows * cols && batch > 1;
    }
    // A's batch dims become more rows of one GEMM when B (and C) are shared by every batch.
    if (batch > 1 && b.shared && !a.shared && !a.trans && !residual_shared) {
      rows *= batch;
      batch = 1;
      call->folded.push_back("batch folded into rows");
    }
    // Column-major: D^T (cols x rows) = op(B)^T (cols x inner) * op(A)^T (inner x rows).
    c.m = cols;
    c.n = rows;
    c.k = inner;
    c.batch = batch;
    c.a = input_index(b.t);
    c.trans_a = b.trans;
    c.lda = b.trans ? inner : cols;
    c.b = input_index(a.t);
    c.trans_b = a.trans;
    c.ldb = a.trans ? rows : inner;
    c.ldc = cols;
    c.stride_a = batch > 1 && !b.shared ? inner * cols : 0;
    c.stride_b = batch > 1 && !a.shared ? rows * inner : 0;
    c.stride_d = batch > 1 ? rows * cols : 0;
    c.alpha = ep_.alpha;
    if (ep_.residual != kNone) {
      c.c = input_index(ep_.residual);
      c.beta = 1;
      c.stride_c = batch > 1 && !residual_shared ? rows * cols : 0;
    }
    bool bias = ep_.bias != kNone;
    if (bias) c.bias = input_index(ep_.bias);
    switch (ep_.act) {
      case Activation::None: c.epilogue = bias ? GemmEpilogue::Bias : GemmEpilogue::Default; break;
      case Activation::Relu: c.epilogue = bias ? GemmEpilogue::ReluBias : GemmEpilogue::Relu; break;
      case Activation::GeluTanh: c.epilogue = bias ? GemmEpilogue::GeluBias : GemmEpilogue::Gelu; break;
    }
  }

  // ------------------------------------------------------------------ Conv / ConvTranspose -> cuDNN
  void plan_conv(const Primitive& l, PlannedCall* call) {
    const char* name = prim_op_name(l.op);
    ConvCall& c = call->c;
    c.backward_data = l.op == PrimOp::ConvTranspose;
    const Attrs& at = l.attrs;
    const Shape& xs = g_.tensor(l.inputs[0]).shape;
    const Shape& ws = g_.tensor(l.inputs[1]).shape;
    const Shape& ys = g_.tensor(l.output).shape;
    size_t nsp = xs.size() - 2;
    if (nsp < 1 || nsp > 2) refuse(name, " with ", nsp, " spatial dims (cuDNN calls here are 1-D and 2-D)");
    if (produced_inside(l.inputs[1])) refuse("the weight of ", name, " is computed inside the kernel");
    const auto& pads = at.ints("pads");
    std::vector<int64_t> pb(pads.begin(), pads.begin() + nsp), pe(pads.begin() + nsp, pads.end());
    TensorId src = l.inputs[0];
    if (PrimId pp = prologue_of(src, name); pp != kNone) {
      const Primitive& pad = g_.prim(pp);
      if (pad.op != PrimOp::Pad || c.backward_data)
        refuse("prologue op ", prim_op_name(pad.op), " of ", name, " is not foldable (only a zero Pad into Conv is)");
      const auto& pp2 = pad.attrs.ints("pads");
      size_t rank = xs.size();
      if (pad.attrs.s("mode") != "constant" || pad.attrs.f("value") != 0.0)
        refuse("Pad folded into Conv must be constant-mode with value 0");
      if (pp2[0] || pp2[1] || pp2[rank] || pp2[rank + 1]) refuse("Pad folded into Conv pads batch/channel dims");
      for (size_t i = 0; i < nsp; ++i) {
        if (pp2[2 + i] < 0 || pp2[rank + 2 + i] < 0) refuse("Pad folded into Conv has negative pads");
        pb[i] += pp2[2 + i];
        pe[i] += pp2[rank + 2 + i];
      }
      src = pad.inputs[0];
      if (g_.tensor(src).dtype != DType::F32) refuse("Conv input is not f32");
      call->folded.push_back("pad");
    }
    const Shape& in = g_.tensor(src).shape;
    const auto& strides = at.ints("strides");
    const auto& dil = at.ints("dilations");
    c.groups = at.i("group");
    // 1-D as 2-D with H = 1: spatial axis i of the call is 2 - nsp + ... (index 1 for 1-D).
    size_t shift = 2 - nsp;
    auto dims4 = [&](const Shape& s, int64_t* d) {
      d[0] = s[0];
      d[1] = s[1];
      d[2] = nsp == 1 ? 1 : s[2];
      d[3] = s[s.size() - 1];
    };
    for (size_t i = 0; i < nsp; ++i) {
      c.pad[shift + i] = pb[i];
      c.stride[shift + i] = strides[i];
      c.dilation[shift + i] = dil[i];
    }
    dims4(ws, c.filter);
    // The forward convolution's geometry: from (x, pad both sides) to y.
    const Shape& fx = c.backward_data ? ys : in;  // forward input (dx for ConvTranspose)
    const Shape& fy = c.backward_data ? in : ys;  // forward output (dy)
    for (size_t i = 0; i < nsp; ++i) {
      int64_t k = ws[2 + i];
      int64_t span = fx[2 + i] + 2 * pb[i] - dil[i] * (k - 1) - 1;
      int64_t n = span < 0 ? 0 : span / strides[i] + 1;
      if (n != fy[2 + i])
        refuse(name, " padding ", pb[i], "/", pe[i], " on spatial axis ", i,
               " is not expressible with cuDNN's symmetric padding");
    }
    if (c.backward_data) {
      dims4(in, c.in);   // dy
      dims4(ys, c.out);  // dx
      if (ep_.alpha != 1 || ep_.bias != kNone || ep_.residual != kNone || ep_.act != Activation::None)
        refuse("ConvTranspose with an epilogue (cudnnConvolutionBackwardData fuses none)");
    } else {
      dims4(in, c.in);
      dims4(ys, c.out);
      if (ep_.act == Activation::GeluTanh) refuse("GELU after Conv (cuDNN's fused call has ReLU only)");
      c.alpha = ep_.alpha;
      c.fused = ep_.bias != kNone || ep_.residual != kNone || ep_.act != Activation::None;
      c.relu = ep_.act == Activation::Relu;
      if (ep_.bias != kNone) c.bias = input_index(ep_.bias);
      if (ep_.residual != kNone) {
        if (num_elements(g_.tensor(ep_.residual).shape) != num_elements(ys))  // aligned full shape: dense NCHW
          refuse("Conv residual of shape ", shape_str(g_.tensor(ep_.residual).shape));
        c.z = input_index(ep_.residual);
      }
    }
    c.x = input_index(src);
    c.w = input_index(l.inputs[1]);
  }

  static std::string describe(const PlannedCall& call) {
    std::ostringstream os;
    if (call.gemm) {
      const GemmCall& c = call.g;
      // In the row-major terms of the graph: m rows, n columns.
      os << "cublasLt: m=" << c.n << " n=" << c.m << " k=" << c.k << " batch=" << c.batch;
      if (c.trans_b) os << " transa";
      if (c.trans_a) os << " transb";
      if (c.batch > 1 && c.stride_a == 0) os << " shared-B";
      if (c.batch > 1 && c.stride_b == 0) os << " shared-A";
      if (c.alpha != 1) os << " alpha=" << c.alpha;
      if (c.c >= 0) os << " residual(beta=1)";
      os << " epilogue=" << gemm_epilogue_name(c.epilogue);
    } else {
      const ConvCall& c = call.c;
      os << (c.backward_data ? "cudnn: ConvolutionBackwardData"
             : c.fused       ? "cudnn: ConvolutionBiasActivationForward"
                             : "cudnn: ConvolutionForward");
      os << " in=" << c.in[0] << "x" << c.in[1] << "x" << c.in[2] << "x" << c.in[3] << " filter=" << c.filter[0] << "x"
         << c.filter[1] << "x" << c.filter[2] << "x" << c.filter[3] << " pad=" << c.pad[0] << "," << c.pad[1]
         << " stride=" << c.stride[0] << "," << c.stride[1] << " dil=" << c.dilation[0] << "," << c.dilation[1];
      if (c.groups > 1) os << " groups=" << c.groups;
      if (c.alpha != 1) os << " alpha=" << c.alpha;
      if (c.fused)
        os << " bias=" << (c.bias >= 0 ? "yes" : "zero") << " act=" << (c.relu ? "RELU" : "IDENTITY")
           << (c.z >= 0 ? " z(alpha2=1)" : "");
    }
    for (const std::string& f : call.folded) os << " [" << f << "]";
    return os.str();
  }
};

}  // namespace

bool plan_linear(const PrimGraph& g, const Kernel& k, PlannedCall* call, std::string* why_not) {
  try {
    Planner planner(g, k);
    *call = planner.plan();
    return true;
  } catch (const Refusal& r) {
    if (why_not) *why_not = r.why;
  }
  return false;
}

int planned_variants(const PlannedCall& call) {
  if (call.gemm) return 4;                     // cuBLASLt heuristic results
  if (call.c.backward_data) return 3;          // cudnnGetConvolutionBackwardDataAlgorithm_v7 results
  if (call.c.fused && !call.c.relu) return 1;  // identity activation: IMPLICIT_PRECOMP_GEMM only
  return 4;                                    // cudnnGetConvolutionForwardAlgorithm_v7 results
}

}  // namespace korch::cuda::linear_detail
