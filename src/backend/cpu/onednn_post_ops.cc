// Post-ops: the eltwise and binary post-ops a linear kernel's epilogue becomes, their names, the
// normalisation of a chain (identities dropped, linear ops folded, repeats of an algorithm that
// oneDNN 2.6 would get wrong rewritten or refused), and the fitting of an elementwise sub-graph
// (an activation fissioned into several primitives) to one of oneDNN's eltwise algorithms.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "backend/cpu/onednn_internal.h"
#include "reference/reference.h"

namespace korch::cpu::onednn_detail {

namespace {

std::string fmt_float(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Activation families the sub-graph fitting tries (dst = scale * f(x)).
struct Candidate {
  algorithm alg;
  double (*f)(double x, double alpha);
};

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double softplus(double x) { return x > 30 ? x : std::log1p(std::exp(x)); }

const Candidate kCandidates[] = {
    {algorithm::eltwise_gelu_erf, [](double x, double) { return 0.5 * x * (1 + std::erf(x * M_SQRT1_2)); }},
    {algorithm::eltwise_gelu_tanh,
     [](double x, double) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }},
    {algorithm::eltwise_swish, [](double x, double a) { return x * sigmoid(a * x); }},
    {algorithm::eltwise_mish, [](double x, double) { return x * std::tanh(softplus(x)); }},
    {algorithm::eltwise_hardswish, [](double x, double) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; }},
    {algorithm::eltwise_elu, [](double x, double a) { return x > 0 ? x : a * (std::exp(x) - 1); }},
    {algorithm::eltwise_soft_relu, [](double x, double) { return softplus(x); }},
    {algorithm::eltwise_logsigmoid, [](double x, double) { return -softplus(-x); }},
    {algorithm::eltwise_logistic, [](double x, double) { return sigmoid(x); }},
    {algorithm::eltwise_tanh, [](double x, double) { return std::tanh(x); }},
    {algorithm::eltwise_relu, [](double x, double) { return std::max(x, 0.0); }},
    {algorithm::eltwise_abs, [](double x, double) { return std::abs(x); }},
    {algorithm::eltwise_square, [](double x, double) { return x * x; }},
    {algorithm::eltwise_exp, [](double x, double) { return std::exp(x); }},
};

}  // namespace

PostOp eltwise(algorithm alg, float alpha, float beta, float scale) {
  PostOp p;
  p.alg = alg;
  p.alpha = alpha;
  p.beta = beta;
  p.scale = scale;
  return p;
}

PostOp linear_op(float a, float b) { return eltwise(algorithm::eltwise_linear, a, b); }

PostOp clip_op(float lo, float hi) {
  if (lo == 0 && hi == kInf) return eltwise(algorithm::eltwise_relu);
  return eltwise(algorithm::eltwise_clip_v2, lo, hi);
}

PostOp scalar_binary(algorithm alg, float v, size_t rank) {
  PostOp p;
  p.binary = true;
  p.alg = alg;
  p.value = std::make_shared<TensorData>(TensorData::scalar_f32(v));
  p.operand_md = dense_md(Dims(rank, 1));
  return p;
}

std::string post_op_name(const PostOp& p) {
  static const std::map<algorithm, const char*> names = {{algorithm::binary_add, "binary_add"},
                                                         {algorithm::binary_sub, "binary_sub"},
                                                         {algorithm::binary_mul, "binary_mul"},
                                                         {algorithm::binary_div, "binary_div"},
                                                         {algorithm::binary_max, "binary_max"},
                                                         {algorithm::binary_min, "binary_min"},
                                                         {algorithm::eltwise_relu, "relu"},
                                                         {algorithm::eltwise_tanh, "tanh"},
                                                         {algorithm::eltwise_logistic, "logistic"},
                                                         {algorithm::eltwise_exp, "exp"},
                                                         {algorithm::eltwise_log, "log"},
                                                         {algorithm::eltwise_abs, "abs"},
                                                         {algorithm::eltwise_sqrt, "sqrt"},
                                                         {algorithm::eltwise_round, "round"},
                                                         {algorithm::eltwise_square, "square"},
                                                         {algorithm::eltwise_linear, "linear"},
                                                         {algorithm::eltwise_clip_v2, "clip"},
                                                         {algorithm::eltwise_pow, "pow"},
                                                         {algorithm::eltwise_gelu_erf, "gelu_erf"},
                                                         {algorithm::eltwise_gelu_tanh, "gelu_tanh"},
                                                         {algorithm::eltwise_swish, "swish"},
                                                         {algorithm::eltwise_mish, "mish"},
                                                         {algorithm::eltwise_hardswish, "hardswish"},
                                                         {algorithm::eltwise_elu, "elu"},
                                                         {algorithm::eltwise_soft_relu, "soft_relu"},
                                                         {algorithm::eltwise_logsigmoid, "logsigmoid"}};
  auto it = names.find(p.alg);
  std::string name = it == names.end() ? "?" : it->second;
  if (p.binary) return p.value ? name + "(" + fmt_float(p.value->get_f64(0)) + ")" : name;
  name = "eltwise_" + name;
  switch (p.alg) {
    case algorithm::eltwise_linear:
    case algorithm::eltwise_clip_v2:
    case algorithm::eltwise_pow: name += "(" + fmt_float(p.alpha) + "," + fmt_float(p.beta) + ")"; break;
    case algorithm::eltwise_swish:
    case algorithm::eltwise_elu:
      if (p.alpha != 1) name += "(" + fmt_float(p.alpha) + ")";
      break;
    default: break;
  }
  return p.scale == 1 ? name : fmt_float(p.scale) + "*" + name;
}

// Simplifies a post-op chain (identities dropped, linear ops folded into their neighbours)
// and works around oneDNN 2.6's JIT post-op injector, which keys eltwise injectors by
// algorithm: a second eltwise of the same algorithm with other parameters silently reuses
// the first one's (conv + linear(3,0) + linear(1,-0.25) computes 9x). Such repeats become
// binary post-ops with scalar operands, or are rejected.
std::vector<PostOp> normalize_post_ops(const std::vector<PostOp>& ops, size_t rank) {
  std::vector<PostOp> folded;
  for (const PostOp& p : ops) {
    bool linear = !p.binary && p.alg == algorithm::eltwise_linear;
    if (linear && p.scale * p.alpha == 1 && p.beta == 0) continue;
    PostOp* q = folded.empty() || folded.back().binary ? nullptr : &folded.back();
    if (linear && q && q->alg == algorithm::eltwise_linear) {  // a2 s2 (s1 (a1 x + b1)) + s2 b2
      float a = p.scale * p.alpha * q->scale;
      q->beta = a * q->beta + p.scale * p.beta;
      q->alpha = a * q->alpha;
      q->scale = 1;
      if (q->alpha == 1 && q->beta == 0) folded.pop_back();
      continue;
    }
    if (linear && q && p.beta == 0) {  // a (s f(x)) = (a s) f(x)
      q->scale *= p.scale * p.alpha;
      continue;
    }
    folded.push_back(p);
  }
  std::vector<PostOp> out;
  std::map<algorithm, const PostOp*> first;
  for (const PostOp& p : folded) {
    if (p.binary) {
      out.push_back(p);
      continue;
    }
    auto [it, inserted] = first.emplace(p.alg, &p);
    const PostOp& f = *it->second;
    if (inserted || (f.scale == p.scale && f.alpha == p.alpha && f.beta == p.beta)) {
      out.push_back(p);
    } else if (p.alg == algorithm::eltwise_linear) {
      if (p.scale * p.alpha != 1) out.push_back(scalar_binary(algorithm::binary_mul, p.scale * p.alpha, rank));
      if (p.beta != 0) out.push_back(scalar_binary(algorithm::binary_add, p.scale * p.beta, rank));
    } else if (p.alg == algorithm::eltwise_clip_v2 && p.scale == 1) {
      if (p.alpha > -kInf) out.push_back(scalar_binary(algorithm::binary_max, p.alpha, rank));
      if (p.beta < kInf) out.push_back(scalar_binary(algorithm::binary_min, p.beta, rank));
    } else if (f.scale == 1 && f.alpha == p.alpha && f.beta == p.beta) {
      out.push_back(eltwise(p.alg, p.alpha, p.beta));
      out.push_back(scalar_binary(algorithm::binary_mul, p.scale, rank));
    } else {
      unsupported("oneDNN 2.6 cannot chain ", post_op_name(f), " and ", post_op_name(p),
                  " (same algorithm, other parameters)");
    }
  }
  return out;
}

std::optional<PostOp> fit_eltwise(const PrimGraph& graph, TensorId start, const std::vector<PrimId>& region,
                                  TensorId result) {
  // Evaluate the region on sample points: dense on [-8, 8], sparse out to +-100.
  constexpr int dense = 1601;
  std::vector<double> xs(dense);
  for (int i = 0; i < dense; ++i) xs[i] = -8.0 + 16.0 * i / (dense - 1);
  for (double x : {10.0, 15.0, 20.0, 30.0, 50.0, 100.0}) {
    xs.push_back(x);
    xs.push_back(-x);
  }
  const int64_t n = static_cast<int64_t>(xs.size());
  const TensorData fy =
      reference::evaluate_chain(graph, region, {{start, TensorData::from_f64(DType::F32, {n}, xs)}}, result);
  if (fy.size() != n) return std::nullopt;
  std::vector<double> ys = fy.to_f64();
  auto matches = [&](const Candidate& c, double alpha, double* scale) {
    double num = 0, den = 0;
    for (int i = 0; i < dense; ++i) {
      double g = c.f(xs[i], alpha);
      if (std::isfinite(g) && std::isfinite(ys[i])) num += g * ys[i], den += g * g;
    }
    if (den <= 0) return false;
    double s = num / den, nice = std::round(s * 1024) / 1024;
    if (std::abs(s - nice) <= 1e-6 * std::abs(s)) s = nice;
    for (int64_t i = 0; i < n; ++i) {
      double g = static_cast<float>(s * c.f(xs[i], alpha)), y = ys[i];
      if (std::isfinite(g) != std::isfinite(y)) return false;
      if (std::isfinite(y) && std::abs(g - y) > 2e-5 * (1 + std::abs(y))) return false;
    }
    *scale = s;
    return true;
  };
  auto at = [&](double x) { return ys[static_cast<int>(std::lround((x + 8.0) / 16.0 * (dense - 1)))]; };
  for (const Candidate& c : kCandidates) {
    std::vector<double> alphas = {1.0};
    if (c.alg == algorithm::eltwise_swish && at(1) > 0 && at(1) < 1) alphas.push_back(std::log(at(1) / (1 - at(1))));
    if (c.alg == algorithm::eltwise_elu) alphas.push_back(at(-1) / (std::exp(-1.0) - 1));
    for (double alpha : alphas) {
      double scale;
      if (!matches(c, alpha, &scale)) continue;
      float fa =
          (c.alg == algorithm::eltwise_swish || c.alg == algorithm::eltwise_elu) ? static_cast<float>(alpha) : 0.f;
      return eltwise(c.alg, fa, 0, static_cast<float>(scale));
    }
  }
  return std::nullopt;
}

}  // namespace korch::cpu::onednn_detail
