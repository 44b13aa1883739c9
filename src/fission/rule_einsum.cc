// Fission rule for Einsum: the equation (explicit or implicit output, "..." broadcast dims) is
// evaluated left to right, two operands at a time. A label repeated within one operand takes
// the diagonal (Transpose + Reshape + strided Slice); labels no later operand or the output needs
// are summed away (ReduceSum); each pair becomes Transpose/Reshape to [batch..., rows, contracted]
// x [batch..., contracted, cols], one MatMul, and a Reshape back; a final Transpose orders the
// output.
#include <algorithm>
#include <map>
#include <set>

#include "fission/fission.h"
#include "fission/fission_helpers.h"

namespace korch {

namespace {

constexpr int kEllipsisBase = 1000;  // labels of "..." dims: kEllipsisBase + k, right-aligned

struct Term {
  TensorId t;
  std::vector<int> labels;  // one per axis
};

std::vector<int> parse_labels(FissionContext& c, const std::string& s, int64_t rank, int64_t max_ellipsis,
                              bool* has_ellipsis) {
  std::vector<int> out;
  size_t dots = s.find("...");
  *has_ellipsis = dots != std::string::npos;
  int64_t letters = static_cast<int64_t>(s.size()) - (*has_ellipsis ? 3 : 0);
  int64_t e = *has_ellipsis ? rank - letters : 0;
  if (rank >= 0 && e < 0) c.error("term '", s, "' has more labels than its operand has axes");
  for (size_t i = 0; i < s.size(); ++i) {
    if (*has_ellipsis && i == dots) {
      for (int64_t k = 0; k < e; ++k) out.push_back(kEllipsisBase + static_cast<int>(max_ellipsis - e + k));
      i += 2;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(s[i]))) c.error("invalid character '", s[i], "' in the equation");
    out.push_back(s[i]);
  }
  if (rank >= 0 && static_cast<int64_t>(out.size()) != rank)
    c.error("term '", s, "' has ", out.size(), " labels for an operand of rank ", rank);
  return out;
}

TensorId transpose_to(FissionContext& c, TensorId x, const std::vector<int>& from, const std::vector<int>& to) {
  std::vector<int64_t> perm;
  for (int l : to) perm.push_back(std::find(from.begin(), from.end(), l) - from.begin());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  if (identity) return x;
  return c.emit(PrimOp::Transpose, {x}, Attrs().set("perm", perm));
}

// Takes diagonals until every label appears once.
void take_diagonals(FissionContext& c, Term& term) {
  for (;;) {
    int p = -1, q = -1;
    for (size_t i = 0; i < term.labels.size() && p < 0; ++i)
      for (size_t j = i + 1; j < term.labels.size(); ++j)
        if (term.labels[i] == term.labels[j]) {
          p = static_cast<int>(i);
          q = static_cast<int>(j);
          break;
        }
    if (p < 0) return;
    int64_t n = c.shape(term.t)[p];
    if (c.shape(term.t)[q] != n) c.error("a repeated label spans axes of different sizes");
    std::vector<int> rest;
    for (size_t i = 0; i < term.labels.size(); ++i)
      if (static_cast<int>(i) != p && static_cast<int>(i) != q) rest.push_back(term.labels[i]);
    // Move the pair last (q's axis is relabelled so that transpose_to can tell them apart).
    std::vector<int> from = term.labels;
    from[q] = -1;
    std::vector<int> order = rest;
    order.push_back(term.labels[p]);
    order.push_back(-1);
    TensorId x = transpose_to(c, term.t, from, order);
    Shape s = c.shape(x);
    s.pop_back();
    s.back() = n * n;
    x = c.reshape(x, s);
    x = slice_axis(c, x, static_cast<int64_t>(s.size()) - 1, 0, n, n + 1);
    rest.push_back(term.labels[p]);
    term = {x, rest};
  }
}

// Sums away the labels of `term` not in `keep`.
void sum_unneeded(FissionContext& c, Term& term, const std::multiset<int>& keep) {
  std::vector<int64_t> axes;
  std::vector<int> rest;
  for (size_t i = 0; i < term.labels.size(); ++i) {
    if (keep.count(term.labels[i]))
      rest.push_back(term.labels[i]);
    else
      axes.push_back(static_cast<int64_t>(i));
  }
  if (axes.empty()) return;
  term = {c.reduce(PrimOp::ReduceSum, term.t, axes, false), rest};
}

int64_t size_of(FissionContext& c, const Term& t, int label) {
  auto it = std::find(t.labels.begin(), t.labels.end(), label);
  return it == t.labels.end() ? 1 : c.shape(t.t)[it - t.labels.begin()];
}

Term contract(FissionContext& c, Term a, Term b, const std::multiset<int>& keep) {
  std::vector<int> batch, rows, cols, inner;
  for (int l : a.labels) {
    bool in_b = std::count(b.labels.begin(), b.labels.end(), l) > 0;
    if (in_b)
      (keep.count(l) ? batch : inner).push_back(l);
    else
      rows.push_back(l);
  }
  for (int l : b.labels)
    if (!std::count(a.labels.begin(), a.labels.end(), l)) cols.push_back(l);
  Shape batch_shape;
  for (int l : batch) {
    int64_t sa = size_of(c, a, l), sb = size_of(c, b, l);
    if (sa != sb && sa != 1 && sb != 1) c.error("label sizes ", sa, " and ", sb, " do not broadcast");
    batch_shape.push_back(std::max(sa, sb));
  }
  int64_t nr = 1, nc = 1, ni = 1;
  Shape row_shape, col_shape;
  for (int l : rows) row_shape.push_back(size_of(c, a, l)), nr *= row_shape.back();
  for (int l : cols) col_shape.push_back(size_of(c, b, l)), nc *= col_shape.back();
  for (int l : inner) {
    if (size_of(c, a, l) != size_of(c, b, l)) c.error("contracted label sizes differ");
    ni *= size_of(c, a, l);
  }
  auto prepare = [&](const Term& t, const std::vector<int>& mid, const std::vector<int>& last, const Shape& tail) {
    std::vector<int> order = batch;
    order.insert(order.end(), mid.begin(), mid.end());
    order.insert(order.end(), last.begin(), last.end());
    TensorId x = transpose_to(c, t.t, t.labels, order);
    Shape full = c.shape(x);
    for (size_t i = 0; i < batch.size(); ++i) full[i] = batch_shape[i];
    if (full != c.shape(x)) x = c.emit(PrimOp::Broadcast, {x}, Attrs().set("shape", full));
    Shape s = batch_shape;
    s.insert(s.end(), tail.begin(), tail.end());
    return c.reshape(x, s);
  };
  TensorId x = prepare(a, rows, inner, {nr, ni});
  TensorId y = prepare(b, inner, cols, {ni, nc});
  TensorId r = c.emit(PrimOp::MatMul, {x, y});
  Shape out = batch_shape;
  out.insert(out.end(), row_shape.begin(), row_shape.end());
  out.insert(out.end(), col_shape.begin(), col_shape.end());
  std::vector<int> labels = batch;
  labels.insert(labels.end(), rows.begin(), rows.end());
  labels.insert(labels.end(), cols.begin(), cols.end());
  return {c.reshape(r, out), labels};
}

}  // namespace

void register_einsum_rule() {
  register_fission_rule("Einsum", [](FissionContext& c) {
    std::string eq;
    for (char ch : c.attr_s("equation", ""))
      if (ch != ' ') eq += ch;
    size_t arrow = eq.find("->");
    std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> terms;
    for (size_t start = 0;;) {
      size_t comma = lhs.find(',', start);
      terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (static_cast<int>(terms.size()) != c.num_inputs())
      c.error("the equation has ", terms.size(), " terms for ", c.num_inputs(), " inputs");
    int64_t max_ellipsis = 0;
    for (size_t i = 0; i < terms.size(); ++i) {
      size_t dots = terms[i].find("...");
      if (dots != std::string::npos)
        max_ellipsis = std::max<int64_t>(
            max_ellipsis, c.rank(c.input(static_cast<int>(i))) - static_cast<int64_t>(terms[i].size() - 3));
    }
    std::vector<Term> ops;
    std::map<int, int> count;
    for (size_t i = 0; i < terms.size(); ++i) {
      bool e = false;
      TensorId t = c.input(static_cast<int>(i));
      ops.push_back({t, parse_labels(c, terms[i], c.rank(t), max_ellipsis, &e)});
      for (int l : ops.back().labels) count[l]++;
    }
    std::vector<int> output;
    if (arrow != std::string::npos) {
      bool e = false;
      output = parse_labels(c, eq.substr(arrow + 2), -1, max_ellipsis, &e);
      if (e) {  // parse_labels left "..." out: -1 rank; expand it here
        output.clear();
        std::string rhs = eq.substr(arrow + 2);
        for (size_t i = 0; i < rhs.size(); ++i) {
          if (rhs.compare(i, 3, "...") == 0) {
            for (int64_t k = 0; k < max_ellipsis; ++k) output.push_back(kEllipsisBase + static_cast<int>(k));
            i += 2;
          } else {
            output.push_back(rhs[i]);
          }
        }
      }
    } else {
      for (int64_t k = 0; k < max_ellipsis; ++k) output.push_back(kEllipsisBase + static_cast<int>(k));
      for (const auto& [l, n] : count)
        if (l < kEllipsisBase && n == 1) output.push_back(l);
    }
    for (Term& t : ops) take_diagonals(c, t);
    // Labels still needed after operand i: the output's and those of operands i+1...
    auto needed_after = [&](size_t i) {
      std::multiset<int> keep(output.begin(), output.end());
      for (size_t j = i + 1; j < ops.size(); ++j) keep.insert(ops[j].labels.begin(), ops[j].labels.end());
      return keep;
    };
    Term acc = ops[0];
    if (ops.size() == 1) {
      sum_unneeded(c, acc, needed_after(0));
    } else {
      for (size_t i = 1; i < ops.size(); ++i) {
        std::multiset<int> keep = needed_after(i);
        // Labels only one side has and nobody needs are summed first.
        std::multiset<int> keep_a = keep, keep_b = keep;
        keep_a.insert(ops[i].labels.begin(), ops[i].labels.end());
        keep_b.insert(acc.labels.begin(), acc.labels.end());
        sum_unneeded(c, acc, keep_a);
        Term b = ops[i];
        sum_unneeded(c, b, keep_b);
        acc = contract(c, acc, b, keep);
      }
    }
    for (int l : output)
      if (!std::count(acc.labels.begin(), acc.labels.end(), l)) c.error("output label not found in the inputs");
    if (acc.labels.size() != output.size()) c.error("the output does not name every remaining label");
    TensorId y = transpose_to(c, acc.t, acc.labels, output);
    c.set_output(0, y == c.input(0) ? c.unary(PrimOp::Copy, y) : y);
  });
}

}  // namespace korch
