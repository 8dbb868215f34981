// The composite tlaloc.linear_cross_entropy (train/loss.h, fusion_composite.cc's table) as one
// kernel: the LM head's products and the cross-entropy with its gradients, chunk by chunk, with
// no [tokens, vocab] tensor. It replaces the chain matchers that recognised the cross-entropy's
// row chains (row max subtracted, sum of exponentials) in the decomposition as train::CrossEntropy
// emitted it: the loss emits the composite, so nothing is recognised any more.
#include <cblas.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/vector_math.h"
#include "fusion.h"
#include "tlaloc/support/cpu_features.h"
#include "tlaloc/support/half.h"

namespace tlaloc::interp {

namespace {

// ---- tlaloc.linear_cross_entropy (train/loss.h) ---------------------------------------------
//
// The LM head and its cross-entropy over hidden x [N, H], head W [V, H] (both f32 or both bf16)
// and labels y [N], a block of R rows at a time (R: the composite's chunk), the vocabulary in
// blocks of kVocabBlock columns, each a one-thread sgemm whose [R, kVocabBlock] tile is used
// while it is in cache:
//   1. logits tile = x_R W_j^T into the row block's [R, V] buffer; the label's logit is kept,
//      and the tile becomes exp(logit - the tile row's max), with each row's max and sum kept
//      (merged after: no second pass for the max, no second exponential);
//   2. lse = max + log(sum) per row; the loss adds lse - logit[label] on counted rows;
//   3. with the gradients: each tile's softmax - onehot (exp * exp(tile max - lse); 0 on
//      ignored rows) in a buffer that stays in cache, then dW_j += g^T x_R and dx_R += g W_j:
//      the backward pass never recomputes the logits, and at most R rows of them exist at once.
// dx_R is summed over kGroups fixed groups of vocabulary blocks, each group's blocks in order,
// then the groups in order, so the bits do not depend on the thread count. bf16 operands are
// widened per block (their products are exact in f32); the logits, g, each row block's dW part
// and dx are rounded to bf16 where the decomposition's bf16 values are. The results differ from
// the decomposition's by rounding only (sums in another order; tests/train/loss_test.cc bounds
// it).

constexpr int64_t kVocabBlock = 256, kGroups = 16;

struct LinearXentShape {
  int64_t n = 0, h = 0, v = 0, rows = 0;  // rows: R
  int32_t ignore = 0;
  bool gradients = false;
  bool bf16 = false;
};

void UseOneBlasThread() {
  static const bool once = [] {
    openblas_set_num_threads(1);  // the pool's threads run the blocks; OpenBLAS's would compete
    return true;
  }();
  (void)once;
}

float RoundToBf16(float f) { return Bf16BitsToFloat(FloatToBf16Bits(f)); }

// Rows [first, first + count) of a [*, h] f32 or bf16 tensor as f32: in place, or widened
// into `scratch`.
const float* F32Rows(const Literal& l, bool bf16, int64_t first, int64_t count, int64_t h,
                     std::vector<float>& scratch) {
  if (!bf16) return l.span<float>().data() + first * h;
  scratch.resize(count * h);
  cpu::vmath::Bf16ToF32(reinterpret_cast<const uint16_t*>(l.data()) + first * h, scratch.data(),
                        count * h);
  return scratch.data();
}

// Replaces the `n` values of x by exp(x - max) and returns their max and sum. Sixteen partial
// maxima and sums (then folded in order) let the adds overlap; the order is fixed, so are the
// bits, with or without AVX-512 (one vector of 16 lanes, or 16 scalars).
constexpr int kLanes = 16;

float FoldMax(const float* lanes, float m) {
  for (int i = 0; i < kLanes; ++i) m = std::max(m, lanes[i]);
  return m;
}
float FoldSum(const float* lanes) {
  float s = 0;
  for (int i = 0; i < kLanes; ++i) s += lanes[i];
  return s;
}

#if defined(__x86_64__)
#define TLALOC_XENT_AVX512 __attribute__((target("avx512f")))
TLALOC_XENT_AVX512 void ExpInPlaceAvx512(float* x, int64_t n, float& max, float& sum) {
  float lanes[kLanes];
  float m = x[0];
  int64_t k = 0;
  if (n >= kLanes) {
    __m512 acc = _mm512_loadu_ps(x);
    for (k = kLanes; k + kLanes <= n;
         k += kLanes)  // (the unmasked max trips -Wmaybe-uninitialized)
      acc = _mm512_mask_max_ps(acc, 0xFFFF, acc, _mm512_loadu_ps(x + k));
    _mm512_storeu_ps(lanes, acc);
    m = FoldMax(lanes, m);
  }
  for (; k < n; ++k) m = std::max(m, x[k]);
  const __m512 vm = _mm512_set1_ps(m);
  for (k = 0; k + kLanes <= n; k += kLanes)
    _mm512_storeu_ps(x + k, _mm512_sub_ps(_mm512_loadu_ps(x + k), vm));
  for (; k < n; ++k) x[k] -= m;
  cpu::vmath::ExpF32(x, x, n);
  __m512 acc = _mm512_setzero_ps();
  for (k = 0; k + kLanes <= n; k += kLanes) acc = _mm512_add_ps(acc, _mm512_loadu_ps(x + k));
  _mm512_storeu_ps(lanes, acc);
  float s = FoldSum(lanes);
  for (; k < n; ++k) s += x[k];
  max = m;
  sum = s;
}

TLALOC_XENT_AVX512 void ScaleAvx512(const float* e, float scale, float* out, int64_t n) {
  const __m512 vs = _mm512_set1_ps(scale);
  int64_t k = 0;
  for (; k + kLanes <= n; k += kLanes)
    _mm512_storeu_ps(out + k, _mm512_mul_ps(_mm512_loadu_ps(e + k), vs));
  for (; k < n; ++k) out[k] = e[k] * scale;
}
#endif

void ExpInPlace(float* x, int64_t n, float& max, float& sum) {
#if defined(__x86_64__)
  if (HasAvx512Core()) return ExpInPlaceAvx512(x, n, max, sum);
#endif
  float lanes[kLanes];
  float m = x[0];
  int64_t k = 0;
  if (n >= kLanes) {
    for (int i = 0; i < kLanes; ++i) lanes[i] = x[i];
    for (k = kLanes; k + kLanes <= n; k += kLanes)
      for (int i = 0; i < kLanes; ++i) lanes[i] = std::max(lanes[i], x[k + i]);
    m = FoldMax(lanes, m);
  }
  for (; k < n; ++k) m = std::max(m, x[k]);
  for (k = 0; k < n; ++k) x[k] -= m;
  cpu::vmath::ExpF32(x, x, n);
  for (int i = 0; i < kLanes; ++i) lanes[i] = 0;
  for (k = 0; k + kLanes <= n; k += kLanes)
    for (int i = 0; i < kLanes; ++i) lanes[i] += x[k + i];
  float s = FoldSum(lanes);
  for (; k < n; ++k) s += x[k];
  max = m;
  sum = s;
}

// out = e * scale.
void Scale(const float* e, float scale, float* out, int64_t n) {
#if defined(__x86_64__)
  if (HasAvx512Core()) return ScaleAvx512(e, scale, out, n);
#endif
  for (int64_t k = 0; k < n; ++k) out[k] = e[k] * scale;
}

int Int(int64_t v) { return static_cast<int>(v); }

Status LinearXent(const LinearXentShape& sh, std::span<const Literal> in, std::span<Literal> out,
                  EvalContext& ctx) {
  UseOneBlasThread();
  const int64_t n = sh.n, h = sh.h, v = sh.v;
  const int32_t* y = in[2].span<int32_t>().data();
  const int64_t blocks = (v + kVocabBlock - 1) / kVocabBlock;
  const int64_t groups = std::min(kGroups, blocks);
  const int64_t rows_max = std::min(sh.rows, n);
  // A row block's exponentials: [R, V], each tile's over its own row maxima.
  Literal buffer = Literal::Uninitialized(TensorType(ElementType::kF32, {rows_max, v}));
  float* exps = buffer.span<float>().data();
  std::vector<float> block_max(blocks * rows_max), block_sum(blocks * rows_max);
  std::vector<float> lse(rows_max), picked(rows_max), x_scratch;
  // The label's column as gather picks it (clamped into the row).
  auto Column = [v](int32_t label) { return std::clamp<int64_t>(label, 0, v - 1); };
  std::vector<float> partial(sh.gradients ? groups * rows_max * h : 0);
  double loss = 0, count = 0;
  for (int64_t r0 = 0; r0 < n; r0 += rows_max) {
    const int64_t rows = std::min(rows_max, n - r0);
    const float* xr = F32Rows(in[0], sh.bf16, r0, rows, h, x_scratch);
    // 1. Logits tiles; each row's label logit, then the tile's exponentials over its row
    // maxima, their sums.
    ctx.ParallelFor(blocks, 1, [&](int64_t begin, int64_t end) {
      std::vector<float> w_scratch;
      for (int64_t j = begin; j < end; ++j) {
        const int64_t j0 = j * kVocabBlock, nb = std::min(kVocabBlock, v - j0);
        const float* wj = F32Rows(in[1], sh.bf16, j0, nb, h, w_scratch);
        float* tile = exps + j0;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Int(rows), Int(nb), Int(h), 1.0f, xr,
                    Int(h), wj, Int(h), 0.0f, tile, Int(v));
        for (int64_t r = 0; r < rows; ++r) {
          float* row = tile + r * v;
          if (sh.bf16)  // the decomposition's logits are bf16
            for (int64_t k = 0; k < nb; ++k) row[k] = RoundToBf16(row[k]);
          const int64_t column = Column(y[r0 + r]) - j0;
          if (column >= 0 && column < nb) picked[r] = row[column];  // one tile has it
          ExpInPlace(row, nb, block_max[j * rows_max + r], block_sum[j * rows_max + r]);
        }
      }
    });
    // 2. Each row's log-sum-exp over the tiles, in block order; the loss.
    for (int64_t r = 0; r < rows; ++r) {
      float m = block_max[r];
      for (int64_t j = 1; j < blocks; ++j) m = std::max(m, block_max[j * rows_max + r]);
      float s = 0;
      for (int64_t j = 0; j < blocks; ++j)
        s += block_sum[j * rows_max + r] * std::exp(block_max[j * rows_max + r] - m);
      lse[r] = m + std::log(s);
      if (y[r0 + r] == sh.ignore) continue;
      loss += static_cast<double>(lse[r] - picked[r]);
      count += 1;
    }
    if (!sh.gradients) continue;
    // 3. softmax - onehot per tile, then both products, per group of blocks.
    std::fill(partial.begin(), partial.end(), 0.0f);
    ctx.ParallelFor(groups, 1, [&](int64_t g_begin, int64_t g_end) {
      std::vector<float> grad(rows * kVocabBlock), w_scratch, dw_part;
      for (int64_t g = g_begin; g < g_end; ++g) {
        float* acc = partial.data() + g * rows_max * h;
        for (int64_t j = blocks * g / groups; j < blocks * (g + 1) / groups; ++j) {
          const int64_t j0 = j * kVocabBlock, nb = std::min(kVocabBlock, v - j0);
          for (int64_t r = 0; r < rows; ++r) {
            const float* e = exps + r * v + j0;
            float* row = grad.data() + r * nb;
            if (y[r0 + r] == sh.ignore) {
              std::fill(row, row + nb, 0.0f);
              continue;
            }
            // softmax = exp(x - max_j) * exp(max_j - lse)
            const float scale = std::exp(block_max[j * rows_max + r] - lse[r]);
            Scale(e, scale, row, nb);
            const int64_t column = Column(y[r0 + r]) - j0;
            if (column >= 0 && column < nb) row[column] -= 1.0f;
            if (sh.bf16)
              for (int64_t k = 0; k < nb; ++k) row[k] = RoundToBf16(row[k]);
          }
          const float* wj = F32Rows(in[1], sh.bf16, j0, nb, h, w_scratch);
          if (!sh.bf16) {
            float* dw = out[3].span<float>().data() + j0 * h;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int(nb), Int(h), Int(rows), 1.0f,
                        grad.data(), Int(nb), xr, Int(h), r0 == 0 ? 0.0f : 1.0f, dw, Int(h));
          } else {  // this row block's part rounded, then added in bf16, as the chunks add
            dw_part.resize(nb * h);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Int(nb), Int(h), Int(rows), 1.0f,
                        grad.data(), Int(nb), xr, Int(h), 0.0f, dw_part.data(), Int(h));
            auto* dw = reinterpret_cast<uint16_t*>(out[3].data()) + j0 * h;
            for (int64_t i = 0; i < nb * h; ++i) {
              const float part = RoundToBf16(dw_part[i]);
              dw[i] = FloatToBf16Bits(r0 == 0 ? part : Bf16BitsToFloat(dw[i]) + part);
            }
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Int(rows), Int(h), Int(nb), 1.0f,
                      grad.data(), Int(nb), wj, Int(h), 1.0f, acc, Int(h));
        }
      }
    });
    for (int64_t i = 0; i < rows * h; ++i) {
      float s = 0;
      for (int64_t g = 0; g < groups; ++g) s += partial[g * rows_max * h + i];
      if (sh.bf16)
        reinterpret_cast<uint16_t*>(out[2].data())[r0 * h + i] = FloatToBf16Bits(s);
      else
        out[2].span<float>()[r0 * h + i] = s;
    }
  }
  out[0].span<float>()[0] = static_cast<float>(loss);
  out[1].span<float>()[0] = static_cast<float>(count);
  return OkStatus();
}

}  // namespace

std::shared_ptr<const FusedKernel> LinearCrossEntropyCompositeKernel(const Operation& op) {
  if (op.num_operands() != 3 || (op.num_results() != 2 && op.num_results() != 4)) return nullptr;
  Value x = op.operand(0), w = op.operand(1), y = op.operand(2);
  if (!x.type().is_tensor() || !w.type().is_tensor() || !y.type().is_tensor()) return nullptr;
  const TensorType &xt = x.tensor_type(), &wt = w.tensor_type();
  const bool bf16 = xt.element_type == ElementType::kBF16;
  if ((!bf16 && xt.element_type != ElementType::kF32) || wt.element_type != xt.element_type ||
      y.tensor_type().element_type != ElementType::kS32)
    return nullptr;
  if (xt.rank() != 2 || wt.rank() != 2 || xt.dims[1] != wt.dims[1] ||
      y.tensor_type().dims != std::vector<int64_t>{xt.dims[0]} || xt.dims[0] <= 0 ||
      wt.dims[0] <= 0 || xt.dims[1] <= 0)
    return nullptr;
  const Type scalar(TensorType(ElementType::kF32, {}));
  if (!(op.result(0).type() == scalar) || !(op.result(1).type() == scalar)) return nullptr;
  if (op.num_results() == 4 &&
      (!(op.result(2).type() == x.type()) || !(op.result(3).type() == w.type())))
    return nullptr;
  const Attribute* attributes = FindAttr(op.attrs(), "composite_attributes");
  if (!attributes || attributes->kind() != Attribute::Kind::kDict) return nullptr;
  const Attribute* chunk = FindAttr(attributes->as_dict(), "chunk");
  const Attribute* ignore = FindAttr(attributes->as_dict(), "ignore_index");
  if (!chunk || chunk->kind() != Attribute::Kind::kInt || !ignore ||
      ignore->kind() != Attribute::Kind::kInt)
    return nullptr;
  LinearXentShape sh;
  sh.n = xt.dims[0];
  sh.h = xt.dims[1];
  sh.v = wt.dims[0];
  sh.rows = chunk->as_int() > 0 ? std::min<int64_t>(chunk->as_int(), sh.n) : sh.n;
  sh.ignore = static_cast<int32_t>(ignore->as_int());
  sh.gradients = op.num_results() == 4;
  sh.bf16 = bf16;
  FusedKernel kernel;
  kernel.name = "fused.linear_cross_entropy";
  kernel.eval_results = [sh](std::span<const Literal> in, std::span<Literal> out,
                             EvalContext& ctx) { return LinearXent(sh, in, out, ctx); };
  return std::make_shared<const FusedKernel>(std::move(kernel));
}

}  // namespace tlaloc::interp
