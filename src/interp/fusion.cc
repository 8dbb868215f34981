#include "fusion.h"

#include <algorithm>
#include <cmath>

#include "cpu/reduction_rows.h"
#include "cpu/vector_math.h"
#include "ops/reduction_kernels.h"

namespace tlaloc::interp {

namespace {

using ops::BinaryKind;

bool IsF32(Value v) {
  return v.type().is_tensor() && v.tensor_type().element_type == ElementType::kF32;
}

// R rows of softmax with the unfused ops' exact arithmetic: each row's max (in any order when
// the row has no NaN) and sum (sequentially from the reduce init: the reduce fast path's
// order), x - max in f32, the
// exponential op's kernel, then e / sum. The R rows' chains are interleaved so their add
// latencies overlap; no row's order of operations changes.
// The row's maximum by the reduce's own rule (cpu::FoldRowF32: AVX-512 where the order of
// comparisons cannot matter, the sequential rule otherwise, NaN payloads and zero signs exact).
float RowMax(const float* x, int64_t n, float init) {
  return cpu::FoldRowF32(BinaryKind::kMax, x, n, init);
}

template <int R>
void SoftmaxRows(const float* x, float* out, int64_t n, float max_init, float sum_init) {
  float m[R], s[R];
  for (int r = 0; r < R; ++r) m[r] = RowMax(x + r * n, n, max_init), s[r] = sum_init;
  for (int r = 0; r < R; ++r) cpu::vmath::SubtractScalarF32(x + r * n, m[r], out + r * n, n);
  cpu::vmath::ExpF32(out, out, R * n);
  for (int64_t j = 0; j < n; ++j)
    for (int r = 0; r < R; ++r) s[r] = s[r] + out[r * n + j];
  for (int r = 0; r < R; ++r) cpu::vmath::DivideByScalarF32(out + r * n, s[r], out + r * n, n);
}

const FusedKernel& SoftmaxKernel() {
  static const FusedKernel* kernel = new FusedKernel{
      "fused.softmax", [](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        const Literal& x = in[0];
        const int64_t n = x.dims().back();
        const int64_t rows = n > 0 ? x.num_elements() / n : 0;
        const float max_init = in[1].span<float>()[0], sum_init = in[2].span<float>()[0];
        const float* px = x.span<float>().data();
        float* po = out.span<float>().data();
        ctx.ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
                        [&](int64_t begin, int64_t end) {
                          int64_t r = begin;
                          for (; r + 8 <= end; r += 8)
                            SoftmaxRows<8>(px + r * n, po + r * n, n, max_init, sum_init);
                          for (; r < end; ++r)
                            SoftmaxRows<1>(px + r * n, po + r * n, n, max_init, sum_init);
                        });
        return OkStatus();
      }};
  return *kernel;
}

// Matches the softmax chain starting at the max reduce `a`; on success fills `chain` (every op
// of it, the divide last) and `operands` (x, the max init, the sum init).
bool MatchSoftmax(const Block& block, const BlockUses& uses, int a, std::vector<int>& chain,
                  std::vector<Value>& operands) {
  const auto& ops = block.operations();
  const Operation& max_op = *ops[a];
  if (!IsLastAxisReduce(max_op, BinaryKind::kMax)) return false;
  Value x = max_op.operand(0);
  const TensorType& xt = x.tensor_type();
  chain = {a};
  const int bmax = RowBroadcast(block, uses, max_op.result(0), xt, chain);
  if (bmax < 0) return false;
  const int sub = uses.OnlyUser(ops[bmax]->result(0));
  if (sub < 0 || ops[sub]->name() != "stablehlo.subtract" || !(ops[sub]->operand(0) == x) ||
      !(ops[sub]->operand(1) == ops[bmax]->result(0)))
    return false;
  chain.push_back(sub);
  const int exp = uses.OnlyUser(ops[sub]->result(0));
  if (exp < 0 || ops[exp]->name() != "stablehlo.exponential") return false;
  chain.push_back(exp);
  Value e = ops[exp]->result(0);
  const std::vector<int>& e_users = uses.Users(e);
  if (e_users.size() != 2) return false;
  const int sum = std::min(e_users[0], e_users[1]), div = std::max(e_users[0], e_users[1]);
  if (!IsLastAxisReduce(*ops[sum], BinaryKind::kAdd) || !(ops[sum]->operand(0) == e)) return false;
  chain.push_back(sum);
  const int bsum = RowBroadcast(block, uses, ops[sum]->result(0), xt, chain);
  if (bsum < 0 || uses.OnlyUser(ops[bsum]->result(0)) != div) return false;
  if (ops[div]->name() != "stablehlo.divide" || !(ops[div]->operand(0) == e) ||
      !(ops[div]->operand(1) == ops[bsum]->result(0)) || !(ops[div]->result(0).tensor_type() == xt))
    return false;
  chain.push_back(div);
  operands = {x, max_op.operand(1), ops[sum]->operand(1)};
  return true;
}

}  // namespace

bool IsLastAxisReduce(const Operation& op, BinaryKind kind) {
  if (op.name() != "stablehlo.reduce" || op.num_operands() != 2 || op.num_results() != 1 ||
      op.regions().size() != 1)
    return false;
  Value x = op.operand(0);
  if (!IsF32(x) || !IsF32(op.operand(1)) || !IsF32(op.result(0))) return false;
  const int64_t rank = x.tensor_type().rank();
  if (rank < 1 || op.operand(1).tensor_type().rank() != 0) return false;
  if (GetIntArrayAttr(op.attrs(), "dimensions") != std::vector<int64_t>{rank - 1}) return false;
  auto body = ops::MatchBinaryBody(*op.regions()[0]);
  return body && *body == kind;
}

int RowBroadcast(const Block& block, const BlockUses& uses, Value r, const TensorType& x,
                 std::vector<int>& chain) {
  const auto& ops = block.operations();
  const int64_t rank = x.rank();
  const std::vector<int64_t> kept(x.dims.begin(), x.dims.end() - 1);
  std::vector<int64_t> kept_one = kept;
  kept_one.push_back(1);
  int i = uses.OnlyUser(r);
  while (i >= 0 && ops[i]->name() == "stablehlo.reshape") {
    const auto& dims = ops[i]->result(0).tensor_type().dims;
    if (dims != kept && dims != kept_one) return -1;
    chain.push_back(i);
    r = ops[i]->result(0);
    i = uses.OnlyUser(r);
  }
  if (i < 0 || ops[i]->name() != "stablehlo.broadcast_in_dim") return -1;
  // The broadcast's operand is [...] (dims 0..rank-2) or [..., 1] (dims 0..rank-1).
  const bool with_one = r.tensor_type().dims == kept_one && kept_one != kept;
  std::vector<int64_t> expected(with_one ? rank : rank - 1);
  for (size_t d = 0; d < expected.size(); ++d) expected[d] = static_cast<int64_t>(d);
  if (r.tensor_type().dims != (with_one ? kept_one : kept)) return -1;
  if (GetIntArrayAttr(ops[i]->attrs(), "broadcast_dimensions") != expected) return -1;
  if (!(ops[i]->result(0).tensor_type() == x)) return -1;
  chain.push_back(i);
  return i;
}

// Makes the op plans of `chain` run `kernel` on `operands` at the chain's last op.
void ReplaceChain(const std::vector<int>& chain, const std::vector<Value>& operands,
                  const FusedKernel* kernel, BlockPlan& plan,
                  const std::function<int(const ValueImpl*)>& slot_of) {
  // The chain's last op (softmax's divide, the int8 product's dot_general, the broadcast's
  // user): every operand is defined before it.
  const int last = *std::max_element(chain.begin(), chain.end());
  OpPlan& fused = plan.ops[last];
  std::vector<int> release;
  for (int i : chain) {
    release.insert(release.end(), plan.ops[i].release_after.begin(),
                   plan.ops[i].release_after.end());
    if (i != last) {
      plan.ops[i].skip = true;
      plan.ops[i].release_after.clear();
    }
  }
  // An operand whose last reader lies between the chain's first and last op (outside the
  // chain) would be released before the kernel runs: it dies at the kernel instead.
  std::vector<int> operand_slots;
  for (Value v : operands) operand_slots.push_back(slot_of(v.impl()));
  const int first = *std::min_element(chain.begin(), chain.end());
  for (int k = first + 1; k < last; ++k) {
    auto& early = plan.ops[k].release_after;
    for (int s : operand_slots)
      if (auto it = std::find(early.begin(), early.end(), s); it != early.end()) {
        early.erase(it);
        release.push_back(s);
      }
  }
  std::sort(release.begin(), release.end());
  release.erase(std::unique(release.begin(), release.end()), release.end());
  fused.release_after = std::move(release);
  fused.operand_slots = std::move(operand_slots);
  fused.fused = kernel;
}

void FuseChains(const Block& block, const BlockUses& uses, BlockPlan& plan,
                const std::function<int(const ValueImpl*)>& slot_of) {
  const auto& ops = block.operations();
  auto free = [&](const std::vector<int>& chain) {
    for (int i : chain)
      if (plan.ops[i].skip || plan.ops[i].fused) return false;
    return true;
  };
  for (size_t a = 0; a < ops.size(); ++a) {
    if (plan.ops[a].skip || plan.ops[a].fused) continue;
    std::vector<int> chain;
    std::vector<Value> operands;
    const int i = static_cast<int>(a);
    if (auto to_bf16 = MatchMaskedSoftmaxToBf16(block, uses, i, chain, operands);
        to_bf16 && free(chain)) {
      plan.kernels.push_back(to_bf16);
      ReplaceChain(chain, operands, to_bf16.get(), plan, slot_of);
      continue;
    }
    chain.clear();
    operands.clear();
    if (auto composite = CompositeKernel(block, i, chain, operands); composite) {
      plan.kernels.push_back(composite);
      ReplaceChain(chain, operands, composite.get(), plan, slot_of);
      continue;
    }
    if (!MatchSoftmax(block, uses, i, chain, operands)) continue;
    if (!free(chain)) continue;
    ReplaceChain(chain, operands, &SoftmaxKernel(), plan, slot_of);
  }
  FuseElementwiseTrees(block, uses, plan, slot_of);  // fusion_train_elementwise.cc
  // Second: what the chains above left, so a broadcast inside one of them stays theirs.
  for (size_t a = 0; a < ops.size(); ++a) {
    if (plan.ops[a].skip || plan.ops[a].fused) continue;
    std::vector<int> chain;
    std::vector<Value> operands;
    auto kernel = MatchBroadcastBinary(block, uses, static_cast<int>(a), chain, operands);
    if (!kernel || !free(chain)) continue;
    plan.kernels.push_back(kernel);
    ReplaceChain(chain, operands, kernel.get(), plan, slot_of);
  }
}

}  // namespace tlaloc::interp
