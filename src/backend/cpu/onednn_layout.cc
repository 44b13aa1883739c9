// oneDNN memory descriptors and activation layouts: dense, strided and transposed views of
// korch's row-major buffers, and the names (nhwc, nChw16c, ...) and keys of oneDNN's layouts.
// Two descriptors with the same layout key hold the same elements in the same bytes, which is
// what layout linking (layout_link.h) relies on.
#include <algorithm>
#include <map>
#include <sstream>

#include "backend/cpu/onednn_internal.h"

namespace korch::cpu {

namespace onednn_detail {

Dims dense_strides(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * std::max<int64_t>(dims[i + 1], 1);
  return s;
}

MD strided_md(const Dims& dims, const Dims& strides) { return MD(dims, memory::data_type::f32, strides); }
MD dense_md(const Dims& dims) { return strided_md(dims, dense_strides(dims)); }

MD transposed_md(const Dims& dims) {
  size_t r = dims.size();
  Dims swapped = dims;
  std::swap(swapped[r - 2], swapped[r - 1]);
  Dims strides = dense_strides(swapped);
  std::swap(strides[r - 2], strides[r - 1]);
  return strided_md(dims, strides);
}
MD row_slice(const MD& md, int64_t rows) {
  Dims dims = md.dims();
  size_t r = dims.size();
  if (dims[r - 2] == 1) return md;
  dims[r - 2] = rows;
  const auto& s = md.data.format_desc.blocking.strides;
  return strided_md(dims, Dims(s, s + r));
}

int64_t row_offset_bytes(const MD& md, int64_t first_row) {
  size_t r = md.dims().size();
  if (md.dims()[r - 2] == 1) return 0;
  return first_row * md.data.format_desc.blocking.strides[r - 2] * static_cast<int64_t>(sizeof(float));
}

MD any_md(const Dims& dims) { return MD(dims, memory::data_type::f32, memory::format_tag::any); }

Dims aligned(const Shape& s, size_t rank) {
  Dims d(rank - s.size(), 1);
  d.insert(d.end(), s.begin(), s.end());
  return d;
}

std::string layout_name(const MD& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims < 3 || d.ndims > 5) return "?";
  const auto& b = d.format_desc.blocking;
  std::string letters = std::string("nc") + std::string("dhw").substr(5 - d.ndims);
  std::vector<int> order(d.ndims);
  for (int i = 0; i < d.ndims; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return b.strides[x] > b.strides[y]; });
  std::vector<char> blocked(d.ndims, 0);
  for (int i = 0; i < b.inner_nblks; ++i) blocked[b.inner_idxs[i]] = 1;
  std::string s;
  for (int i : order) s += blocked[i] ? static_cast<char>(letters[i] - 'a' + 'A') : letters[i];
  for (int i = 0; i < b.inner_nblks; ++i) {
    s += std::to_string(b.inner_blks[i]);
    s += letters[b.inner_idxs[i]];
  }
  return s;
}

std::string layout_key(const MD& md) {
  const auto& d = md.data;
  if (d.format_kind != dnnl_blocked || d.extra.flags != 0) return "";
  const auto& b = d.format_desc.blocking;
  std::ostringstream os;
  os << "t" << d.data_type << " o" << d.offset0;
  for (int i = 0; i < d.ndims; ++i)
    os << " " << d.dims[i] << "/" << d.padded_dims[i] << "+" << d.padded_offsets[i] << ":" << b.strides[i];
  for (int i = 0; i < b.inner_nblks; ++i) os << " b" << b.inner_blks[i] << "@" << b.inner_idxs[i];
  return os.str();
}

std::optional<memory::format_tag> format_tag_of(const std::string& name) {
  using tag = memory::format_tag;
  static const std::map<std::string, tag> tags = {
      {"nwc", tag::nwc},     {"nCw16c", tag::nCw16c},     {"nCw8c", tag::nCw8c},
      {"nhwc", tag::nhwc},   {"nChw16c", tag::nChw16c},   {"nChw8c", tag::nChw8c},
      {"ndhwc", tag::ndhwc}, {"nCdhw16c", tag::nCdhw16c}, {"nCdhw8c", tag::nCdhw8c}};
  auto it = tags.find(name);
  if (it == tags.end()) return std::nullopt;
  return it->second;
}

}  // namespace onednn_detail

std::string activation_layout_key(const Shape& shape, const std::string& format) {
  KORCH_CHECK(shape.size() == 4, "activation_layout_key of a ", shape.size(), "-D shape");
  using onednn_detail::Dims;
  using onednn_detail::memory;
  std::optional<memory::format_tag> tag = onednn_detail::format_tag_of(format);
  KORCH_CHECK(tag.has_value(), "activation_layout_key: unknown format ", format);
  return onednn_detail::layout_key(onednn_detail::MD(Dims(shape.begin(), shape.end()), memory::data_type::f32, *tag));
}

std::string native_blocked_format() {
  dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  bool avx512 = isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
                isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx ||
                isa == dnnl::cpu_isa::avx512_mic || isa == dnnl::cpu_isa::avx512_mic_4ops;
  return avx512 ? "nChw16c" : "nChw8c";
}

}  // namespace korch::cpu
