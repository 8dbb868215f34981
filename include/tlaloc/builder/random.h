// JAX-compatible counter-based random numbers: threefry2x32 written as plain StableHLO integer
// ops (add, xor, shifts), so every backend produces the same bits. Keys are u32[2] tensors.
//
// JAX has two ways of turning a key into many numbers. kPartitionable (JAX's default since
// 0.5: jax_threefry_partitionable=True) hashes the 64-bit flat index of each element;
// kOriginal is the older scheme that hashes iota halves pairwise. Both are provided so results
// can be matched against either JAX setting.
#pragma once

#include <cstdint>

#include "tlaloc/builder/tensor.h"

namespace tlaloc {

enum class ThreefryMode { kPartitionable, kOriginal };

// jax.random.PRNGKey(seed): [seed >> 32, seed & 0xffffffff] as u32[2].
Tensor PrngKey(OpBuilder& b, uint64_t seed);
// The threefry2x32 block function on two u32 tensors of one shape: returns (y0, y1).
std::pair<Tensor, Tensor> Threefry2x32Block(const Tensor& key, const Tensor& x0, const Tensor& x1);
// jax.random.split(key, num): u32[num, 2].
Tensor SplitKey(const Tensor& key, int64_t num, ThreefryMode mode = ThreefryMode::kPartitionable);
// The i-th key of SplitKey(key, num) as u32[2].
Tensor SplitKeyAt(const Tensor& keys, int64_t i);
// jax.random.fold_in(key, data) with a u32 scalar tensor `data`.
Tensor FoldIn(const Tensor& key, const Tensor& data);
// jax.random.bits(key, shape) for 32-bit words: u32 of `dims`.
Tensor RandomBits(const Tensor& key, const std::vector<int64_t>& dims,
                  ThreefryMode mode = ThreefryMode::kPartitionable);
// jax.random.uniform for f32 in [minval, maxval). Other float types are drawn in f32 and
// converted (JAX draws 16-bit floats from 16-bit words; results differ from JAX there).
Tensor Uniform(const Tensor& key, const std::vector<int64_t>& dims,
               ElementType et = ElementType::kF32, double minval = 0, double maxval = 1,
               ThreefryMode mode = ThreefryMode::kPartitionable);
// jax.random.normal: sqrt(2) * erf_inv(uniform(nextafter(-1, 0), 1)).
Tensor Normal(const Tensor& key, const std::vector<int64_t>& dims,
              ElementType et = ElementType::kF32, ThreefryMode mode = ThreefryMode::kPartitionable);
// jax.random.gumbel: -log(-log(uniform(tiny, 1))).
Tensor Gumbel(const Tensor& key, const std::vector<int64_t>& dims,
              ElementType et = ElementType::kF32, ThreefryMode mode = ThreefryMode::kPartitionable);
// jax.random.categorical: argmax(gumbel + logits) along `axis`, as s32.
Tensor Categorical(const Tensor& key, const Tensor& logits, int64_t axis = -1,
                   ThreefryMode mode = ThreefryMode::kPartitionable);

// Keys per row, for batches whose rows must each draw what they would draw alone:
// RowFoldIn(keys u32[B, 2], data u32[B]) is FoldIn(keys[r], data[r]) for every row r, and
// RowGumbel(keys, n) -> f32 [B, n] is Gumbel(keys[r], {n}) (partitionable) for every row r.
Tensor RowFoldIn(const Tensor& keys, const Tensor& data);
Tensor RowGumbel(const Tensor& keys, int64_t n);

}  // namespace tlaloc
