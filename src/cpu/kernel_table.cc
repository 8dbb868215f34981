// The CPU layer's registration: which op runs which kernel, and the bulk loops installed under
// the elementwise references.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "cpu/op_kernels.h"
#include "cpu/reduction_rows.h"
#include "cpu/vector_math.h"
#include "tlaloc/cpu/kernels.h"

namespace tlaloc::cpu {

using ops::MatchBinaryBody;
using ops::ReduceDimensions;

// A reduce whose reduced dimensions are the trailing ones folds one contiguous row per output:
// f32 rows with an add, multiply, max or min body go to the row folds (reduction_rows.cc), bit
// for bit the reference's sequential fold.
Status ReduceKernel(const Operation& op, std::span<const Literal> operands,
                    std::vector<Literal>& results, EvalContext& ctx) {
  if (operands.size() == 2) {
    const std::vector<int64_t>& in_dims = operands[0].dims();
    const std::vector<int64_t> dims = ReduceDimensions(op);
    const int64_t rank = static_cast<int64_t>(in_dims.size());
    int64_t kept = 1, reduced = 1, reduced_count = 0;
    for (int64_t d = 0; d < rank; ++d) {
      const bool is_reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
      (is_reduced ? reduced : kept) *= in_dims[d];
      reduced_count += is_reduced;
    }
    bool trailing = !dims.empty();
    for (int64_t d = rank - reduced_count; d < rank; ++d)
      trailing = trailing && std::find(dims.begin(), dims.end(), d) != dims.end();
    const ElementType et = operands[0].element_type();
    if (trailing && et == ElementType::kF32 && operands[1].element_type() == et &&
        results[0].element_type() == et) {
      const auto kind = MatchBinaryBody(op.region(0));
      if (kind && ReduceContiguousRowsF32(*kind, operands[0].span<float>().data(),
                                          operands[1].span<float>()[0],
                                          results[0].span<float>().data(), kept, reduced, ctx))
        return OkStatus();
    }
  }
  return op.def().eval(op, operands, results, ctx);
}

namespace {

const ops::vmath::BulkKernels kVectorKernels{vmath::ExpF32, vmath::LogisticF32, vmath::RsqrtF32,
                                             vmath::Bf16ToF32, vmath::F32ToBf16};

const std::map<std::string, EvalFn, std::less<>>& Table() {
  static const std::map<std::string, EvalFn, std::less<>> table = {
      {"stablehlo.dot_general", DotKernel},
      {"stablehlo.dot", DotKernel},
      {"chlo.ragged_dot", RaggedDotKernel},
      {"stablehlo.reduce", ReduceKernel},
  };
  return table;
}

}  // namespace

void RegisterKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    ops::vmath::InstallBulkKernels(&kVectorKernels);
    Table();
  });
}

const EvalFn* FindKernel(std::string_view name) {
  RegisterKernels();
  const auto& table = Table();
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

const EvalFn& KernelFor(const OpDef& def, bool reference_only) {
  if (!reference_only)
    if (const EvalFn* kernel = FindKernel(def.name)) return *kernel;
  return def.eval;
}

bool ReferenceOnlyFromEnvironment() {
  const char* env = std::getenv("TLALOC_CPU_KERNELS");
  return env != nullptr && std::string_view(env) == "0";
}

std::vector<std::string> KernelOpNames() {
  std::vector<std::string> names;
  for (const auto& [name, kernel] : Table()) names.push_back(name);
  return names;
}

}  // namespace tlaloc::cpu
