#include "tlaloc/builder/random.h"

#include <cmath>
#include <limits>

#include "builder/internal.h"

namespace tlaloc {

using namespace builder_internal;

namespace {

Tensor U32(OpBuilder& b, uint32_t v) {
  return Scalar(b, static_cast<double>(v), ElementType::kU32);
}

Tensor RotateLeft(const Tensor& x, int d) {
  OpBuilder& b = *x.builder();
  return ShiftLeft(x, U32(b, d)) | ShiftRightLogical(x, U32(b, 32 - d));
}

// Element 0 or 1 of a u32[2] key as a scalar.
Tensor KeyWord(const Tensor& key, int i) { return Reshape(SliceAxis(key, 0, i, i + 1), {}); }

// threefry2x32 with the key given as its two words, each broadcastable against the counters
// (scalars for one key, [B, 1] for a key per row).
std::pair<Tensor, Tensor> ThreefryWords(const Tensor& k0, const Tensor& k1, const Tensor& x0_in,
                                        const Tensor& x1_in) {
  OpBuilder& b = *k0.builder();
  Tensor k2 = k0 ^ k1 ^ U32(b, 0x1BD11BDA);
  Tensor ks[3] = {k0, k1, k2};
  static const int kRotations[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  Tensor x0 = x0_in + k0, x1 = x1_in + k1;
  for (int i = 0; i < 5; ++i) {
    for (int r : kRotations[i % 2]) {
      x0 = x0 + x1;
      x1 = RotateLeft(x1, r);
      x1 = x0 ^ x1;
    }
    x0 = x0 + ks[(i + 1) % 3];
    x1 = x1 + ks[(i + 2) % 3] + U32(b, static_cast<uint32_t>(i + 1));
  }
  return {x0, x1};
}

// Uniform f32 in [minval, maxval) from 32 random bits per element (jax.random.uniform's map).
Tensor UniformFromBits(const Tensor& bits, double minval, double maxval) {
  OpBuilder& b = *bits.builder();
  // 23 random mantissa bits under the exponent of 1.0 give [1, 2); subtract 1.
  Tensor mantissa = ShiftRightLogical(bits, U32(b, 32 - 23)) | U32(b, 0x3F800000u);
  Tensor floats = BitcastConvert(mantissa, ElementType::kF32) - 1.0;
  float lo = static_cast<float>(minval), hi = static_cast<float>(maxval);
  Tensor scaled = floats * static_cast<double>(hi - lo) + static_cast<double>(lo);
  return Max(FullLike(scaled, lo), scaled);
}

// The words of each row of a u32 [B, 2] key tensor as [B, 1].
std::pair<Tensor, Tensor> RowKeyWords(const Tensor& keys) {
  return {SliceAxis(keys, 1, 0, 1), SliceAxis(keys, 1, 1, 2)};
}

// Hashes counters (hi, lo) of any shape under `key`; returns both output words.
std::pair<Tensor, Tensor> HashCounters(const Tensor& key, const Tensor& hi, const Tensor& lo) {
  return Threefry2x32Block(key, hi, lo);
}

// JAX's threefry_2x32(key, count) for a 1-D u32 count: split into halves, hash, concatenate.
Tensor ThreefryOriginal(const Tensor& key, const Tensor& count) {
  OpBuilder& b = *key.builder();
  int64_t n = count.dim(0);
  Tensor c = count;
  if (n % 2) c = Concat({c, Zeros(b, {1}, ElementType::kU32)}, 0);
  int64_t half = (n + 1) / 2;
  auto [y0, y1] = HashCounters(key, SliceAxis(c, 0, 0, half), SliceAxis(c, 0, half, 2 * half));
  Tensor out = Concat({y0, y1}, 0);
  return n % 2 ? SliceAxis(out, 0, 0, n) : out;
}

}  // namespace

Tensor PrngKey(OpBuilder& b, uint64_t seed) {
  std::vector<uint32_t> words{static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(seed)};
  return Constant(b, Literal::FromVector<uint32_t>({2}, words));
}

std::pair<Tensor, Tensor> Threefry2x32Block(const Tensor& key, const Tensor& x0_in,
                                            const Tensor& x1_in) {
  OpBuilder* bp = BuilderOf({&key, &x0_in, &x1_in});
  if (!bp || !key.valid() || !x0_in.valid() || !x1_in.valid()) return {};
  return ThreefryWords(KeyWord(key, 0), KeyWord(key, 1), x0_in, x1_in);
}

Tensor SplitKey(const Tensor& key, int64_t num, ThreefryMode mode) {
  if (!key.valid()) return Tensor();
  OpBuilder& b = *key.builder();
  if (mode == ThreefryMode::kOriginal) {
    Tensor bits = ThreefryOriginal(key, Iota(b, {2 * num}, 0, ElementType::kU32));
    return Reshape(bits, {num, 2});
  }
  auto [y0, y1] =
      HashCounters(key, Zeros(b, {num}, ElementType::kU32), Iota(b, {num}, 0, ElementType::kU32));
  return Concat({ExpandDims(y0, 1), ExpandDims(y1, 1)}, 1);
}

Tensor SplitKeyAt(const Tensor& keys, int64_t i) {
  return Reshape(SliceAxis(keys, 0, i, i + 1), {2});
}

Tensor FoldIn(const Tensor& key, const Tensor& data) {
  if (!key.valid() || !data.valid()) return Tensor();
  OpBuilder& b = *key.builder();
  // threefry_2x32(key, threefry_seed(data)) with a 2-element count [0, data].
  Tensor count = Concat({Zeros(b, {1}, ElementType::kU32), Reshape(data, {1})}, 0);
  return ThreefryOriginal(key, count);
}

Tensor RandomBits(const Tensor& key, const std::vector<int64_t>& dims, ThreefryMode mode) {
  if (!key.valid()) return Tensor();
  OpBuilder& b = *key.builder();
  int64_t n = NumElements(dims);
  if (n >= (int64_t{1} << 32)) {
    b.Fail(InvalidArgument("RandomBits: more than 2^32 - 1 elements are not supported"));
    return Tensor();
  }
  if (mode == ThreefryMode::kOriginal)
    return Reshape(ThreefryOriginal(key, Iota(b, {n}, 0, ElementType::kU32)), dims);
  auto [y0, y1] =
      HashCounters(key, Zeros(b, {n}, ElementType::kU32), Iota(b, {n}, 0, ElementType::kU32));
  return Reshape(y0 ^ y1, dims);
}

Tensor Uniform(const Tensor& key, const std::vector<int64_t>& dims, ElementType et, double minval,
               double maxval, ThreefryMode mode) {
  if (!key.valid()) return Tensor();
  OpBuilder& b = *key.builder();
  if (!IsFloat(et)) {
    b.Fail(InvalidArgument("Uniform: element type must be a float type"));
    return Tensor();
  }
  Tensor r = UniformFromBits(RandomBits(key, dims, mode), minval, maxval);
  return Convert(r, et);
}

Tensor Normal(const Tensor& key, const std::vector<int64_t>& dims, ElementType et,
              ThreefryMode mode) {
  double lo = std::nextafter(-1.0f, 0.0f);
  Tensor u = Uniform(key, dims, ElementType::kF32, lo, 1.0, mode);
  return Convert(ErfInv(u) * std::sqrt(2.0), et);
}

Tensor Gumbel(const Tensor& key, const std::vector<int64_t>& dims, ElementType et,
              ThreefryMode mode) {
  Tensor u = Uniform(key, dims, ElementType::kF32, std::numeric_limits<float>::min(), 1.0, mode);
  return Convert(-Log(-Log(u)), et);
}

Tensor Categorical(const Tensor& key, const Tensor& logits, int64_t axis, ThreefryMode mode) {
  if (!logits.valid()) return Tensor();
  Tensor g = Gumbel(key, logits.dims(), logits.element_type(), mode);
  return Argmax(g + logits, axis);
}

Tensor RowFoldIn(const Tensor& keys, const Tensor& data) {
  if (!keys.valid() || !data.valid()) return Tensor();
  OpBuilder& b = *keys.builder();
  if (keys.rank() != 2 || keys.dim(1) != 2 || data.rank() != 1 || data.dim(0) != keys.dim(0)) {
    b.Fail(InvalidArgument("RowFoldIn: keys " + keys.type().ToString() + " and data " +
                           data.type().ToString() + ": expected u32[B, 2] and u32[B]"));
    return Tensor();
  }
  // FoldIn hashes the count [0, data] as one pair: (hi, lo) = (0, data).
  auto [k0, k1] = RowKeyWords(keys);
  Tensor lo = ExpandDims(data, 1);
  auto [y0, y1] = ThreefryWords(k0, k1, FullLike(lo, 0), lo);
  return Concat({y0, y1}, 1);
}

Tensor RowGumbel(const Tensor& keys, int64_t n) {
  if (!keys.valid()) return Tensor();
  OpBuilder& b = *keys.builder();
  // Partitionable bits of element j under row r's key: hash (0, j), then y0 ^ y1.
  auto [k0, k1] = RowKeyWords(keys);
  Tensor j = Iota(b, {1, n}, 1, ElementType::kU32);
  auto [y0, y1] = ThreefryWords(k0, k1, FullLike(j, 0), j);
  Tensor u = UniformFromBits(y0 ^ y1, std::numeric_limits<float>::min(), 1.0);
  return -Log(-Log(u));
}

}  // namespace tlaloc
