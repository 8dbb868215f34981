// Named composites to kernels (fusion.h): one table from a composite's name to the function
// that makes its kernel, so a composite the builder or nn emits (builder/composite.h) runs as one
// kernel because of its name, not because a matcher recognised the chain it decomposes into.
// Each kernel returns its decomposition's bits (each entry's file says how); a composite whose
// types or attributes its kernel does not take runs its decomposition.
#include <string_view>

#include "fusion.h"

namespace tlaloc::interp {

namespace {

// A composite whose matcher (fusion_int8.cc, fusion_gguf.cc) hands out a static kernel, in the
// table's form.
using StaticMatcher = bool (*)(const Block&, int, std::vector<int>&, std::vector<Value>&,
                               const FusedKernel*&);
// The matcher's operand order is the kernel's (gguf_linear's kernel takes q, scale, x).
template <StaticMatcher kMatch>
std::shared_ptr<const FusedKernel> StaticKernel(const Block& block, int a,
                                                std::vector<Value>& operands) {
  std::vector<int> chain;
  const FusedKernel* kernel = nullptr;
  if (!kMatch(block, a, chain, operands, kernel)) return nullptr;
  // A static kernel: shared without ownership.
  return std::shared_ptr<const FusedKernel>(std::shared_ptr<const FusedKernel>(), kernel);
}

struct CompositeEntry {
  std::string_view name;
  // Given the composite's operands in `operands`, which the kernel may reorder.
  std::shared_ptr<const FusedKernel> (*make)(const Block& block, int a,
                                             std::vector<Value>& operands);
};

const CompositeEntry kComposites[] = {
    {"tlaloc.int8_linear", StaticKernel<MatchInt8Composite>},
    {"tlaloc.ragged_int8_linear", StaticKernel<MatchRaggedInt8Composite>},
    {"tlaloc.gguf_linear", StaticKernel<MatchGgufComposite>},
    {"tlaloc.rms_norm",
     [](const Block& block, int a, std::vector<Value>&) {
       return RmsNormCompositeKernel(*block.operations()[a]);
     }},
    {"tlaloc.rotary",
     [](const Block& block, int a, std::vector<Value>&) {
       return RotaryCompositeKernel(*block.operations()[a]);
     }},
    {"tlaloc.linear_cross_entropy",
     [](const Block& block, int a, std::vector<Value>&) {
       return LinearCrossEntropyCompositeKernel(*block.operations()[a]);
     }},
    {"tlaloc.silu_and_mul",
     [](const Block& block, int a, std::vector<Value>&) {
       return SiluMulCompositeKernel(*block.operations()[a]);
     }},
    {"tlaloc.paged_dot",
     [](const Block& block, int a, std::vector<Value>&) {
       return PagedDotCompositeKernel(*block.operations()[a]);
     }},
    {"tlaloc.argmax",
     [](const Block& block, int a, std::vector<Value>&) {
       return ArgmaxCompositeKernel(*block.operations()[a]);
     }},
    {"tlaloc.masked_softmax",
     [](const Block& block, int a, std::vector<Value>&) {
       return MaskedSoftmaxCompositeKernel(*block.operations()[a]);
     }},
};

}  // namespace

std::shared_ptr<const FusedKernel> CompositeKernel(const Block& block, int a,
                                                   std::vector<int>& chain,
                                                   std::vector<Value>& operands) {
  const Operation& op = *block.operations()[a];
  if (op.name() != "stablehlo.composite") return nullptr;
  const std::string name = GetStringAttr(op.attrs(), "name");
  for (const CompositeEntry& entry : kComposites) {
    if (entry.name != name) continue;
    std::vector<Value> in(op.operands().begin(), op.operands().end());
    auto kernel = entry.make(block, a, in);
    if (!kernel) return nullptr;
    chain = {a};
    operands = std::move(in);
    return kernel;
  }
  return nullptr;
}

}  // namespace tlaloc::interp
