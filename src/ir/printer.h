// Text and Graphviz renderings of a primitive graph, a verifier and a structural hash.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "ir/prim_graph.h"

namespace korch {

// One line per tensor input/constant summary and one line per primitive:
//   %12:f32[1,64,56,56] = Conv(%3, %4) {dilations=[1,1], ...}  # conv1 (Conv)
void print_graph(std::ostream& os, const PrimGraph& g);
std::string graph_to_string(const PrimGraph& g);

// Graphviz DOT; nodes are primitives coloured by kind (or by group when `group_of_prim`
// is given: one colour per group id, e.g. a kernel of a plan).
void print_dot(std::ostream& os, const PrimGraph& g, const std::vector<int>& group_of_prim = {});

// Checks every structural invariant (ids in range, one producer per tensor, topological
// order, inferred shapes/dtypes match the stored ones, outputs defined). Returns the list
// of problems; empty means valid.
std::vector<std::string> verify_graph(const PrimGraph& g);
// Throws korch::Error with the first problem, if any.
void verify_graph_or_throw(const PrimGraph& g);

// Structural hash of a set of primitives (ascending ids = topological order): same ops,
// attributes, wiring, dtypes and shapes => same hash. Constant values and tensor names do
// not participate; whether an external input is a constant does.
uint64_t structural_hash(const PrimGraph& g, const std::vector<PrimId>& prims);
uint64_t structural_hash(const PrimGraph& g);

}  // namespace korch
