// korch_blp_replay: solves BLPs written by a korch run with KORCH_BLP_DUMP_DIR set, with the CBC
// settings that run used (recorded beside each BLP) plus any given as NAME VALUE pairs (CBC's command-line names), each
// to optimality (60 s cap) from its warm start, and prints per problem the seconds, objective and whether it was proven
// optimal (or, under a cutoff, proven infeasible). To compare solver settings on the problems of real models:
//   KORCH_BLP_DUMP_DIR=dumps build/korch optimize model.onnx --cost measured --cache fresh.sqlite
//   build/korch_blp_replay dumps/blp-*.mps.gz -- passCuts 20
#include <coin/Cbc_C_Interface.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

void solve(const std::string& mps, const std::vector<std::string>& settings) {
  if (!std::ifstream(mps).good()) {  // Debian's Cbc_readMps asserts on a missing file
    std::printf("%s: cannot read\n", mps.c_str());
    return;
  }
  Cbc_Model* model = Cbc_newModel();
  Cbc_setLogLevel(model, 0);
  if (Cbc_readMps(model, mps.c_str()) != 0) {
    std::printf("%s: cannot read\n", mps.c_str());
    Cbc_deleteModel(model);
    return;
  }
  Cbc_setMaximumSeconds(model, 60);
  Cbc_setAllowableGap(model, 0.0);
  // DIR/blp-N.start beside DIR/blp-N.mps[.gz], as korch's write_problem wrote it: the time limit
  // and the number of kernel columns; korch's CBC settings (name value ...) on one line; the warm
  // start, one kernel column per line.
  std::string base = mps.substr(0, mps.find(".mps"));
  std::ifstream start_file(base + ".start");
  double limit = 0;
  int kernel_columns = 0;
  std::string korch_settings;
  start_file >> limit >> kernel_columns;
  start_file.ignore();
  std::getline(start_file, korch_settings);
  std::istringstream korch_pairs(korch_settings);
  for (std::string name, value; korch_pairs >> name >> value;) Cbc_setParameter(model, name.c_str(), value.c_str());
  for (size_t i = 0; i + 1 < settings.size(); i += 2)
    Cbc_setParameter(model, settings[i].c_str(), settings[i + 1].c_str());
  std::vector<int> start;
  for (int k; start_file >> k;) start.push_back(k);
  if (!start.empty() && kernel_columns > 0 && kernel_columns <= Cbc_getNumCols(model)) {
    std::vector<int> cols(kernel_columns);
    std::vector<double> values(kernel_columns, 0.0);
    for (int c = 0; c < kernel_columns; ++c) cols[c] = c;
    for (int k : start)
      if (k < kernel_columns) values[k] = 1.0;
    Cbc_setMIPStartI(model, kernel_columns, cols.data(), values.data());
  }
  auto t0 = std::chrono::steady_clock::now();
  Cbc_solve(model);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // infeasible 1 under a cutoff (korch's closing solves): no selection below it.
  std::printf("%s %.3f s objective %.6f optimal %d infeasible %d bound %.6f\n", mps.c_str(), seconds,
              Cbc_getObjValue(model), Cbc_isProvenOptimal(model), Cbc_isProvenInfeasible(model),
              Cbc_getBestPossibleObjValue(model));
  Cbc_deleteModel(model);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files, settings;
  bool in_settings = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      in_settings = true;
      continue;
    }
    (in_settings ? settings : files).push_back(arg);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: korch_blp_replay DIR/blp-N.mps.gz... [-- NAME VALUE...]\n");
    return 2;
  }
  for (const std::string& f : files) solve(f, settings);
}
