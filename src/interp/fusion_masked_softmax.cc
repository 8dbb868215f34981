// Attention's probabilities as one kernel (fusion.h): the composite tlaloc.masked_softmax
// {broadcast_dimensions, fill} (builder::MaskedSoftmax, from nn::GroupedAttention) on f32 x and a
// pred mask, whose decomposition is
//
//   m = broadcast_in_dim(mask, broadcast_dimensions) ; y = select(m, x, broadcast(fill))
//   softmax(y) over the last axis (builder::Softmax: max from -inf, x - max, exp, sum from 0,
//   divide)
//
// Each row is masked into the result's row (the select, exact), then softmaxed in place with
// the ops' arithmetic: the [B, Hkv, G, T, S] fill and mask broadcasts and the select's full-size
// result (about 16 MB each per layer of a 512-token prefill) are never written, and each row's
// masked tail (the causal half of a prefill) skips its exponentials where they are exactly +0.
// When the probabilities' only use converts them to bf16 (attention over a bf16 cache), the
// kernel takes the convert too: each row is rounded from a few rows of scratch into the bf16
// result, with the convert's kernel, so the f32 probabilities (16 MB a layer of a 512-token
// prefill) are never written nor read back. Other types and shapes run the decomposition.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/reduction_rows.h"
#include "cpu/vector_math.h"
#include "fusion.h"
#include "ops/reduction_kernels.h"

namespace tlaloc::interp {

namespace {

using ops::BinaryKind;

// builder::Softmax's reduce inits (the max reduce from the lowest f32, the sum from 0).
constexpr float kMaxInit = -std::numeric_limits<float>::infinity();
constexpr float kSumInit = 0.0f;

bool IsTensorOf(Value v, ElementType et) {
  return v.type().is_tensor() && v.tensor_type().element_type == et;
}

// The fused softmax's arithmetic (fusion.cc's SoftmaxRows: each row's max by the reduce's own
// rule, x - max in f32, the exponential op's kernel, the sum sequentially from the init, then
// e / sum; R rows' chains interleaved so their add latencies overlap) in place on R masked
// rows, without the exponentials of each row's masked tail (its elements past the last unmasked
// one, `seen[r]`) where they are exactly 0: when the fill minus the row's maximum is -110 or
// less, exp of it rounds to +0 in f32, so the tail adds +0 to the sum and divides +0 by it.
// Otherwise (a NaN maximum, or a maximum that is the fill itself) the whole row runs.
template <int R>
void MaskedSoftmaxRows(float* x, int64_t n, const int64_t* seen, float fill) {
  float m[R], s[R];
  int64_t live[R], common = n;
  for (int r = 0; r < R; ++r) {
    m[r] = cpu::FoldRowF32(BinaryKind::kMax, x + r * n, n, kMaxInit);
    s[r] = kSumInit;
    live[r] = fill - m[r] <= -110.0f ? seen[r] : n;
    common = std::min(common, live[r]);
  }
  for (int r = 0; r < R; ++r) {
    float* row = x + r * n;
    cpu::vmath::SubtractScalarF32(row, m[r], row, live[r]);
    cpu::vmath::ExpF32(row, row, live[r]);
  }
  for (int64_t j = 0; j < common; ++j)
    for (int r = 0; r < R; ++r) s[r] = s[r] + x[r * n + j];
  for (int r = 0; r < R; ++r) {
    for (int64_t j = common; j < live[r]; ++j) s[r] = s[r] + x[r * n + j];
    if (live[r] < n) s[r] = s[r] + 0.0f;  // the tail's +0s (adding more than one changes nothing)
  }
  for (int r = 0; r < R; ++r) {
    float* row = x + r * n;
    cpu::vmath::DivideByScalarF32(row, s[r], row, live[r]);
    std::fill(row + live[r], row + n, 0.0f / s[r]);  // +0, or NaN where the sum is
  }
}

}  // namespace

std::shared_ptr<const FusedKernel> MaskedSoftmaxCompositeKernel(const Operation& op,
                                                                ElementType out_type) {
  if (op.num_operands() != 2 || op.num_results() != 1) return nullptr;
  Value x = op.operand(0), mask = op.operand(1);
  if (!IsTensorOf(x, ElementType::kF32) || !IsTensorOf(mask, ElementType::kPred) ||
      !(op.result(0).type() == x.type()))
    return nullptr;
  if (out_type != ElementType::kF32 && out_type != ElementType::kBF16) return nullptr;
  const TensorType& xt = x.tensor_type();
  const int64_t rank = xt.rank();
  if (rank < 1 || xt.dims.back() <= 0) return nullptr;
  const int64_t n = xt.dims.back();
  const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
  if (!attributes || attributes->kind() != Attribute::Kind::kDict) return nullptr;
  const Attribute* fill_attr = FindAttr(attributes->as_dict(), "fill");
  if (!fill_attr || fill_attr->kind() != Attribute::Kind::kFloat) return nullptr;
  const float fill = static_cast<float>(fill_attr->as_float());
  const std::vector<int64_t>& md = mask.tensor_type().dims;
  const std::vector<int64_t> bdims = GetIntArrayAttr(attributes->as_dict(), "broadcast_dimensions");
  // The mask's last axis is x's: a row of x reads one row of the mask.
  if (md.empty() || bdims.size() != md.size() || bdims.back() != rank - 1 || md.back() != n)
    return nullptr;
  // Each row's mask offset: the mask's row-major strides along the dimensions it maps, 0 where
  // its size is 1 (repeated).
  std::vector<int64_t> stride_of(rank, 0);
  for (int64_t i = static_cast<int64_t>(md.size()) - 1, st = 1; i >= 0; st *= md[i], --i) {
    if (bdims[i] < 0 || bdims[i] >= rank) return nullptr;
    if (md[i] != 1) {
      if (md[i] != xt.dims[bdims[i]]) return nullptr;
      stride_of[bdims[i]] = st;
    }
  }
  const int64_t rows = xt.num_elements() / n;
  std::vector<int64_t> mask_rows(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, offset = 0;
    for (int64_t dim = rank - 2; dim >= 0; --dim) {
      offset += rest % xt.dims[dim] * stride_of[dim];
      rest /= xt.dims[dim];
    }
    mask_rows[r] = offset;
  }
  const bool to_bf16 = out_type == ElementType::kBF16;
  return std::make_shared<const FusedKernel>(FusedKernel{
      to_bf16 ? "fused.masked_softmax_bf16" : "fused.masked_softmax",
      [mask_rows = std::move(mask_rows), fill, n, to_bf16](
          std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        const int64_t rows = static_cast<int64_t>(mask_rows.size());
        const auto* mask = reinterpret_cast<const uint8_t*>(in[1].data());
        const float* px = in[0].span<float>().data();
        // Rows of about 4,096 elements a chunk: a decode step's 16 rows split over the pool
        // once the cache holds 512 or more slots (30 -> 16 us a layer at 576 on 2 Zen 3 cores).
        ctx.ParallelFor(rows, std::max<int64_t>(1, 4096 / n), [&](int64_t begin, int64_t end) {
          // f32 rows go straight into the result; rows for a bf16 result into eight rows of
          // scratch first, then rounded into it (the convert's own kernel).
          std::vector<float> scratch(to_bf16 ? static_cast<size_t>(8 * n) : 0);
          float* po = to_bf16 ? nullptr : out.span<float>().data();
          auto rows_at = [&](int64_t r) { return to_bf16 ? scratch.data() : po + r * n; };
          auto finish = [&](int64_t r, int count) {
            if (to_bf16)
              cpu::vmath::F32ToBf16(scratch.data(), reinterpret_cast<uint16_t*>(out.data()) + r * n,
                                    count * n);
          };
          // Row r masked into `dst` (which may be px's row: each element is read, then
          // written); returns one past its last unmasked element.
          auto mask_row = [&](int64_t r, float* dst) {
            return cpu::vmath::SelectRowF32(px + r * n, mask + mask_rows[r], fill, dst, n);
          };
          int64_t r = begin;
          int64_t seen[8];
          for (; r + 8 <= end; r += 8) {
            float* dst = rows_at(r);
            for (int q = 0; q < 8; ++q) seen[q] = mask_row(r + q, dst + q * n);
            MaskedSoftmaxRows<8>(dst, n, seen, fill);
            finish(r, 8);
          }
          for (; r < end; ++r) {
            float* dst = rows_at(r);
            seen[0] = mask_row(r, dst);
            MaskedSoftmaxRows<1>(dst, n, seen, fill);
            finish(r, 1);
          }
        });
        return OkStatus();
      }});
}

std::shared_ptr<const FusedKernel> MatchMaskedSoftmaxToBf16(const Block& block,
                                                            const BlockUses& uses, int a,
                                                            std::vector<int>& chain,
                                                            std::vector<Value>& operands) {
  const auto& ops = block.operations();
  const Operation& op = *ops[a];
  if (op.name() != "stablehlo.composite" || op.num_results() != 1 ||
      GetStringAttr(op.attrs(), "name") != "tlaloc.masked_softmax")
    return nullptr;
  const int c = uses.OnlyUser(op.result(0));
  if (c < 0 || ops[c]->name() != "stablehlo.convert" || ops[c]->num_results() != 1 ||
      !IsTensorOf(ops[c]->result(0), ElementType::kBF16))
    return nullptr;
  auto kernel = MaskedSoftmaxCompositeKernel(op, ElementType::kBF16);
  if (!kernel) return nullptr;
  chain = {a, c};
  operands.assign(op.operands().begin(), op.operands().end());
  return kernel;
}

}  // namespace tlaloc::interp
