// An EvalContext for evaluating one op on its own, outside an interpreter run: plan-time
// evaluation (an iota's values computed once) and the kernel tests. ParallelFor runs on the
// calling thread; regions, function calls and custom calls are refused, as the ops evaluated
// this way run none.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/ir/op_registry.h"

namespace tlaloc {

class SerialEvalContext : public EvalContext {
 public:
  struct Options {
    // ParallelFor hands its body [0, n) in chunks of `grain`, in order, as a thread pool would cut
    // it (so a kernel's chunk boundaries are exercised); otherwise in one call, body(0, n).
    bool chunk_by_grain = false;
    // CanReuseOperand(0): an op may take over operand 0's buffer for a result. No other operand
    // is ever reusable.
    bool reuse_operand0 = false;
  };

  SerialEvalContext() = default;
  explicit SerialEvalContext(Options options) : options_(options) {}

  StatusOr<std::vector<Literal>> RunRegion(const Region& region,
                                           std::vector<Literal> args) override;
  StatusOr<std::vector<Literal>> CallFunction(const std::string& name,
                                              std::vector<Literal> args) override;
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int64_t, int64_t)>& body) override;
  bool CanReuseOperand(int i) const override;
  const std::function<Status(std::span<const Literal>, std::vector<Literal>&)>* FindCustomCall(
      const std::string& target) const override;

 private:
  Options options_;
};

}  // namespace tlaloc
