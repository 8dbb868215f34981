// int8 grouped products for the MoE experts (see ragged_dot_int8.h).
#include "ragged_dot_int8.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "reduction_matmul.h"
#include "reduction_matmul_q8.h"

namespace tlaloc::ops {

Status RaggedDotInt8(const Literal& x, const Literal& w, const Literal& scales,
                     const Literal& group_sizes, Literal& c, EvalContext& ctx) {
  const int64_t m = x.dims()[0], k = x.dims()[1];
  const int64_t groups = w.dims()[0], n = w.dims()[1];
  const int64_t blocks = scales.dims()[2];
  float* out = c.span<float>().data();
  std::fill(out, out + m * n, 0.0f);  // rows in no group stay zero
  TL_ASSIGN_OR_RETURN(Int8Activations mode, Int8ActivationsMode());
  const float* xs = x.span<float>().data();
  const int8_t* ws = w.span<int8_t>().data();
  const uint16_t* ss = scales.span<uint16_t>().data();
  int64_t start = 0;
  for (int64_t g = 0; g < std::min(groups, group_sizes.num_elements()); ++g) {
    const int64_t size = group_sizes.GetAsInt64(g);
    if (size < 0)
      return InvalidArgument("chlo.ragged_dot (int8 experts): group_sizes[" + std::to_string(g) +
                             "] = " + std::to_string(size) + " is negative");
    const int64_t begin = std::min(start, m), rows = std::min(start + size, m) - begin;
    start = std::min(start + size, m);
    if (rows == 0 || n == 0 || k == 0) continue;
    const int8_t* wg = ws + g * n * k;
    const uint16_t* sg = ss + g * n * blocks;
    if (mode == Int8Activations::kQ8_0)
      Int8MatmulQ8_0(xs + begin * k, rows, wg, sg, n, k, out + begin * n, ctx);
    else
      Int8Matmul(xs + begin * k, rows, wg, sg, n, k, out + begin * n, ctx);
  }
  return OkStatus();
}

}  // namespace tlaloc::ops
