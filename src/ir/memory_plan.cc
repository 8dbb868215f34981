#include "tlaloc/ir/memory_plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "tlaloc/ir/attribute.h"
#include "tlaloc/ir/liveness.h"

namespace tlaloc {

namespace {

int64_t TensorBytes(const Type& t) { return t.is_tensor() ? t.tensor.byte_size() : 0; }

// What a block's terminator returns is not a temporary of that block: it is the entry
// function's output, or the result of the op holding the region (counted there), so each buffer
// is counted once.
class TemporaryPeak {
 public:
  explicit TemporaryPeak(const Module& module) : module_(module) {}

  int64_t Peak(const Block& block, int depth = 0) {
    if (depth > kMaxDepth) return 0;  // recursive calls: the interpreter's stack gives out first
    const auto& ops = block.operations();
    std::set<const ValueImpl*> returned;
    if (const Operation* t = block.terminator()) {
      for (const Value& v : t->operands()) returned.insert(v.impl());
    }
    const BlockUses uses(block);
    int64_t live = 0, peak = 0;
    std::multimap<size_t, int64_t> dying;  // op index after which bytes are freed
    for (size_t k = 0; k < ops.size(); ++k) {
      const Operation& op = *ops[k];
      for (const Value& r : op.results()) {
        if (returned.count(r.impl())) continue;
        const int64_t bytes = TensorBytes(r.type());
        live += bytes;
        const int last = uses.LastUse(r);
        dying.emplace(last < 0 ? k : static_cast<size_t>(last), bytes);
      }
      int64_t inner = 0;
      for (const auto& region : op.regions()) {
        for (const auto& b : region->blocks()) inner = std::max(inner, Peak(*b, depth + 1));
      }
      if (op.name() == "func.call" || op.name() == "stablehlo.composite") {
        const char* symbol = op.name() == "func.call" ? "callee" : "decomposition";
        if (const Function* callee = module_.Find(GetStringAttr(op.attrs(), symbol))) {
          inner = std::max(inner, Peak(callee->entry(), depth + 1));
        }
      }
      peak = std::max(peak, live + inner);
      auto [lo, hi] = dying.equal_range(k);
      for (auto it = lo; it != hi; ++it) live -= it->second;
    }
    return peak;
  }

 private:
  static constexpr int kMaxDepth = 64;
  const Module& module_;
};

}  // namespace

int64_t TemporaryPeakBytes(const Module& module, const Function& function) {
  return TemporaryPeak(module).Peak(function.entry());
}

int64_t AliasedArgumentBytes(const Function& function) {
  int64_t bytes = 0;
  const auto& args = function.argument_types();
  const auto& results = function.result_types();
  for (int i = 0; i < function.num_arguments(); ++i) {
    auto it = function.arg_attrs(i).find("tf.aliasing_output");
    if (it == function.arg_attrs(i).end() || it->second.kind() != Attribute::Kind::kInt) continue;
    const int64_t out = it->second.as_int();
    if (out >= 0 && out < static_cast<int64_t>(results.size()) && results[out] == args[i])
      bytes += TensorBytes(args[i]);
  }
  return bytes;
}

int64_t LargestAliasedResultBytes(const Function& function) {
  const Operation* ret = function.entry().terminator();
  if (!ret) return 0;
  std::set<const ValueImpl*> aliased;
  const auto& results = function.result_types();
  for (int i = 0; i < function.num_arguments(); ++i) {
    auto it = function.arg_attrs(i).find("tf.aliasing_output");
    if (it == function.arg_attrs(i).end() || it->second.kind() != Attribute::Kind::kInt) continue;
    const int64_t out = it->second.as_int();
    if (out >= 0 && out < static_cast<int64_t>(results.size()) && out < ret->num_operands())
      aliased.insert(ret->operand(static_cast<int>(out)).impl());
  }
  int64_t largest = 0;
  for (const auto& op : function.entry().operations()) {
    int64_t bytes = 0;
    for (const Value& r : op->results())
      if (aliased.count(r.impl())) bytes += TensorBytes(r.type());
    largest = std::max(largest, bytes);
  }
  return largest;
}

}  // namespace tlaloc
