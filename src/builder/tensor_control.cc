// Control flow in the builder: a two-way conditional as stablehlo.if, its branches written as
// ordinary builder code.
#include "builder/internal.h"

namespace tlaloc {

using namespace builder_internal;

std::vector<Tensor> Cond(const Tensor& pred, const std::function<std::vector<Tensor>()>& then_fn,
                         const std::function<std::vector<Tensor>()>& else_fn) {
  OpBuilder* b = pred.builder();
  if (!b || !pred.valid()) return {};
  Block* outer = b->block();
  std::vector<std::unique_ptr<Region>> regions;
  std::vector<Type> result_types;
  for (const auto* fn : {&then_fn, &else_fn}) {
    auto region = std::make_unique<Region>();
    // The branch's ops go into its own block: every Tensor built by `fn` uses this builder, so
    // pointing it at the block is enough; values of the enclosing function are captured.
    b->set_block(&region->AddBlock());
    std::vector<Tensor> results = (*fn)();
    std::vector<Value> values;
    std::vector<Type> types;
    for (const Tensor& t : results) {
      values.push_back(t.value());
      types.push_back(Type(t.type()));
    }
    if (b->ok()) b->Create("stablehlo.return", values);
    b->set_block(outer);
    if (fn == &then_fn) {
      result_types = types;
    } else if (b->ok() && types != result_types) {
      b->Fail(InvalidArgument("Cond: the two branches return different types"));
    }
    regions.push_back(std::move(region));
  }
  if (!b->ok()) return {};
  std::vector<Value> out =
      b->Create("stablehlo.if", {pred.value()}, {}, result_types, std::move(regions));
  std::vector<Tensor> tensors;
  for (Value v : out) tensors.push_back(Wrap(b, v));
  return tensors;
}

}  // namespace tlaloc
