// Structural hash: a canonical serialisation of a primitive set (ops, attributes, wiring
// by local index, dtypes, shapes, external-input kinds) hashed with 64-bit FNV-1a. Equal
// structures hash equally whatever their tensor ids or names.
#include <unordered_map>

#include "ir/printer.h"
#include "util/error.h"

namespace korch {

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}
}  // namespace

uint64_t structural_hash(const PrimGraph& g, const std::vector<PrimId>& prims) {
  std::unordered_map<TensorId, int> local;  // tensor -> local index
  std::string s;
  int next_external = 0;
  for (PrimId p : prims) {
    const Primitive& prim = g.prim(p);
    s += prim_op_name(prim.op);
    s += "(";
    for (TensorId t : prim.inputs) {
      auto it = local.find(t);
      if (it == local.end()) {
        const TensorInfo& info = g.tensor(t);
        int id = -(++next_external);
        local[t] = id;
        s += str_cat(info.is_constant() ? "c" : "x", id, ":", dtype_name(info.dtype), shape_str(info.shape), ",");
      } else {
        s += str_cat(it->second, ",");
      }
    }
    int id = static_cast<int>(local.size());
    local[prim.output] = id;
    const TensorInfo& out = g.tensor(prim.output);
    s += str_cat(")->", dtype_name(out.dtype), shape_str(out.shape), "{", prim.attrs.str(), "};");
  }
  return fnv1a(s);
}

uint64_t structural_hash(const PrimGraph& g) {
  std::vector<PrimId> all(g.num_prims());
  for (PrimId p = 0; p < g.num_prims(); ++p) all[p] = p;
  return structural_hash(g, all);
}

}  // namespace korch
