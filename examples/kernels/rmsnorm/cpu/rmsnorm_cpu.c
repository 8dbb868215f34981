/* RMSNorm over the last axis for the interpreter (cpu variant), f32, behind Tlaloc's kernel C
 * ABI: operands x [..., H] and weight [H], attribute eps, result y like x. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tlaloc/kernels/kernel_abi.h"

int32_t tlaloc_kernel_abi_version(void) { return TLALOC_KERNEL_ABI_VERSION; }

int32_t tlaloc_rms_norm_f32(const TlalocKernelBuffer* operands, int32_t num_operands,
                            TlalocKernelBuffer* results, int32_t num_results,
                            const TlalocKernelAttr* attrs, int32_t num_attrs, char* error,
                            int32_t error_size) {
  if (num_operands != 2 || num_results != 1) {
    snprintf(error, error_size, "expected (x, weight) -> y");
    return 1;
  }
  const TlalocKernelBuffer* x = &operands[0];
  const TlalocKernelBuffer* w = &operands[1];
  if (x->dtype != TLALOC_KERNEL_F32 || w->dtype != TLALOC_KERNEL_F32 || x->rank < 1 ||
      w->rank != 1 || w->dims[0] != x->dims[x->rank - 1]) {
    snprintf(error, error_size, "expected f32 x [..., H] and f32 weight [H]");
    return 1;
  }
  double eps = -1;
  for (int32_t i = 0; i < num_attrs; ++i)
    if (strcmp(attrs[i].name, "eps") == 0) eps = attrs[i].value;
  if (eps < 0) {
    snprintf(error, error_size, "missing attribute eps");
    return 1;
  }
  const int64_t cols = x->dims[x->rank - 1];
  int64_t rows = 1;
  for (int32_t d = 0; d + 1 < x->rank; ++d) rows *= x->dims[d];
  const float* xs = (const float*)x->data;
  const float* ws = (const float*)w->data;
  float* ys = (float*)results[0].data;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = xs + r * cols;
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; ++c) sum += row[c] * row[c];
    float inv = 1.0f / sqrtf(sum / (float)cols + (float)eps);
    for (int64_t c = 0; c < cols; ++c) ys[r * cols + c] = row[c] * inv * ws[c];
  }
  return 0;
}
