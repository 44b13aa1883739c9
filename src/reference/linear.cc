// Reference linear primitives (batched MatMul with broadcasting, N-d grouped Conv and
// ConvTranspose) and window primitives (max/avg pooling). Float math accumulates in double, every
// output element's terms in a fixed order (the same at any thread count: MatMul rows and Conv
// planes are split over OpenMP threads, whole).
// Spatial ranks 1..3 are handled by viewing them as 3-D (missing dims have size 1).
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/reference.h"
#include "util/error.h"

namespace korch::reference {

namespace {

// Spatial geometry lifted to three dimensions.
struct Geometry3 {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dil[3] = {1, 1, 1};
};

Geometry3 geometry(const Shape& in, const Shape& out, const std::vector<int64_t>& kernel, const Attrs& a) {
  size_t nsp = in.size() - 2;
  if (nsp > 3) fail("only 1-D, 2-D and 3-D convolution/pooling are supported (got ", nsp, "-D)");
  Geometry3 g;
  size_t shift = 3 - nsp;
  const auto& s = a.ints("strides");
  const auto& p = a.ints("pads");
  const auto& d = a.ints("dilations");
  for (size_t i = 0; i < nsp; ++i) {
    g.in[shift + i] = in[2 + i];
    g.out[shift + i] = out[2 + i];
    g.k[shift + i] = kernel[i];
    g.stride[shift + i] = s[i];
    g.pad[shift + i] = p[i];
    g.dil[shift + i] = d[i];
  }
  return g;
}

TensorData matmul(const TensorData& a, const TensorData& b, const Shape& out_shape) {
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  int64_t m = sa[sa.size() - 2], k = sa[sa.size() - 1], n = sb[sb.size() - 1];
  Shape batch(out_shape.begin(), out_shape.end() - 2);
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  auto off_a = broadcast_offsets(batch_a, batch);
  auto off_b = broadcast_offsets(batch_b, batch);
  std::vector<double> va = a.to_f64(), vb = b.to_f64();
  int64_t nb = num_elements(batch);
  std::vector<double> out(nb * m * n, 0.0);
  // Each output row by one thread, its terms added in k order.
#pragma omp parallel for schedule(dynamic)
  for (int64_t row = 0; row < nb * m; ++row) {
    int64_t bi = row / m, i = row % m;
    const double* pa = va.data() + off_a[bi] * m * k + i * k;
    const double* pb = vb.data() + off_b[bi] * k * n;
    double* ro = out.data() + row * n;
    for (int64_t kk = 0; kk < k; ++kk) {
      double av = pa[kk];
      const double* rb = pb + kk * n;
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) ro[j] += av * rb[j];
    }
  }
  return TensorData::from_f64(a.dtype(), out_shape, out);
}

// The output positions [*lo, *hi) of one axis whose input position o * stride - pad + tap lies
// inside [0, in).
void valid_range(int64_t out, int64_t in, int64_t stride, int64_t pad, int64_t tap, int64_t* lo, int64_t* hi) {
  int64_t first = pad - tap;          // o * stride >= first
  int64_t last = in - 1 + pad - tap;  // o * stride <= last
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  *hi = last < 0 ? 0 : std::min(out, last / stride + 1);
  if (*hi < *lo) *hi = *lo;
}

TensorData conv(const Primitive& prim, const TensorData& x, const TensorData& w, const Shape& out_shape) {
  const Shape& sx = x.shape();
  const Shape& sw = w.shape();
  Geometry3 g = geometry(sx, out_shape, Shape(sw.begin() + 2, sw.end()), prim.attrs);
  int64_t group = prim.attrs.i("group");
  int64_t batch = sx[0], cin_g = sw[1], cout = sw[0], cout_g = cout / group;
  int64_t in_plane = g.in[0] * g.in[1] * g.in[2], out_plane = g.out[0] * g.out[1] * g.out[2];
  int64_t kvol = g.k[0] * g.k[1] * g.k[2];
  std::vector<double> vx = x.to_f64(), vw = w.to_f64();
  std::vector<double> out(batch * cout * out_plane, 0.0);
  // Each output plane by one thread; every output element adds its terms in (ic, kd, kh, kw) order.
#pragma omp parallel for schedule(dynamic)
  for (int64_t plane = 0; plane < batch * cout; ++plane) {
    int64_t nb = plane / cout, oc = plane % cout;
    int64_t grp = oc / cout_g;
    double* po = out.data() + plane * out_plane;
    for (int64_t ic = 0; ic < cin_g; ++ic) {
      const double* px = vx.data() + (nb * sx[1] + grp * cin_g + ic) * in_plane;
      const double* pw = vw.data() + (oc * cin_g + ic) * kvol;
      for (int64_t kd = 0; kd < g.k[0]; ++kd)
        for (int64_t kh = 0; kh < g.k[1]; ++kh)
          for (int64_t kw = 0; kw < g.k[2]; ++kw) {
            double wv = pw[(kd * g.k[1] + kh) * g.k[2] + kw];
            int64_t od0, od1, oh0, oh1, ow0, ow1;
            valid_range(g.out[0], g.in[0], g.stride[0], g.pad[0], kd * g.dil[0], &od0, &od1);
            valid_range(g.out[1], g.in[1], g.stride[1], g.pad[1], kh * g.dil[1], &oh0, &oh1);
            valid_range(g.out[2], g.in[2], g.stride[2], g.pad[2], kw * g.dil[2], &ow0, &ow1);
            int64_t sw2 = g.stride[2], iw0 = kw * g.dil[2] - g.pad[2];
            for (int64_t od = od0; od < od1; ++od) {
              int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
              for (int64_t oh = oh0; oh < oh1; ++oh) {
                int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
                const double* row = px + (id * g.in[1] + ih) * g.in[2] + iw0;
                double* orow = po + (od * g.out[1] + oh) * g.out[2];
                if (sw2 == 1) {
#pragma omp simd
                  for (int64_t ow = ow0; ow < ow1; ++ow) orow[ow] += wv * row[ow];
                } else {
                  for (int64_t ow = ow0; ow < ow1; ++ow) orow[ow] += wv * row[ow * sw2];
                }
              }
            }
          }
    }
  }
  return TensorData::from_f64(x.dtype(), out_shape, out);
}

TensorData conv_transpose(const Primitive& prim, const TensorData& x, const TensorData& w, const Shape& out_shape) {
  const Shape& sx = x.shape();
  const Shape& sw = w.shape();
  Geometry3 g = geometry(sx, out_shape, Shape(sw.begin() + 2, sw.end()), prim.attrs);
  int64_t group = prim.attrs.i("group");
  int64_t batch = sx[0], cin = sx[1], cin_g = cin / group, cout_g = sw[1], cout = cout_g * group;
  int64_t in_plane = g.in[0] * g.in[1] * g.in[2], out_plane = g.out[0] * g.out[1] * g.out[2];
  int64_t kvol = g.k[0] * g.k[1] * g.k[2];
  std::vector<double> vx = x.to_f64(), vw = w.to_f64();
  std::vector<double> out(batch * cout * out_plane, 0.0);
  for (int64_t nb = 0; nb < batch; ++nb)
    for (int64_t ic = 0; ic < cin; ++ic) {
      int64_t grp = ic / cin_g;
      const double* px = vx.data() + (nb * cin + ic) * in_plane;
      for (int64_t oc = 0; oc < cout_g; ++oc) {
        double* po = out.data() + (nb * cout + grp * cout_g + oc) * out_plane;
        const double* pw = vw.data() + (ic * cout_g + oc) * kvol;
        for (int64_t kd = 0; kd < g.k[0]; ++kd)
          for (int64_t kh = 0; kh < g.k[1]; ++kh)
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              double wv = pw[(kd * g.k[1] + kh) * g.k[2] + kw];
              for (int64_t id = 0; id < g.in[0]; ++id) {
                int64_t od = id * g.stride[0] - g.pad[0] + kd * g.dil[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (int64_t ih = 0; ih < g.in[1]; ++ih) {
                  int64_t oh = ih * g.stride[1] - g.pad[1] + kh * g.dil[1];
                  if (oh < 0 || oh >= g.out[1]) continue;
                  for (int64_t iw = 0; iw < g.in[2]; ++iw) {
                    int64_t ow = iw * g.stride[2] - g.pad[2] + kw * g.dil[2];
                    if (ow >= 0 && ow < g.out[2])
                      po[(od * g.out[1] + oh) * g.out[2] + ow] += wv * px[(id * g.in[1] + ih) * g.in[2] + iw];
                  }
                }
              }
            }
      }
    }
  return TensorData::from_f64(x.dtype(), out_shape, out);
}

}  // namespace

TensorData eval_linear(const Primitive& prim, const TensorData& x, const TensorData& w, const Shape& out_shape) {
  switch (prim.op) {
    case PrimOp::MatMul: return matmul(x, w, out_shape);
    case PrimOp::Conv: return conv(prim, x, w, out_shape);
    case PrimOp::ConvTranspose: return conv_transpose(prim, x, w, out_shape);
    default: break;
  }
  fail("reference: ", prim_op_name(prim.op), " is not a linear op");
}

TensorData eval_window(const Primitive& prim, const TensorData& x, const Shape& out_shape) {
  const Shape& sx = x.shape();
  Geometry3 g = geometry(sx, out_shape, prim.attrs.ints("kernel"), prim.attrs);
  bool is_max = prim.op == PrimOp::MaxPool;
  bool include_pad = prim.attrs.i_or("count_include_pad", 0) != 0;
  size_t nsp = sx.size() - 2;
  // End of the padded extent per axis (for count_include_pad divisors).
  int64_t pad_end[3] = {1, 1, 1};
  const auto& p = prim.attrs.ints("pads");
  for (size_t i = 0; i < nsp; ++i) pad_end[3 - nsp + i] = sx[2 + i] + p[nsp + i];
  int64_t planes = sx[0] * sx[1];
  int64_t in_plane = g.in[0] * g.in[1] * g.in[2], out_plane = g.out[0] * g.out[1] * g.out[2];
  std::vector<double> vx = x.to_f64();
  std::vector<double> out(planes * out_plane);
  for (int64_t pl = 0; pl < planes; ++pl) {
    const double* px = vx.data() + pl * in_plane;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t count = 0, padded_count = 0;
          for (int64_t kd = 0; kd < g.k[0]; ++kd) {
            int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
            for (int64_t kh = 0; kh < g.k[1]; ++kh) {
              int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
              for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dil[2];
                bool in_padded = id < pad_end[0] && ih < pad_end[1] && iw < pad_end[2];
                if (in_padded) ++padded_count;
                if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
                double v = px[(id * g.in[1] + ih) * g.in[2] + iw];
                acc = is_max ? std::max(acc, v) : acc + v;
                ++count;
              }
            }
          }
          if (!is_max) acc /= static_cast<double>(include_pad ? padded_count : std::max<int64_t>(count, 1));
          out[pl * out_plane + (od * g.out[1] + oh) * g.out[2] + ow] = acc;
        }
  }
  return TensorData::from_f64(x.dtype(), out_shape, out);
}

}  // namespace korch::reference
