// The operator versions each fission rule implements (ONNX since_versions; see onnx_versions.h).
// A version is listed once its semantics have been checked against the rule. Versions 22-28 of
// the operators below only add element types (bfloat16, float4/6/8, int2/uint2) or clarify the
// text, except: SpaceToDepth-28 adds `mode` (handled), Range-27 `stash_type` (float16/bfloat16
// only), Cast-24 `round_mode` (float8e8m0 only), Mod-28 states the float fmod=0 semantics.
#include <algorithm>

#include "fission/onnx_versions.h"

namespace korch {

const std::map<std::string, std::vector<int>>& rule_handled_versions() {
  static const std::map<std::string, std::vector<int>> table = {
      {"Abs", {1, 6, 13}},
      {"Acosh", {9, 22}},
      {"Add", {1, 6, 7, 13, 14}},
      {"And", {1, 7}},
      {"ArgMax", {1, 11, 12, 13}},
      {"ArgMin", {1, 11, 12, 13}},
      {"Asinh", {9, 22}},
      {"Atanh", {9, 22}},
      {"Attention", {23, 24, 25}},
      {"AveragePool", {1, 7, 10, 11, 19, 22}},
      {"BatchNormalization", {1, 6, 7, 9, 14, 15}},
      {"BlackmanWindow", {17}},
      {"Cast", {1, 6, 9, 13, 19, 21, 23, 24, 25, 28}},
      {"CastLike", {15, 19, 21, 23, 24, 25}},
      {"Ceil", {1, 6, 13}},
      {"Celu", {12, 28}},
      {"CenterCropPad", {18}},
      {"Clip", {1, 6, 11, 12, 13}},
      {"Concat", {1, 4, 11, 13}},
      {"Constant", {1, 9, 11, 12, 13, 19, 21, 23, 24, 25}},
      {"ConstantOfShape", {9, 20, 21, 23, 24, 25}},
      {"Conv", {1, 11, 22}},
      {"ConvTranspose", {1, 11, 22}},
      {"Cos", {7, 22}},
      {"Cosh", {9, 22}},
      {"CumProd", {26}},
      {"CumSum", {11, 14}},
      {"DepthToSpace", {1, 11, 13, 28}},
      {"Div", {1, 6, 7, 13, 14}},
      {"Dropout", {1, 6, 7, 10, 12, 13, 22}},
      {"Einsum", {12, 28}},
      {"Elu", {1, 6, 22}},
      {"Equal", {1, 7, 11, 13, 19}},
      {"Erf", {9, 13}},
      {"Exp", {1, 6, 13}},
      {"Expand", {8, 13}},
      {"EyeLike", {9, 22}},
      {"Flatten", {1, 9, 11, 13, 21, 23, 24, 25}},
      {"Floor", {1, 6, 13}},
      {"Gather", {1, 11, 13}},
      {"GatherElements", {11, 13}},
      {"GatherND", {11, 12, 13}},
      {"Gelu", {20}},
      {"Gemm", {1, 6, 7, 9, 11, 13}},
      {"GlobalAveragePool", {1, 22}},
      {"GlobalMaxPool", {1, 22}},
      {"Greater", {1, 7, 9, 13}},
      {"GreaterOrEqual", {12, 16}},
      {"GroupNormalization", {18, 21}},
      {"HammingWindow", {17}},
      {"HannWindow", {17}},
      {"HardSigmoid", {1, 6, 22}},
      {"HardSwish", {14, 22}},
      {"Hardmax", {1, 11, 13}},
      {"Identity", {1, 13, 14, 16, 19, 21, 23, 24, 25}},
      {"InstanceNormalization", {1, 6, 22}},
      {"IsInf", {10, 20}},
      {"IsNaN", {9, 13, 20}},
      {"LRN", {1, 13}},
      {"LayerNormalization", {17}},
      {"LeakyRelu", {1, 6, 16}},
      {"Less", {1, 7, 9, 13}},
      {"LessOrEqual", {12, 16}},
      {"Log", {1, 6, 13}},
      {"LogSoftmax", {1, 11, 13}},
      {"LpNormalization", {1, 22}},
      {"LpPool", {2, 11, 18, 22}},
      {"MatMul", {1, 9, 13}},
      {"Max", {1, 6, 8, 12, 13}},
      {"MaxPool", {1, 8, 10, 11, 12, 22}},
      {"Mean", {1, 6, 8, 13}},
      {"Min", {1, 6, 8, 12, 13}},
      {"Mish", {18, 22}},
      {"Mod", {10, 13, 28}},
      {"Mul", {1, 6, 7, 13, 14}},
      {"NegativeLogLikelihoodLoss", {12, 13, 22}},
      {"Neg", {1, 6, 13}},
      {"Not", {1}},
      {"OneHot", {9, 11, 28}},
      {"Or", {1, 7}},
      {"PRelu", {1, 6, 7, 9, 16}},
      {"Pad", {1, 2, 11, 13, 18, 19, 21, 23, 24, 25}},
      {"Pow", {1, 7, 12, 13, 15}},
      {"RMSNormalization", {23}},
      {"Range", {11, 27}},
      {"Reciprocal", {1, 6, 13}},
      {"ReduceL1", {1, 11, 13, 18}},
      {"ReduceL2", {1, 11, 13, 18}},
      {"ReduceLogSum", {1, 11, 13, 18, 28}},
      {"ReduceLogSumExp", {1, 11, 13, 18, 28}},
      {"ReduceMax", {1, 11, 12, 13, 18, 20}},
      {"ReduceMean", {1, 11, 13, 18}},
      {"ReduceMin", {1, 11, 12, 13, 18, 20}},
      {"ReduceProd", {1, 11, 13, 18}},
      {"ReduceSum", {1, 11, 13}},
      {"ReduceSumSquare", {1, 11, 13, 18}},
      {"Relu", {1, 6, 13, 14}},
      {"Reshape", {1, 5, 13, 14, 19, 21, 23, 24, 25}},
      {"Resize", {10, 11, 13, 18, 19}},
      {"Round", {11, 22}},
      {"Scatter", {9, 11}},
      {"ScatterElements", {11, 13, 16, 18}},
      {"ScatterND", {11, 13, 16, 18}},
      {"Selu", {1, 6, 22}},
      {"Shape", {1, 13, 15, 19, 21, 23, 24, 25}},
      {"Shrink", {9}},
      {"Sigmoid", {1, 6, 13}},
      {"Sign", {9, 13}},
      {"Sin", {7, 22}},
      {"Sinh", {9, 22}},
      {"Size", {1, 13, 19, 21, 23, 24, 25}},
      {"Slice", {1, 10, 11, 13}},
      {"Softmax", {1, 11, 13}},
      {"SoftmaxCrossEntropyLoss", {12, 13}},
      {"Softplus", {1, 22}},
      {"Softsign", {1, 22}},
      {"SpaceToDepth", {1, 13, 28}},
      {"Split", {1, 2, 11, 13, 18}},
      {"Sqrt", {1, 6, 13}},
      {"Squeeze", {1, 11, 13, 21, 23, 24, 25}},
      {"Sub", {1, 6, 7, 13, 14}},
      {"Sum", {1, 6, 8, 13}},
      {"Swish", {24}},
      {"Tan", {7, 22}},
      {"Tanh", {1, 6, 13}},
      {"ThresholdedRelu", {10, 22}},
      {"Tile", {1, 6, 13}},
      {"TopK", {1, 10, 11, 24}},
      {"Transpose", {1, 13, 21, 23, 24, 25}},
      {"Trilu", {14}},
      {"Unsqueeze", {1, 11, 13, 21, 23, 24, 25}},
      {"Upsample", {1, 7, 9, 10}},
      {"Where", {9, 16}},
      {"Xor", {1, 7}},
  };
  return table;
}

int onnx_since_version(const std::string& op_type, int opset) {
  auto it = onnx_since_versions().find(op_type);
  if (it == onnx_since_versions().end()) return 0;
  int version = 0;
  for (int v : it->second)
    if (v <= opset) version = v;
  return version;
}

bool rule_handles_version(const std::string& op_type, int since_version) {
  auto it = rule_handled_versions().find(op_type);
  if (it == rule_handled_versions().end()) return false;
  return std::find(it->second.begin(), it->second.end(), since_version) != it->second.end();
}

}  // namespace korch
