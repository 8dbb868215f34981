#include "bulk_math.h"

#include <atomic>

#include "tlaloc/support/half.h"

namespace tlaloc::ops::vmath {

namespace {

template <double (*F)(double)>
void ScalarLoop(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(F(static_cast<double>(in[i])));
}

constexpr BulkKernels kScalarKernels{ExpF32Scalar, LogisticF32Scalar, RsqrtF32Scalar,
                                     Bf16ToF32Scalar, F32ToBf16Scalar};

// Written once at start-up by the CPU layer, read by every evaluation (on any thread).
std::atomic<const BulkKernels*> installed{&kScalarKernels};

}  // namespace

void ExpF32Scalar(const float* in, float* out, int64_t n) { ScalarLoop<Exp>(in, out, n); }
void LogisticF32Scalar(const float* in, float* out, int64_t n) { ScalarLoop<Logistic>(in, out, n); }
void RsqrtF32Scalar(const float* in, float* out, int64_t n) { ScalarLoop<Rsqrt>(in, out, n); }

void Bf16ToF32Scalar(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = Bf16BitsToFloat(in[i]);
}

void F32ToBf16Scalar(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16Bits(in[i]);
}

const BulkKernels& Bulk() { return *installed.load(std::memory_order_acquire); }

void InstallBulkKernels(const BulkKernels* kernels) {
  installed.store(kernels, std::memory_order_release);
}

}  // namespace tlaloc::ops::vmath
