// The first index of each row's maximum (fusion.h), as builder::Argmax emits it over f32
// x [..., n] with s32 indices:
//
//   m = reshape(reduce(x, max)) ; hit = x == bcast(m) | (x != x & bcast(m != m))
//   first = reduce(select(hit, iota, bcast(past_end)), min)
//
// fifteen ops, ten of them over the whole of x: a greedy decode step's argmax over a 151,936-id
// vocabulary (about a millisecond). One pass per row gives the same result: the row's maximum
// by the reduce's own rule (cpu::FoldRowF32), then the smallest of the init, the first index
// that holds it (NaN matching NaN), and past_end where any index does not.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/reduction_rows.h"
#include "fusion.h"
#include "ops/reduction_kernels.h"

namespace tlaloc::interp {

namespace {

using ops::BinaryKind;

bool IsTensorOf(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

bool IsCompare(const Operation& op, const char* direction) {
  return op.name() == "stablehlo.compare" && op.num_operands() == 2 &&
         GetStringAttr(op.attrs(), "comparison_direction") == direction;
}

// The op index of `v`'s producer, searched back from `before`; -1 when it is not in the block.
int ProducerIndex(const Block& block, Value v, int before) {
  const Operation* p = v.producer();
  const auto& ops = block.operations();
  for (int i = before - 1; p && i >= 0; --i)
    if (ops[i].get() == p) return i;
  return -1;
}

const FusedKernel& ArgmaxKernel() {
  static const FusedKernel* kernel = new FusedKernel{
      "fused.argmax", [](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        const Literal& x = in[0];
        const int64_t n = x.dims().back();
        const int64_t rows = n > 0 ? x.num_elements() / n : 0;
        const float max_init = in[1].span<float>()[0];
        const int32_t past_end = in[2].span<int32_t>()[0], min_init = in[3].span<int32_t>()[0];
        const float* px = x.span<float>().data();
        int32_t* po = out.span<int32_t>().data();
        ctx.ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const float* row = px + r * n;
            const float m = cpu::FoldRowF32(BinaryKind::kMax, row, n, max_init);
            const bool nan = std::isnan(m);
            int64_t first = -1;
            for (int64_t j = 0; j < n && first < 0; ++j)
              if (nan ? std::isnan(row[j]) : row[j] == m) first = j;
            int32_t best = min_init;
            if (first >= 0) best = std::min(best, static_cast<int32_t>(first));
            // Any index that misses selects past_end (one always does unless all hit).
            bool all_hit = first == 0;
            for (int64_t j = 0; all_hit && j < n; ++j)
              all_hit = nan ? std::isnan(row[j]) : row[j] == m;
            if (!all_hit) best = std::min(best, past_end);
            po[r] = best;
          }
        });
        return OkStatus();
      }};
  return *kernel;
}

}  // namespace

bool MatchArgmax(const Block& block, const BlockUses& uses, int a, std::vector<int>& chain,
                 std::vector<Value>& operands, const FusedKernel*& kernel) {
  const auto& ops = block.operations();
  const Operation& max_op = *ops[a];
  if (!IsLastAxisReduce(max_op, BinaryKind::kMax)) return false;
  Value x = max_op.operand(0);
  const TensorType& xt = x.tensor_type();
  if (xt.dims.back() <= 0) return false;  // the builder answers an empty axis without it
  const std::vector<int64_t> kept_one = [&] {
    std::vector<int64_t> d(xt.dims.begin(), xt.dims.end() - 1);
    d.push_back(1);
    return d;
  }();
  chain = {a};
  // m: the max kept as [..., 1].
  int i = uses.OnlyUser(max_op.result(0));
  if (i < 0 || ops[i]->name() != "stablehlo.reshape" ||
      ops[i]->result(0).tensor_type().dims != kept_one)
    return false;
  chain.push_back(i);
  Value m = ops[i]->result(0);
  // m's users: its reshape towards the == broadcast, and m != m (one op, both operands).
  const std::vector<int>& m_users = uses.Users(m);
  if (m_users.size() != 3) return false;
  int spread = -1, m_nan = -1;
  for (int u : m_users) {
    if (ops[u]->name() == "stablehlo.reshape")
      spread = u;
    else if (IsCompare(*ops[u], "NE") && ops[u]->operand(0) == m && ops[u]->operand(1) == m)
      m_nan = u;
  }
  if (spread < 0 || m_nan < 0 || std::count(m_users.begin(), m_users.end(), m_nan) != 2)
    return false;
  chain.push_back(spread);
  const int bm = RowBroadcast(block, uses, ops[spread]->result(0), xt, chain);
  if (bm < 0) return false;
  const int eq = uses.OnlyUser(ops[bm]->result(0));
  if (eq < 0 || !IsCompare(*ops[eq], "EQ") || !(ops[eq]->operand(0) == x) ||
      !(ops[eq]->operand(1) == ops[bm]->result(0)))
    return false;
  chain.push_back(eq);
  // (x != x) & broadcast(m != m): NaN matches a NaN maximum.
  chain.push_back(m_nan);
  const int bnan = RowBroadcast(block, uses, ops[m_nan]->result(0),
                                TensorType(ElementType::kPred, xt.dims), chain);
  if (bnan < 0) return false;
  const int both = uses.OnlyUser(ops[bnan]->result(0));
  if (both < 0 || ops[both]->name() != "stablehlo.and" || ops[both]->num_operands() != 2 ||
      !(ops[both]->operand(1) == ops[bnan]->result(0)))
    return false;
  const int x_nan = ProducerIndex(block, ops[both]->operand(0), both);
  if (x_nan < 0 || !IsCompare(*ops[x_nan], "NE") || !(ops[x_nan]->operand(0) == x) ||
      !(ops[x_nan]->operand(1) == x) || uses.OnlyUser(ops[x_nan]->result(0)) != both)
    return false;
  chain.push_back(x_nan);
  chain.push_back(both);
  const int any = uses.OnlyUser(ops[both]->result(0));
  if (any < 0 || ops[any]->name() != "stablehlo.or" || ops[any]->num_operands() != 2 ||
      !(ops[any]->operand(0) == ops[eq]->result(0)) ||
      !(ops[any]->operand(1) == ops[both]->result(0)) || uses.OnlyUser(ops[eq]->result(0)) != any)
    return false;
  chain.push_back(any);
  // select(hit, iota, broadcast(past_end)), then its row minimum.
  const int sel = uses.OnlyUser(ops[any]->result(0));
  if (sel < 0 || ops[sel]->name() != "stablehlo.select" || ops[sel]->num_operands() != 3 ||
      !(ops[sel]->operand(0) == ops[any]->result(0)) ||
      !IsTensorOf(ops[sel]->result(0), ElementType::kS32))
    return false;
  const int iota = ProducerIndex(block, ops[sel]->operand(1), sel);
  if (iota < 0 || ops[iota]->name() != "stablehlo.iota" ||
      uses.OnlyUser(ops[iota]->result(0)) != sel ||
      GetIntAttr(ops[iota]->attrs(), "iota_dimension", -1) != xt.rank() - 1)
    return false;
  const int past = ProducerIndex(block, ops[sel]->operand(2), sel);
  if (past < 0 || ops[past]->name() != "stablehlo.broadcast_in_dim" ||
      uses.OnlyUser(ops[past]->result(0)) != sel || ops[past]->operand(0).tensor_type().rank() != 0)
    return false;
  chain.push_back(iota);
  chain.push_back(past);
  chain.push_back(sel);
  const int min_op = uses.OnlyUser(ops[sel]->result(0));
  if (min_op < 0 || ops[min_op]->name() != "stablehlo.reduce" || ops[min_op]->num_operands() != 2 ||
      ops[min_op]->num_results() != 1 || !(ops[min_op]->operand(0) == ops[sel]->result(0)) ||
      !IsTensorOf(ops[min_op]->operand(1), ElementType::kS32) ||
      ops[min_op]->operand(1).tensor_type().rank() != 0 ||
      GetIntArrayAttr(ops[min_op]->attrs(), "dimensions") != std::vector<int64_t>{xt.rank() - 1})
    return false;
  auto body = ops::MatchBinaryBody(*ops[min_op]->regions()[0]);
  if (!body || *body != BinaryKind::kMin) return false;
  chain.push_back(min_op);
  operands = {x, max_op.operand(1), ops[past]->operand(0), ops[min_op]->operand(1)};
  kernel = &ArgmaxKernel();
  return true;
}

}  // namespace tlaloc::interp
