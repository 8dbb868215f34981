// Products with int8 weights in the `q8_0` activation arithmetic (reduction_matmul_q8.cc): each
// row of activations is rounded to int8 per block of 32, with an f16 scale, exactly as llama.cpp
// rounds activations for its Q8_0 x Q8_0 products; each block's product with a weight block is
// an exact int32 sum (AVX512-VNNI `vpdpbusd` where the CPU has it, else AVX2 `vpmaddwd`:
// reduction_matmul_q8_avx2.h), scaled by dx * dw and accumulated in f32. The interpreter runs it
// for the composites tlaloc.int8_linear and tlaloc.ragged_int8_linear in mode "q8_0"
// (nn/int8_linear.h chooses the form; q8_0 is the default); mode "exact" keeps cpu::Int8Matmul
// (reduction_matmul.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "tlaloc/ir/op_registry.h"
#include "tlaloc/support/status.h"

namespace tlaloc::cpu {

// The two arithmetics of an int8 product (the composites' modes).
enum class Int8Activations { kExact, kQ8_0 };

// Rounds x [k] (k a multiple of 32) to int8 per block of 32 as ggml's x86 quantize_row_q8_0
// does: amax = max |x| over the block, d = f16(amax / 127), q = round-half-even(x * (127 / amax))
// (0 where amax is 0). Writes q [k] and d's f16 bits [k / 32].
void QuantizeRowQ8_0(const float* x, int64_t k, int8_t* q, uint16_t* d);

// Int8MatmulQ8_0's automatic choice streams weight rows for up to this many activation rows
// and runs the tiles above.
inline constexpr int64_t kQ8RowStreamMaxRows = 2;

// The kernels Int8MatmulQ8_0 chooses from; tests and benchmarks may name one. Without
// AVX512-VNNI but with AVX2, every choice but kPortable runs the AVX2 kernel, whose bits are
// kPortable's (so also the decomposition's).
enum class Q8Kernel {
  kAuto,       // the faster of the two for m (kRowStream up to two rows, else kTiles)
  kRowStream,  // weight rows streamed in place against up to four activation rows at a time
  kTiles,      // 32-column tiles of w repacked for VNNI, times up to six activation rows
  kPortable,   // the scalar loop (what a CPU without AVX512-VNNI or AVX2 runs)
  // Where the CPU has AVX512-VNNI an in-order row kernel for up to kQ8RowStreamMaxRows rows and
  // kTiles above, else the AVX2 kernel or kPortable: all sum in the order of the
  // tlaloc.int8_linear composite's decomposition (nn/int8_linear.h), so their bits are its bits.
  kInOrder,
};

// c [m, n] = q8_0(x) [m, k] times w [n, k] (s8, f16 `scales` [n, k / 32] per 32-block of a row)
// transposed: c[i][j] = sum over blocks b of float(sum_b q_x * q_w) * (dx_b * dw_b), the
// block sums exact, their scaled sum in f32 in an order of the kernel's choosing (kInOrder: each
// scaled block sum rounded, then added to 0 + ... in block order).
void Int8MatmulQ8_0(const float* x, int64_t m, const int8_t* w, const uint16_t* scales, int64_t n,
                    int64_t k, float* c, EvalContext& ctx, Q8Kernel kernel = Q8Kernel::kAuto);

// Consecutive rows [start, start + rows) of the activations, multiplied by one expert's matrix.
struct Q8RowGroup {
  int64_t expert = 0, start = 0, rows = 0;
};

// For each group: c rows of the group = Int8MatmulQ8_0 of x's rows of the group with expert
// `expert` of the stack w [E, n, k] (scales [E, n, k / 32]) by the kTiles kernel (the AVX2 one
// without VNNI), bit for bit,
// but in one pass over the pool (a task per group and 32-row tile of its expert) with each
// activation row quantised once, instead of a pass per group. c's other rows are untouched.
void Int8MatmulQ8_0Groups(const float* x, int64_t m, const int8_t* w, const uint16_t* scales,
                          int64_t n, int64_t k, std::span<const Q8RowGroup> groups, float* c,
                          EvalContext& ctx);

// Whether the VNNI kernels run on this CPU (AVX-512 on, and AVX512-VNNI present).
bool Q8UsesVnni();

}  // namespace tlaloc::cpu
