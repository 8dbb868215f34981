#include "tlaloc/ir/serial_eval_context.h"

#include <algorithm>

namespace tlaloc {

StatusOr<std::vector<Literal>> SerialEvalContext::RunRegion(const Region&, std::vector<Literal>) {
  return Unimplemented("an op evaluated on its own (SerialEvalContext) cannot run a region");
}

StatusOr<std::vector<Literal>> SerialEvalContext::CallFunction(const std::string& name,
                                                               std::vector<Literal>) {
  return Unimplemented("an op evaluated on its own (SerialEvalContext) cannot call @" + name);
}

void SerialEvalContext::ParallelFor(int64_t n, int64_t grain,
                                    const std::function<void(int64_t, int64_t)>& body) {
  if (!options_.chunk_by_grain) {
    body(0, n);
    return;
  }
  const int64_t step = std::max<int64_t>(grain, 1);
  for (int64_t begin = 0; begin < n; begin += step) body(begin, std::min(n, begin + step));
}

bool SerialEvalContext::CanReuseOperand(int i) const { return i == 0 && options_.reuse_operand0; }

const std::function<Status(std::span<const Literal>, std::vector<Literal>&)>*
SerialEvalContext::FindCustomCall(const std::string&) const {
  return nullptr;
}

}  // namespace tlaloc
