// The reference interpreter: runs a verified IR function on host Literals with the StableHLO
// specification's semantics. A function is prepared once (value slots, last uses, buffer
// release points) and executed many times; each execution reports its peak live bytes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/support/status.h"

namespace tlaloc {

using CustomCallHandler = std::function<Status(std::span<const Literal>, std::vector<Literal>&)>;

struct InterpreterOptions {
  // Handlers for custom_call targets (kernels, test checks), by target name.
  std::map<std::string, CustomCallHandler> custom_calls;
  // Threads for large ops (matrix products too, each block a one-thread BLAS call): > 0 gives
  // this executable its own pool; 0 uses the process-wide one (SetDefaultThreadPoolSize in
  // tlaloc/support/thread_pool.h, else TLALOC_NUM_THREADS, else one per core).
  int num_threads = 0;
  // Run recognised chains of ops (softmax) as one fused kernel with the same bits
  // (src/interp/fusion.h); TLALOC_FUSION=0 in the environment turns it off everywhere.
  bool fuse = true;
};

struct ExecutionStats {
  // Largest sum of distinct live buffers at any point: arguments, outputs and temporaries,
  // buffers shared by several values counted once.
  int64_t peak_live_bytes = 0;
  int64_t argument_bytes = 0;
  int64_t output_bytes = 0;
  int64_t ops_executed = 0;
};

class Executable {
 public:
  ~Executable();
  // Prepares `entry` of `module` (the module must outlive the executable, or be shared).
  static StatusOr<std::unique_ptr<Executable>> Prepare(std::shared_ptr<const Module> module,
                                                       const std::string& entry = "",
                                                       InterpreterOptions options = {});

  // Runs the function. Arguments passed by value with unique storage are treated as donated:
  // their buffers may be freed or reused in place once dead.
  StatusOr<std::vector<Literal>> Execute(std::vector<Literal> args,
                                         ExecutionStats* stats = nullptr) const;

  const Function& function() const { return *function_; }
  const Module& module() const { return *module_; }

 private:
  friend class InterpreterRun;
  struct Plan;
  Executable() = default;
  std::shared_ptr<const Module> module_;
  const Function* function_ = nullptr;
  InterpreterOptions options_;
  std::unique_ptr<Plan> plan_;
};

// Makes now, on the default thread pool, what the q8_0 product kernel would make at its first
// call with the int8 matrix q [..., n, k] (s8) and its f16 block scales: the copy of the weights
// laid out for this CPU's kernel, kept per buffer (cpu::CachedQ8Weights). Does nothing where
// the CPU has no such layout, TLALOC_INT8_REPACK=0, or the types are not s8 and f16.
void PrepareQ8Weight(const Literal& q, const Literal& scale);

// The buffers an op's evaluation receives for its results: zero-filled, or uninitialised when
// its OpDef says it writes every element (OpTraits::writes_all_results). Non-tensor results
// (tokens) get a zeroed i1 scalar.
std::vector<Literal> AllocateResults(const Operation& op);

// One-shot helper: prepares and runs a function of a module (no sharing of the module).
StatusOr<std::vector<Literal>> Interpret(const Module& module, const std::string& entry,
                                         std::vector<Literal> args, ExecutionStats* stats = nullptr,
                                         InterpreterOptions options = {});

}  // namespace tlaloc
