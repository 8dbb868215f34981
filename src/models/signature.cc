// Lookups over a program signature.
#include "tlaloc/models/signature.h"

namespace tlaloc::models {

namespace {
int Nth(const std::vector<PortSpec>& specs, Port port, int n) {
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].port == port && n-- == 0) return static_cast<int>(i);
  return -1;
}
std::vector<int> All(const std::vector<PortSpec>& specs, Port port) {
  std::vector<int> out;
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].port == port) out.push_back(static_cast<int>(i));
  return out;
}
}  // namespace

std::string_view PortName(Port port) {
  switch (port) {
    case Port::kWeight:
      return "weight";
    case Port::kTokens:
      return "tokens";
    case Port::kPositions:
      return "positions";
    case Port::kLengths:
      return "lengths";
    case Port::kSlots:
      return "slots";
    case Port::kBlockTable:
      return "block_table";
    case Port::kWriteBlocks:
      return "write_blocks";
    case Port::kTemperature:
      return "temperature";
    case Port::kTopK:
      return "top_k";
    case Port::kTopP:
      return "top_p";
    case Port::kKeys:
      return "keys";
    case Port::kSteps:
      return "steps";
    case Port::kMinP:
      return "min_p";
    case Port::kLogitBias:
      return "logit_bias";
    case Port::kPenaltyScale:
      return "penalty_scale";
    case Port::kPenaltyOffset:
      return "penalty_offset";
    case Port::kKCache:
      return "k_cache";
    case Port::kVCache:
      return "v_cache";
    case Port::kNextTokens:
      return "next_tokens";
    case Port::kLogits:
      return "logits";
  }
  return "?";
}

int ProgramSignature::Input(Port port, int n) const { return Nth(inputs, port, n); }
int ProgramSignature::Output(Port port, int n) const { return Nth(outputs, port, n); }
std::vector<int> ProgramSignature::Inputs(Port port) const { return All(inputs, port); }
std::vector<int> ProgramSignature::Outputs(Port port) const { return All(outputs, port); }

bool ProgramSignature::IsCacheInput(int index) const {
  if (index < 0 || static_cast<size_t>(index) >= inputs.size()) return false;
  return inputs[index].port == Port::kKCache || inputs[index].port == Port::kVCache;
}

std::string ProgramSignature::ToString() const {
  std::string s;
  for (const auto* group : {&inputs, &outputs})
    for (const PortSpec& p : *group)
      s += std::string(group == &inputs ? "in  " : "out ") + p.name + " " +
           Type(p.type).ToString() + "\n";
  return s;
}

}  // namespace tlaloc::models
