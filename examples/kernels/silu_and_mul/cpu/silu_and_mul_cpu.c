/* silu(gate) * up for the interpreter (cpu variant), f32, behind Tlaloc's kernel C ABI. */
#include <math.h>
#include <stdio.h>

#include "tlaloc/kernels/kernel_abi.h"

int32_t tlaloc_kernel_abi_version(void) { return TLALOC_KERNEL_ABI_VERSION; }

int32_t tlaloc_silu_and_mul_f32(const TlalocKernelBuffer* operands, int32_t num_operands,
                                TlalocKernelBuffer* results, int32_t num_results,
                                const TlalocKernelAttr* attrs, int32_t num_attrs, char* error,
                                int32_t error_size) {
  (void)attrs;
  (void)num_attrs;
  if (num_operands != 2 || num_results != 1 || operands[0].dtype != TLALOC_KERNEL_F32 ||
      operands[1].dtype != TLALOC_KERNEL_F32 || operands[0].rank != operands[1].rank) {
    snprintf(error, error_size, "expected f32 gate and up of one shape -> y");
    return 1;
  }
  int64_t n = 1;
  for (int32_t d = 0; d < operands[0].rank; ++d) {
    if (operands[0].dims[d] != operands[1].dims[d]) {
      snprintf(error, error_size, "gate and up differ in dimension %d", (int)d);
      return 1;
    }
    n *= operands[0].dims[d];
  }
  const float* g = (const float*)operands[0].data;
  const float* u = (const float*)operands[1].data;
  float* y = (float*)results[0].data;
  for (int64_t i = 0; i < n; ++i) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
  return 0;
}
