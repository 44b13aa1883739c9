// ONNX operator versions: which version of an operator is in force at a model's opset (ONNX's
// since_version table, generated from the onnx package), and which of those versions korch's
// fission rules implement. Import refuses a node whose version in force is not implemented.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace korch {

// The newest opset of the default domain the table knows.
int onnx_newest_opset();
// Every default-domain operator -> its since_versions, ascending (onnx_versions_table.cc).
const std::map<std::string, std::vector<int>>& onnx_since_versions();
// The version of op_type in force at `opset`: the newest since_version <= opset; 0 when the
// operator is unknown or does not exist yet at that opset.
int onnx_since_version(const std::string& op_type, int opset);
// Per fission rule, the since_versions whose semantics it implements (rule_versions.cc).
const std::map<std::string, std::vector<int>>& rule_handled_versions();
// Whether the rule for op_type implements version `since_version` of the operator.
bool rule_handles_version(const std::string& op_type, int since_version);

}  // namespace korch
