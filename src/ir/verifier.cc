// Verifier: a PrimGraph is valid when every id is in range, every tensor has at most one
// producer and that producer agrees with the tensor's record, primitives appear in a
// topological order, stored dtypes/shapes equal the inferred ones and outputs exist.
#include "ir/printer.h"
#include "util/error.h"

namespace korch {

std::vector<std::string> verify_graph(const PrimGraph& g) {
  std::vector<std::string> problems;
  std::vector<char> defined(g.num_tensors(), 0);
  for (TensorId t : g.inputs()) {
    if (t < 0 || t >= g.num_tensors()) {
      problems.push_back(str_cat("graph input id ", t, " out of range"));
      continue;
    }
    if (g.tensor(t).producer != kNone) problems.push_back(str_cat("graph input %", t, " has a producer"));
    if (g.tensor(t).is_constant()) problems.push_back(str_cat("graph input %", t, " is a constant"));
    defined[t] = 1;
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t) {
    const TensorInfo& info = g.tensor(t);
    if (info.is_constant()) {
      defined[t] = 1;
      if (info.producer != kNone) problems.push_back(str_cat("constant %", t, " has a producer"));
      if (info.constant->shape() != info.shape || info.constant->dtype() != info.dtype)
        problems.push_back(str_cat("constant %", t, " value does not match its type"));
    }
  }
  for (PrimId p = 0; p < g.num_prims(); ++p) {
    const Primitive& prim = g.prim(p);
    std::vector<const TensorInfo*> ins;
    bool ok = true;
    for (TensorId t : prim.inputs) {
      if (t < 0 || t >= g.num_tensors()) {
        problems.push_back(str_cat("primitive ", p, " input id ", t, " out of range"));
        ok = false;
      } else if (!defined[t]) {
        problems.push_back(
            str_cat("primitive ", p, " (", prim_op_name(prim.op), ") uses %", t, " before it is defined"));
        ok = false;
      } else {
        ins.push_back(&g.tensor(t));
      }
    }
    if (prim.output < 0 || prim.output >= g.num_tensors()) {
      problems.push_back(str_cat("primitive ", p, " output id out of range"));
      continue;
    }
    if (defined[prim.output]) problems.push_back(str_cat("tensor %", prim.output, " defined twice"));
    defined[prim.output] = 1;
    if (g.tensor(prim.output).producer != p)
      problems.push_back(str_cat("tensor %", prim.output, " does not record primitive ", p, " as producer"));
    int arity = prim_arity(prim.op);
    if (arity >= 0 && static_cast<int>(prim.inputs.size()) != arity)
      problems.push_back(str_cat("primitive ", p, " has ", prim.inputs.size(), " inputs, wants ", arity));
    if (!ok || (arity >= 0 && static_cast<int>(prim.inputs.size()) != arity)) continue;
    try {
      DType dtype;
      Shape shape;
      infer_primitive(prim.op, ins, prim.attrs, &dtype, &shape);
      if (dtype != g.tensor(prim.output).dtype || shape != g.tensor(prim.output).shape)
        problems.push_back(str_cat("primitive ", p, " (", prim_op_name(prim.op), ") output type ",
                                   dtype_name(g.tensor(prim.output).dtype), shape_str(g.tensor(prim.output).shape),
                                   " but inference gives ", dtype_name(dtype), shape_str(shape)));
    } catch (const Error& e) {
      problems.push_back(str_cat("primitive ", p, " (", prim_op_name(prim.op), "): ", e.what()));
    }
  }
  for (TensorId t = 0; t < g.num_tensors(); ++t)
    if (!defined[t]) problems.push_back(str_cat("tensor %", t, " is never defined"));
  if (g.outputs().empty()) problems.push_back("graph has no outputs");
  for (TensorId t : g.outputs())
    if (t < 0 || t >= g.num_tensors()) problems.push_back(str_cat("graph output id ", t, " out of range"));
  return problems;
}

void verify_graph_or_throw(const PrimGraph& g) {
  auto problems = verify_graph(g);
  if (!problems.empty()) fail("invalid primitive graph: ", problems.front());
}

}  // namespace korch
