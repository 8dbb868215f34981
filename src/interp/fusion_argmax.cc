// The first index of each row's maximum (fusion.h): the composite tlaloc.argmax {axis}
// (builder::Argmax, builder/composite.h) over the last axis of f32 x [..., n], n > 0, with s32
// indices, whose decomposition is
//
//   m = reshape(reduce(x, max from -inf)) ; hit = x == bcast(m) | (x != x & bcast(m != m))
//   first = reduce(select(hit, iota, bcast(n)), min from INT32_MAX)
//
// fifteen ops, ten of them over the whole of x: a greedy decode step's argmax over a 151,936-id
// vocabulary (about a millisecond). One pass per row gives the same result: the row's maximum
// by the reduce's own rule (cpu::FoldRowF32), then the smallest of the init, the first index
// that holds it (NaN matching NaN), and n where any index does not. Other types and axes run the
// decomposition.
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

// The decomposition's constants: the max reduce's init, the index past the row, the min
// reduce's init.
struct ArgmaxConstants {
  float max_init = -std::numeric_limits<float>::infinity();
  int32_t past_end = 0;
  int32_t min_init = std::numeric_limits<int32_t>::max();
};

}  // namespace

std::shared_ptr<const FusedKernel> ArgmaxCompositeKernel(const Operation& op) {
  if (op.num_operands() != 1 || op.num_results() != 1) return nullptr;
  Value x = op.operand(0);
  if (!IsTensorOf(x, ElementType::kF32) || !IsTensorOf(op.result(0), ElementType::kS32))
    return nullptr;
  const TensorType& xt = x.tensor_type();
  const int64_t rank = xt.rank();
  if (rank < 1 || xt.dims.back() <= 0 || xt.dims.back() > std::numeric_limits<int32_t>::max())
    return nullptr;
  const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
  if (!attributes || attributes->kind() != Attribute::Kind::kDict ||
      GetIntAttr(attributes->as_dict(), "axis", -1) != rank - 1)
    return nullptr;
  const std::vector<int64_t> rows(xt.dims.begin(), xt.dims.end() - 1);
  if (op.result(0).tensor_type().dims != rows) return nullptr;
  ArgmaxConstants k;
  k.past_end = static_cast<int32_t>(xt.dims.back());
  return std::make_shared<const FusedKernel>(FusedKernel{
      "fused.argmax", [k](std::span<const Literal> in, Literal& out, EvalContext& ctx) -> Status {
        const Literal& x = in[0];
        const int64_t n = x.dims().back();
        const int64_t rows = n > 0 ? x.num_elements() / n : 0;
        const float* px = x.span<float>().data();
        int32_t* po = out.span<int32_t>().data();
        ctx.ParallelFor(rows, 1, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            const float* row = px + r * n;
            const float m = cpu::FoldRowF32(BinaryKind::kMax, row, n, k.max_init);
            const bool nan = std::isnan(m);
            int64_t first = -1;
            for (int64_t j = 0; j < n && first < 0; ++j)
              if (nan ? std::isnan(row[j]) : row[j] == m) first = j;
            int32_t best = k.min_init;
            if (first >= 0) best = std::min(best, static_cast<int32_t>(first));
            // Any index that misses selects past_end (one always does unless all hit).
            bool all_hit = first == 0;
            for (int64_t j = 0; all_hit && j < n; ++j)
              all_hit = nan ? std::isnan(row[j]) : row[j] == m;
            if (!all_hit) best = std::min(best, k.past_end);
            po[r] = best;
          }
        });
        return OkStatus();
      }});
}

}  // namespace tlaloc::interp
