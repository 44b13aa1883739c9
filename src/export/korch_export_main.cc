// korch-export: `korch export` as a standalone tool, until the command is wired into korch itself.
//   korch-export MODEL.onnx --plan plan.json -o OUTDIR [--threads N] [--input-shape NAME=D0,D1,...]
#include <iostream>
#include <string>
#include <vector>

#include "export_command.h"
#include "util/error.h"

int main(int argc, char** argv) {
  std::string model, plan, out;
  std::vector<std::string> shapes;
  int threads = 2;
  auto usage = [] {
    std::cerr
        << "usage: korch-export MODEL.onnx --plan plan.json -o OUTDIR [--threads N] [--input-shape NAME=D0,...]\n";
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--plan")
        plan = value();
      else if (a == "-o" || a == "--output")
        out = value();
      else if (a == "--threads")
        threads = std::stoi(value());
      else if (a == "--input-shape")
        shapes.push_back(value());
      else if (!a.empty() && a[0] == '-')
        return usage();
      else if (model.empty())
        model = a;
      else
        return usage();
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 2;
    }
  }
  if (model.empty()) return usage();
  try {
    return korch::run_export(model, shapes, plan, out, threads);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
