// Fission rule for Attention (opsets 23-25), following ONNX's reference: 3-D inputs split into
// heads; past key/value concatenated into the present ones; an additive bias from the mask
// (bool -> 0 / -inf, padded with -inf to the key length), the bottom-right causal mask and the
// sliding window (offset by the past length, or per batch by nonpad_kv_seqlen - q_len), and the
// padding of nonpad_kv_seqlen; grouped-query heads repeated; softmax(softcap(Q K^T * scale) + bias)
// with fully masked rows giving zeros; then times V. The optional fourth output is QK^T (modes
// 0/1), with the bias (2), or the probabilities (3).
#include <cmath>
#include <limits>

#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// [B, S, H*d] -> [B, H, S, d]
TensorId split_heads(FissionContext& c, TensorId x, int64_t heads) {
  const Shape s = c.shape(x);
  if (heads <= 0 || s[2] % heads) c.error("hidden size ", s[2], " is not divisible by ", heads, " heads");
  TensorId r = c.reshape(x, {s[0], s[1], heads, s[2] / heads});
  return c.emit(PrimOp::Transpose, {r}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1, 3}));
}

// Additive bias: 0 where `allowed`, -inf elsewhere.
TensorId to_bias(FissionContext& c, TensorId allowed, DType t) {
  return c.emit(PrimOp::Where, {allowed, c.scalar(0, t), c.scalar(-kInf, t)});
}

// The bias of "key j is allowed for query i" when lo <= i + offset - j <= hi (either bound may be
// absent: INT64_MIN / INT64_MAX), with a constant offset (a [q, kv] constant) or per batch from
// run-time offsets ([B, 1, q, kv]).
TensorId positional_bias(FissionContext& c, int64_t q, int64_t kv, int64_t offset, TensorId batch_offset, DType t,
                         int64_t lo, int64_t hi) {
  if (batch_offset == kNone) {
    TensorData m(DType::Bool, {q, kv});
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = 0; j < kv; ++j) m.set_i64(i * kv + j, i + offset - j >= lo && i + offset - j <= hi);
    return to_bias(c, c.constant(std::move(m)), t);
  }
  std::vector<int64_t> d(q * kv);
  for (int64_t i = 0; i < q; ++i)
    for (int64_t j = 0; j < kv; ++j) d[i * kv + j] = i - j;
  TensorId diff = c.binary(PrimOp::Add, c.constant(TensorData::from_i64(DType::I64, {1, 1, q, kv}, d)),
                           c.reshape(batch_offset, {c.shape(batch_offset)[0], 1, 1, 1}));
  TensorId allowed = kNone;
  if (lo != std::numeric_limits<int64_t>::min())
    allowed = c.binary(PrimOp::GreaterEqual, diff, c.scalar(static_cast<double>(lo), DType::I64));
  if (hi != std::numeric_limits<int64_t>::max()) {
    TensorId below = c.binary(PrimOp::LessEqual, diff, c.scalar(static_cast<double>(hi), DType::I64));
    allowed = allowed == kNone ? below : c.binary(PrimOp::And, allowed, below);
  }
  if (allowed == kNone) allowed = c.binary(PrimOp::Equal, diff, diff);
  return to_bias(c, allowed, t);
}

}  // namespace

void register_attention_rule() {
  register_fission_rule("Attention", [](FissionContext& c) {
    TensorId q = c.input(0), k = c.input(1), v = c.input(2);
    refuse_bfloat16(c, q);
    int64_t rank = c.rank(q);
    if (rank != 3 && rank != 4) c.error("Q must be 3-D or 4-D");
    if (c.rank(k) != rank || c.rank(v) != rank) c.error("Q, K and V must have the same rank");
    DType t = c.dtype(q);
    if (!is_floating(t)) c.error("Q must be floating point");
    if (rank == 3) {
      if (!c.has_attr("q_num_heads") || !c.has_attr("kv_num_heads"))
        c.error("3-D inputs need q_num_heads and kv_num_heads");
      int64_t hq = c.attr_i("q_num_heads", 0), hkv = c.attr_i("kv_num_heads", 0);
      q = split_heads(c, q, hq);
      k = split_heads(c, k, hkv);
      v = split_heads(c, v, hkv);
    }
    const int64_t batch = c.shape(q)[0], hq = c.shape(q)[1], q_len = c.shape(q)[2], dq = c.shape(q)[3];
    double scale = c.has_attr("scale") ? c.attr_f("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(dq));
    // Q and K are each scaled by sqrt(scale), rounded to the input type, as the reference does.
    TensorId root = c.cast(c.scalar(static_cast<float>(std::sqrt(scale)), DType::F32), t);

    TensorId present_k = k, present_v = v;
    bool past = c.has_input(4) || c.has_input(5);
    if (past) {
      if (!c.has_input(4) || !c.has_input(5)) c.error("past_key and past_value must be given together");
      present_k = c.emit(PrimOp::Concat, {c.input(4), k}, Attrs().set("axis", int64_t{2}));
      present_v = c.emit(PrimOp::Concat, {c.input(5), v}, Attrs().set("axis", int64_t{2}));
    }
    const int64_t kv_len = c.shape(present_k)[2], hkv = c.shape(present_k)[1];
    bool nonpad = c.has_input(6);
    if (nonpad && past) c.error("nonpad_kv_seqlen cannot be combined with past key/value");
    // The causal / window offset: the past length, or per batch nonpad_kv_seqlen - q_len.
    int64_t offset = past ? c.shape(c.input(4))[2] : 0;
    TensorId batch_offset = kNone;
    if (nonpad) batch_offset = c.binary(PrimOp::Sub, c.cast(c.input(6), DType::I64), c.scalar(q_len, DType::I64));

    TensorId zeros = c.constant(TensorData(t, {q_len, kv_len}));
    TensorId mask = kNone;
    if (c.has_input(3)) {
      mask = c.input(3);
      int64_t pad = kv_len - c.shape(mask).back();
      if (c.dtype(mask) == DType::Bool) {
        if (pad > 0) mask = pad_axis(c, mask, c.rank(mask) - 1, 0, pad, 0.0);
        mask = to_bias(c, mask, t);
      } else {
        mask = c.cast(mask, t);
        if (pad > 0) mask = pad_axis(c, mask, c.rank(mask) - 1, 0, pad, -kInf);
      }
    }
    const int64_t none_lo = std::numeric_limits<int64_t>::min(), none_hi = std::numeric_limits<int64_t>::max();
    int64_t left = c.attr_i("left_window_size", -1), right = c.attr_i("right_window_size", -1);
    bool window = left >= 0 || right >= 0;
    TensorId bias = zeros;
    if (c.attr_i("is_causal", 0)) {
      TensorId base = mask == kNone ? zeros : mask;
      if (window) base = c.binary(PrimOp::Add, zeros, base);
      bias = c.binary(PrimOp::Add, base, positional_bias(c, q_len, kv_len, offset, batch_offset, t, 0, none_hi));
    } else if (mask != kNone) {
      bias = c.binary(PrimOp::Add, zeros, mask);
    }
    if (window) {
      bias = c.binary(PrimOp::Add, bias,
                      positional_bias(c, q_len, kv_len, offset, batch_offset, t, right >= 0 ? -right : none_lo,
                                      left >= 0 ? left : none_hi));
    }
    if (nonpad) {  // keys at or after nonpad_kv_seqlen[b] are padding
      TensorId len = c.reshape(c.cast(c.input(6), DType::I64), {batch, 1, 1, 1});
      bias = c.binary(PrimOp::Add, bias, to_bias(c, c.binary(PrimOp::Less, iota_along(c, kv_len, 4, 3), len), t));
    }

    // Grouped-query attention: each KV head serves hq / hkv consecutive query heads.
    TensorId kk = present_k, vv = present_v;
    if (hq != hkv) {
      if (hq % hkv) c.error(hq, " query heads are not a multiple of ", hkv, " key/value heads");
      auto repeat = [&](TensorId x) {
        Shape s = c.shape(x);
        TensorId r = c.reshape(x, {s[0], s[1], 1, s[2], s[3]});
        r = c.emit(PrimOp::Broadcast, {r}, Attrs().set("shape", Shape{s[0], s[1], hq / hkv, s[2], s[3]}));
        return c.reshape(r, {s[0], hq, s[2], s[3]});
      };
      kk = repeat(kk);
      vv = repeat(vv);
    }
    TensorId kt = c.emit(PrimOp::Transpose, {c.binary(PrimOp::Mul, kk, root)},
                         Attrs().set("perm", std::vector<int64_t>{0, 1, 3, 2}));
    TensorId qk = c.emit(PrimOp::MatMul, {c.binary(PrimOp::Mul, q, root), kt});
    double softcap = c.attr_f("softcap", 0.0);
    if (softcap > 0) {
      TensorId cap = c.scalar(softcap, t);
      qk = c.binary(PrimOp::Mul, c.unary(PrimOp::Tanh, c.binary(PrimOp::Div, qk, cap)), cap);
    }
    TensorId logits = c.binary(PrimOp::Add, qk, bias);
    // Softmax whose fully masked rows (max -inf) give zeros instead of NaN.
    TensorId neg_inf = c.scalar(-kInf, t), zero = c.scalar(0, t);
    TensorId mx = c.reduce(PrimOp::ReduceMax, logits, {3}, true);
    TensorId safe = c.emit(PrimOp::Where, {c.binary(PrimOp::Equal, mx, neg_inf), zero, mx});
    TensorId e = c.unary(PrimOp::Exp, c.binary(PrimOp::Sub, logits, safe));
    TensorId sum = c.reduce(PrimOp::ReduceSum, e, {c.rank(e) - 1}, true);
    sum = c.emit(PrimOp::Where, {c.binary(PrimOp::Equal, sum, zero), c.scalar(1, t), sum});
    TensorId p = c.binary(PrimOp::Div, e, sum);
    // Rows whose bias masks every key are zero, whatever the logits.
    TensorId bias_max = c.reduce(PrimOp::ReduceMax, bias, {c.rank(bias) - 1}, true);
    p = c.emit(PrimOp::Where, {c.binary(PrimOp::Equal, bias_max, neg_inf), zero, p});
    TensorId y = c.emit(PrimOp::MatMul, {p, vv});
    if (rank == 3) {
      const Shape s = c.shape(y);
      y = c.emit(PrimOp::Transpose, {y}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1, 3}));
      y = c.reshape(y, {s[0], s[2], s[1] * s[3]});
    }
    c.set_output(0, y);
    if (c.wants_output(1)) c.set_output(1, present_k == k ? c.unary(PrimOp::Copy, k) : present_k);
    if (c.wants_output(2)) c.set_output(2, present_v == v ? c.unary(PrimOp::Copy, v) : present_v);
    if (c.wants_output(3)) {
      int64_t mode = c.attr_i("qk_matmul_output_mode", 0);
      TensorId out = mode == 2 ? logits : mode == 3 ? p : qk;
      if (mode < 0 || mode > 3) c.error("qk_matmul_output_mode must be 0 to 3");
      c.set_output(3, out);
    }
  });
}

}  // namespace korch
