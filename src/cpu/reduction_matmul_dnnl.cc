// Matrix products through oneDNN: bf16 x bf16 on the CPU's bf16 instructions (AMX tiles or
// AVX512-BF16 dot products), which OpenBLAS 0.3.21 in Debian does not expose, and f32 x f32
// where OpenBLAS loaded kernels older than the CPU (tlaloc/cpu/blas_kernels.h). Products of two
// bf16 values are exact in f32 and oneDNN accumulates in f32, as the f32-widening BLAS path
// does; the one difference is that these instructions treat subnormal bf16 inputs (magnitude
// below 2^-126) as zero and flush subnormal sums, which only matters for values no model
// weight or activation takes. TLALOC_BF16_MATMUL=blas turns this path off.
// TLALOC_F32_MATMUL=dnnl sends every f32 product here too, and =blas none (default: only where
// OpenBLAS's kernels are older than the CPU). It is a switch, not the default, until an idle A/B
// on each CPU kind says which is faster: under load oneDNN took 13-15% less CPU per product of a
// 0.6b prefill on Zen 4, and the sums' order (hence the bits) differs from OpenBLAS's.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>

#include "reduction_matmul.h"
#include "tlaloc/cpu/blas_kernels.h"
#include "tlaloc/support/cpu_features.h"

namespace tlaloc::cpu {

namespace {

bool DnnlBf16Wanted() {
  const char* env = std::getenv("TLALOC_BF16_MATMUL");
  if (env && std::strcmp(env, "blas") == 0) return false;
  // Only where the hardware has bf16 arithmetic; elsewhere oneDNN would emulate it, and the
  // widening BLAS path is as good.
  return HasAvx512Bf16() || HasAmx();
}

bool DnnlF32Wanted() {
  const char* env = std::getenv("TLALOC_F32_MATMUL");
  if (env && std::strcmp(env, "dnnl") == 0) return true;
  if (env && std::strcmp(env, "blas") == 0) return false;
  return !OpenBlasCoreFitsCpu();
}

struct DnnlContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
};

DnnlContext& Context() {
  static DnnlContext* context = [] {
    // TLALOC_VECTOR_MATH=0 keeps oneDNN's own kernels off AVX-512 too; it must be said before
    // oneDNN's first use.
    if (Avx512DisabledByEnvironment()) (void)dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);
    return new DnnlContext;
  }();
  return *context;
}

// oneDNN on libgomp would start its own team of spinning threads on every call; products are
// split over the interpreter's pool instead, each block run on one thread.
void UseOneOmpThreadHere() {
  thread_local bool done = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)done;
}

dnnl::memory::desc Plain(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride,
                         dnnl::memory::data_type type) {
  return dnnl::memory::desc({rows, cols}, type, dnnl::memory::dims{row_stride, col_stride});
}

}  // namespace

bool DnnlBf16Available() {
  static const bool available = DnnlBf16Wanted();
  return available;
}

bool DnnlF32Available() {
  static const bool available = DnnlF32Wanted();
  return available;
}

bool DnnlMatmul(const MatrixView& a, const MatrixView& b, int64_t batch, int64_t m, int64_t k,
                int64_t n, float* c, EvalContext& ctx) {
  if (a.type != b.type) return false;
  using dt = dnnl::memory::data_type;
  dt type;
  if (a.type == ElementType::kBF16 && DnnlBf16Available()) {
    type = dt::bf16;
  } else if (a.type == ElementType::kF32 && DnnlF32Available()) {
    type = dt::f32;
  } else {
    return false;
  }
  const int64_t bytes = a.type == ElementType::kBF16 ? 2 : 4;
  // Blocks of columns of B over the pool; each block is one oneDNN call over all of A's rows, so
  // A is packed once per block and B's block once.
  const int64_t n_block = std::min<int64_t>(n, 512);
  const int64_t n_blocks = (n + n_block - 1) / n_block;
  std::atomic<bool> failed{false};
  std::atomic<int64_t> next{0};
  const int64_t tasks = batch * n_blocks;
  ctx.ParallelFor(tasks, 1, [&](int64_t, int64_t) {
    UseOneOmpThreadHere();
    try {
      dnnl::stream stream(Context().engine);
      for (int64_t task = next.fetch_add(1); task < tasks && !failed; task = next.fetch_add(1)) {
        const int64_t bi = task / n_blocks, j0 = task % n_blocks * n_block;
        const int64_t nb = std::min(n_block, n - j0);
        auto a_desc = Plain(m, k, a.row_stride, a.col_stride, type);
        auto b_desc = Plain(k, nb, b.row_stride, b.col_stride, type);
        auto c_desc = Plain(m, nb, n, 1, dt::f32);
        // oneDNN keeps a cache of built primitives keyed by these descriptors, so the layers'
        // repeated shapes are built once.
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, c_desc),
                                        Context().engine);
        dnnl::matmul product(pd);
        auto* a_ptr = const_cast<std::byte*>(a.data + bytes * bi * a.batch_stride);
        auto* b_ptr =
            const_cast<std::byte*>(b.data + bytes * (bi * b.batch_stride + j0 * b.col_stride));
        dnnl::memory a_mem(a_desc, Context().engine, a_ptr);
        dnnl::memory b_mem(b_desc, Context().engine, b_ptr);
        dnnl::memory c_mem(c_desc, Context().engine, c + bi * m * n + j0);
        product.execute(stream,
                        {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
        stream.wait();
      }
    } catch (const dnnl::error&) {
      failed = true;
    }
  });
  return !failed;
}

}  // namespace tlaloc::cpu
