#include "ir/primitive.h"

#include <sstream>

#include "util/error.h"

namespace korch {

namespace {
struct OpInfo {
  const char* name;
  PrimKind kind;
  int arity;
};
const OpInfo kOpInfo[] = {
#define KORCH_INFO(name, kind, arity) {#name, PrimKind::kind, arity},
    KORCH_PRIM_OPS(KORCH_INFO)
#undef KORCH_INFO
};
}  // namespace

const char* prim_op_name(PrimOp op) { return kOpInfo[static_cast<int>(op)].name; }
PrimKind prim_kind(PrimOp op) { return kOpInfo[static_cast<int>(op)].kind; }
int prim_arity(PrimOp op) { return kOpInfo[static_cast<int>(op)].arity; }

const char* prim_kind_name(PrimKind kind) {
  switch (kind) {
    case PrimKind::Elementwise: return "elementwise";
    case PrimKind::Reduce: return "reduce";
    case PrimKind::Broadcast: return "broadcast";
    case PrimKind::Layout: return "layout";
    case PrimKind::Window: return "window";
    case PrimKind::Linear: return "linear";
  }
  return "?";
}

bool prim_op_from_name(const std::string& name, PrimOp* op) {
  for (size_t i = 0; i < sizeof(kOpInfo) / sizeof(kOpInfo[0]); ++i)
    if (name == kOpInfo[i].name) {
      *op = static_cast<PrimOp>(i);
      return true;
    }
  return false;
}

int64_t Attrs::i(const std::string& key) const {
  auto it = values_.find(key);
  KORCH_CHECK(it != values_.end() && std::holds_alternative<int64_t>(it->second), "int attr ", key);
  return std::get<int64_t>(it->second);
}
double Attrs::f(const std::string& key) const {
  auto it = values_.find(key);
  KORCH_CHECK(it != values_.end() && std::holds_alternative<double>(it->second), "float attr ", key);
  return std::get<double>(it->second);
}
const std::vector<int64_t>& Attrs::ints(const std::string& key) const {
  auto it = values_.find(key);
  KORCH_CHECK(it != values_.end() && std::holds_alternative<std::vector<int64_t>>(it->second), "ints attr ", key);
  return std::get<std::vector<int64_t>>(it->second);
}
const std::vector<double>& Attrs::floats(const std::string& key) const {
  auto it = values_.find(key);
  KORCH_CHECK(it != values_.end() && std::holds_alternative<std::vector<double>>(it->second), "floats attr ", key);
  return std::get<std::vector<double>>(it->second);
}
const std::string& Attrs::s(const std::string& key) const {
  auto it = values_.find(key);
  KORCH_CHECK(it != values_.end() && std::holds_alternative<std::string>(it->second), "string attr ", key);
  return std::get<std::string>(it->second);
}

Attrs conv_transpose_attrs(const std::vector<int64_t>& strides, const std::vector<int64_t>& pads,
                           const std::vector<int64_t>& dilations, int64_t group,
                           const std::vector<int64_t>& out_spatial) {
  return Attrs()
      .set("strides", strides)
      .set("pads", pads)
      .set("dilations", dilations)
      .set("group", group)
      .set("out_spatial", out_spatial);
}

std::string Attrs::str() const {
  std::ostringstream os;
  bool first = true;
  for (const auto& [key, value] : values_) {
    if (!first) os << ", ";
    first = false;
    os << key << "=";
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
            os << "[";
            for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
            os << "]";
          } else {
            os << v;
          }
        },
        value);
  }
  return os.str();
}

}  // namespace korch
