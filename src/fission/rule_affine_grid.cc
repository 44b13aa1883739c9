// Fission rule for AffineGrid (2-D and 3-D): the homogeneous base grid (x, y[, z], 1) of the
// output size, a float64 constant of normalised pixel centres (or corners with align_corners),
// times each batch's theta transposed: one MatMul in float64 whose result is cast to theta's
// type, as ONNX's reference computes it. The size input must be a constant.
#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

// The normalised coordinates of `n` pixels along one axis.
std::vector<double> axis_coordinates(int64_t n, bool align_corners) {
  std::vector<double> v(n);
  double step = align_corners ? 2.0 / static_cast<double>(n - 1) : 2.0 / static_cast<double>(n);
  double start = align_corners ? -1.0 : -1.0 + step / 2;
  for (int64_t i = 0; i < n; ++i) v[i] = start + static_cast<double>(i) * step;
  return v;
}

}  // namespace

void register_affine_grid_rule() {
  register_fission_rule("AffineGrid", [](FissionContext& c) {
    TensorId theta = c.input(0);
    DType t = c.dtype(theta);
    require_floating(c, theta);
    std::vector<int64_t> size = c.constant_ints(1);
    if (size.size() != 4 && size.size() != 5) c.error("size must have 4 or 5 entries, got ", size.size());
    int64_t n = size[0], spatial = static_cast<int64_t>(size.size()) - 2;
    bool align_corners = c.attr_i("align_corners", 0) != 0;
    if (c.shape(theta) != Shape{n, spatial, spatial + 1})
      c.error("theta must have shape [", n, ", ", spatial, ", ", spatial + 1, "], got ", shape_str(c.shape(theta)));
    Shape dims(size.begin() + 2, size.end());
    for (int64_t d : dims)
      if (d <= 0 || (align_corners && d == 1))
        c.error("output sizes must be positive (and above 1 with align_corners)");
    std::vector<std::vector<double>> coords;  // per spatial axis, outermost first
    for (int64_t d : dims) coords.push_back(axis_coordinates(d, align_corners));
    int64_t points = num_elements(dims);
    std::vector<double> base(points * (spatial + 1));
    for (int64_t p = 0; p < points; ++p) {
      int64_t rest = p;
      // Entry k of a point is the coordinate along axis spatial - 1 - k (x first), then 1.
      for (int64_t axis = spatial - 1; axis >= 0; --axis) {
        base[p * (spatial + 1) + (spatial - 1 - axis)] = coords[axis][rest % dims[axis]];
        rest /= dims[axis];
      }
      base[p * (spatial + 1) + spatial] = 1.0;
    }
    TensorId grid = c.constant(TensorData::from_f64(DType::F64, {points, spatial + 1}, base));
    TensorId theta_t =
        c.emit(PrimOp::Transpose, {c.cast(theta, DType::F64)}, Attrs().set("perm", std::vector<int64_t>{0, 2, 1}));
    TensorId y = c.binary(PrimOp::MatMul, grid, theta_t);  // [n, points, spatial]
    Shape out = {n};
    out.insert(out.end(), dims.begin(), dims.end());
    out.push_back(spatial);
    c.set_output(0, c.reshape(c.cast(y, t), out));
  });
}

}  // namespace korch
