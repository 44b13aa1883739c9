// Text printer and Graphviz DOT printer for PrimGraph.
#include "ir/printer.h"

#include <sstream>

#include "util/error.h"

namespace korch {

namespace {

std::string type_str(const TensorInfo& info) { return str_cat(dtype_name(info.dtype), shape_str(info.shape)); }

std::string ref(TensorId t) { return str_cat("%", t); }

}  // namespace

void print_graph(std::ostream& os, const PrimGraph& g) {
  for (TensorId t : g.inputs())
    os << "input " << ref(t) << ":" << type_str(g.tensor(t)) << "  # " << g.tensor(t).name << "\n";
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).is_constant())
      os << "const " << ref(t) << ":" << type_str(g.tensor(t)) << "  # " << g.tensor(t).name << "\n";
  for (const Primitive& p : g.prims()) {
    os << ref(p.output) << ":" << type_str(g.tensor(p.output)) << " = " << prim_op_name(p.op) << "(";
    for (size_t i = 0; i < p.inputs.size(); ++i) os << (i ? ", " : "") << ref(p.inputs[i]);
    os << ")";
    std::string attrs = p.attrs.str();
    if (!attrs.empty()) os << " {" << attrs << "}";
    if (p.origin != kNone) {
      const OpOrigin& o = g.origins()[p.origin];
      os << "  # " << o.name << " (" << o.op_type << ")";
    }
    os << "\n";
  }
  for (TensorId t : g.outputs()) os << "output " << ref(t) << "  # " << g.tensor(t).name << "\n";
}

std::string graph_to_string(const PrimGraph& g) {
  std::ostringstream os;
  print_graph(os, g);
  return os.str();
}

void print_dot(std::ostream& os, const PrimGraph& g, const std::vector<int>& group_of_prim) {
  static const char* kKindColours[] = {"#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6", "#ffff99", "#fb9a99"};
  static const char* kGroupColours[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                                        "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};
  os << "digraph korch {\n  rankdir=TB;\n  node [style=filled, fontname=\"Helvetica\", fontsize=10];\n";
  for (TensorId t : g.inputs())
    os << "  t" << t << " [shape=ellipse, fillcolor=white, label=\"" << g.tensor(t).name << "\\n"
       << type_str(g.tensor(t)) << "\"];\n";
  for (PrimId p = 0; p < g.num_prims(); ++p) {
    const Primitive& prim = g.prim(p);
    const char* colour = group_of_prim.empty()
                             ? kKindColours[static_cast<int>(prim_kind(prim.op))]
                             : kGroupColours[group_of_prim[p] % (sizeof(kGroupColours) / sizeof(char*))];
    os << "  p" << p << " [shape=box, fillcolor=\"" << colour << "\", label=\"" << prim_op_name(prim.op) << "\\n"
       << type_str(g.tensor(prim.output));
    if (!group_of_prim.empty()) os << "\\nkernel " << group_of_prim[p];
    os << "\"];\n";
  }
  for (PrimId p = 0; p < g.num_prims(); ++p) {
    for (TensorId t : g.prim(p).inputs) {
      const TensorInfo& info = g.tensor(t);
      if (info.producer != kNone)
        os << "  p" << info.producer << " -> p" << p << ";\n";
      else if (!info.is_constant())
        os << "  t" << t << " -> p" << p << ";\n";
    }
  }
  for (TensorId t : g.outputs()) {
    os << "  out" << t << " [shape=ellipse, fillcolor=white, label=\"" << g.tensor(t).name << "\"];\n";
    if (g.tensor(t).producer != kNone) os << "  p" << g.tensor(t).producer << " -> out" << t << ";\n";
  }
  os << "}\n";
}

}  // namespace korch
