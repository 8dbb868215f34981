// Reverse-mode automatic differentiation over Tlaloc's IR. The gradient of a function is built
// from the VJP rules kept with each op's registry entry (OpDef::vjp), so it is an ordinary IR
// function of ordinary ops: it verifies, prints as StableHLO, interprets, runs through PJRT, and
// can itself be differentiated again.
//
// Only values that depend on the chosen arguments are differentiated (integer values, masks,
// position tables and other constants get no cotangent and need no rule). Asking for the
// gradient of an integer argument, or differentiating through an op without a rule, is an error
// naming the argument or op.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/ir/builder.h"
#include "tlaloc/ir/ir.h"
#include "tlaloc/support/status.h"

namespace tlaloc::autodiff {

// Marks a program's builder code can leave for the differentiator: regions to rematerialise
// and values whose gradient is stopped. Keep it alive until the gradient is built.
class Marks {
 public:
  // Ops of one remat region: recomputed in the backward pass from the region's inputs instead of
  // keeping their results alive from the forward pass.
  const std::vector<std::set<const Operation*>>& remat_regions() const { return remat_; }
  // Ops whose results carry no gradient (StopGradient).
  const std::set<const Operation*>& stopped() const { return stopped_; }

 private:
  friend class RematScope;
  friend Tensor StopGradient(const Tensor& x, Marks* marks);
  std::vector<std::set<const Operation*>> remat_;
  std::set<const Operation*> stopped_;
};

// RAII: the ops the builder appends to its current block while the scope lives form one remat
// region of `marks` (a null `marks` records nothing). Regions must not nest.
class RematScope {
 public:
  RematScope(Marks* marks, OpBuilder& b);
  ~RematScope();
  RematScope(const RematScope&) = delete;
  RematScope& operator=(const RematScope&) = delete;

 private:
  Marks* marks_;
  OpBuilder& b_;
  Block* block_;
  size_t begin_;
};

// x unchanged, with no gradient flowing back through this use (an optimization_barrier recorded
// in `marks`; with null marks, x itself).
Tensor StopGradient(const Tensor& x, Marks* marks);

struct GradOptions {
  std::vector<int> wrt;          // argument indices to differentiate with respect to
  int output = 0;                // Grad / ValueAndGrad: the float scalar result differentiated
  const Marks* marks = nullptr;  // remat regions and stopped gradients of `f`
};

// What EmitGradient appended: f's results and one gradient per wrt argument (f's argument types).
struct GradientValues {
  std::vector<Value> results;
  std::vector<Value> gradients;
};

// Appends f's forward computation and its backward pass to b's block, with `args` standing for
// f's arguments and `result_cotangents` seeding f's results (an invalid Value: zero).
StatusOr<GradientValues> EmitGradient(OpBuilder& b, const Function& f,
                                      const std::vector<Value>& args,
                                      const std::vector<Value>& result_cotangents,
                                      const GradOptions& options);

// name(args..., ct_0, ..., ct_{n-1}) -> (results..., grads...): the vector-Jacobian product of
// f, one cotangent argument per result of f (ignored for integer results).
StatusOr<Function*> Vjp(Module& module, const Function& f, const GradOptions& options,
                        const std::string& name);
// name(args...) -> (results..., grads...): the gradient of result options.output (a float
// scalar) together with all of f's results.
StatusOr<Function*> ValueAndGrad(Module& module, const Function& f, const GradOptions& options,
                                 const std::string& name);
// name(args...) -> (grads...).
StatusOr<Function*> Grad(Module& module, const Function& f, const GradOptions& options,
                         const std::string& name);

// Removes ops of `fn`'s body whose results are never used (side-effecting ops stay).
void RemoveDeadOps(Function& fn);

}  // namespace tlaloc::autodiff
