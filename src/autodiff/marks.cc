// Remat regions and stopped gradients, recorded while a program is built.
#include "tlaloc/autodiff/autodiff.h"

namespace tlaloc::autodiff {

RematScope::RematScope(Marks* marks, OpBuilder& b)
    : marks_(marks), b_(b), block_(b.block()), begin_(b.block()->operations().size()) {}

RematScope::~RematScope() {
  if (!marks_ || b_.block() != block_) return;
  std::set<const Operation*> ops;
  const auto& all = block_->operations();
  for (size_t i = begin_; i < all.size(); ++i) ops.insert(all[i].get());
  if (!ops.empty()) marks_->remat_.push_back(std::move(ops));
}

Tensor StopGradient(const Tensor& x, Marks* marks) {
  if (!marks || !x.valid()) return x;
  OpBuilder* b = x.builder();
  Value y = b->CreateOne("stablehlo.optimization_barrier", {x.value()});
  if (!y) return Tensor();
  marks->stopped_.insert(b->last_op());
  return Tensor(y, b);
}

}  // namespace tlaloc::autodiff
