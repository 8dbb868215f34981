// The program forms of a product with an int8 weight (q s8 [N, K], f16 scales [N, K / 32]):
//
// - kQ8_0 (the default): the composite `tlaloc.int8_linear` {block = 32, mode = "q8_0"}, the
//   arithmetic of llama.cpp's Q8_0 x Q8_0 products written as StableHLO. Its decomposition:
//     xb = reshape(x) [M, K/32, 32] ; amax = reduce max |xb| over the block
//     dx = convert(convert(amax / 127, f16), f32)            (the scale llama.cpp stores)
//     q  = convert(clamp(-127, round_nearest_even(xb * select(amax == 0, 0, 127 / amax)), 127), s8)
//     s  = dot_general(q, reshape(w) [N, K/32, 32], batch {1} x {1}, contracting {2} x {2}) s32
//          [K/32, M, N]                                          (exact block sums)
//     y  = reduce add over blocks, in block order from 0, of convert(s, f32) * (dx * dw)
//   The interpreter runs it as the VNNI q8_0 kernel with the same bits (interp/fusion_int8.cc);
//   XLA runs the decomposition.
// - kExact: the composite `tlaloc.int8_linear` {block, mode = "exact"}, whose decomposition is
//   dot_general(f32 x, DequantizeInt8(q, scale)) (the dequantising chain): every product exact,
//   the sums in f32. The interpreter runs it as cpu::Int8Matmul with the same bits
//   (interp/fusion_int8.cc); XLA runs the decomposition.
#pragma once

#include <optional>
#include <string_view>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/support/status.h"

namespace tlaloc::nn {

enum class Int8Form { kExact, kQ8_0 };

inline constexpr const char* kInt8LinearComposite = "tlaloc.int8_linear";
// The same two forms on a stack of matrices, each row times its group's (nn::SparseMoe's int8
// experts): RaggedInt8LinearQ8_0 / RaggedInt8LinearExact below.
inline constexpr const char* kRaggedInt8LinearComposite = "tlaloc.ragged_int8_linear";

// "exact" or "q8_0"; anything else is an error naming `what` (a flag, a variable) and the values.
StatusOr<Int8Form> ParseInt8Form(std::string_view text, std::string_view what);
std::string_view Int8FormName(Int8Form form);

// The form nn::Linear emits for int8 weights: SetInt8Form's choice if one is set, else the
// environment's TLALOC_INT8_ACTIVATIONS ("exact" or "q8_0", an alias kept from the interpreter
// mode it was), else kQ8_0.
StatusOr<Int8Form> CurrentInt8Form();
// Chooses the form for programs built from now on in this process (nullopt: back to the
// environment / default), for nn::Linear's and nn::SparseMoe's int8 products. The CLI's
// --int8-form sets it.
void SetInt8Form(std::optional<Int8Form> form);

// x f32 [..., K] times q s8 [N, K] with f16 `scale` [N, K / 32], in the q8_0 form: a
// stablehlo.composite whose decomposition (a private function of x's module, one per shape) is
// the chain above. Result f32 [..., N]. Fails (on x's builder) when x's builder has no module.
Tensor Int8LinearQ8_0(const Tensor& x, const Tensor& q, const Tensor& scale);

// x f32 [..., K] times q s8 [N, K] with `scale` [N, K / block] (any float type), in the exact
// form: the composite above (its decomposition a private function of x's module, one per
// shape; the decomposition's ops in place on a builder without a module, or for operands of
// other shapes). Result f32 [..., N].
Tensor Int8LinearExact(const Tensor& x, const Tensor& q, const Tensor& scale);

// x f32 [M, K], its rows grouped consecutively by `group_sizes` (integer [G], as chlo.ragged_dot
// groups them; rows past the last group are zero), each row times its group's matrix of the
// stack q s8 [G, N, K] with f16 `scale` [G, N, K / 32], transposed: f32 [M, N]. The composite
// `tlaloc.ragged_int8_linear` {block = 32, mode = "q8_0"}, whose decomposition gives each row
// tlaloc.int8_linear's q8_0 arithmetic with its group's matrix (one chlo.ragged_dot per block of
// exact integer sums). Fails (on x's builder) unless RaggedInt8Q8_0Takes.
Tensor RaggedInt8LinearQ8_0(const Tensor& x, const Tensor& q, const Tensor& scale,
                            const Tensor& group_sizes);
// Whether RaggedInt8LinearQ8_0 takes these operands (and x's builder has a module).
bool RaggedInt8Q8_0Takes(const Tensor& x, const Tensor& q, const Tensor& scale,
                         const Tensor& group_sizes);

// The same product in the exact form: `tlaloc.ragged_int8_linear` {block, mode = "exact"}, whose
// decomposition is chlo.ragged_dot(x, DequantizeInt8(q, scale), group_sizes) in f32 (the ops in
// place on a builder without a module, or for operands of other shapes).
Tensor RaggedInt8LinearExact(const Tensor& x, const Tensor& q, const Tensor& scale,
                             const Tensor& group_sizes);

}  // namespace tlaloc::nn
