// RMSNorm over the last axis on CUDA (f32): one block per row, a shared-memory tree sum of
// squares, then the scaled write. Exposed as an XLA typed-FFI handler `tlaloc_rms_norm_ffi`
// (registered with the CUDA PJRT plugin through PJRT's FFI extension) when XLA's FFI headers
// are on the include path, and always as a plain C launcher for tests.
#include <cuda_runtime.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 256;

__global__ void RmsNormKernel(const float* x, const float* w, float* y, int64_t cols, float eps) {
  __shared__ float partial[kThreads];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += row[c] * row[c];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  const float inv = rsqrtf(partial[0] / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[c] = row[c] * inv * w[c];
}

}  // namespace

extern "C" int tlaloc_rms_norm_cuda_launch(cudaStream_t stream, const float* x, const float* w,
                                           float* y, int64_t rows, int64_t cols, float eps) {
  if (rows <= 0 || cols <= 0) return 0;
  RmsNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, w, y, cols, eps);
  return static_cast<int>(cudaGetLastError());
}

#if __has_include("xla/ffi/api/ffi.h")
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

static ffi::Error RmsNormFfi(cudaStream_t stream, ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> w,
                             ffi::ResultBuffer<ffi::F32> y, float eps) {
  auto dims = x.dimensions();
  if (dims.size() == 0) return ffi::Error::InvalidArgument("RMSNorm: x must have rank >= 1");
  const int64_t cols = dims.back();
  const int64_t rows = static_cast<int64_t>(x.element_count()) / cols;
  int rc = tlaloc_rms_norm_cuda_launch(stream, x.typed_data(), w.typed_data(), y->typed_data(),
                                       rows, cols, eps);
  if (rc != 0) return ffi::Error::Internal(cudaGetErrorString(static_cast<cudaError_t>(rc)));
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(tlaloc_rms_norm_ffi, RmsNormFfi,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<float>("eps"));
#endif
