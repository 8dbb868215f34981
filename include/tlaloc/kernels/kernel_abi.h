/* The C ABI between Tlaloc's interpreter and a kernel repository's `cpu` variant: a shared
 * library exporting tlaloc_kernel_abi_version() and one function per kernel layer (named by the
 * layer's "symbol" in metadata.json). Plain C so kernels can be built by any toolchain. */
#ifndef TLALOC_KERNELS_KERNEL_ABI_H_
#define TLALOC_KERNELS_KERNEL_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change; part of every arch variant name (`tlaloc1-...`). */
#define TLALOC_KERNEL_ABI_VERSION 1

typedef enum {
  TLALOC_KERNEL_F32 = 0,
  TLALOC_KERNEL_BF16 = 1,
  TLALOC_KERNEL_F16 = 2,
  TLALOC_KERNEL_F64 = 3,
  TLALOC_KERNEL_S32 = 4,
  TLALOC_KERNEL_S64 = 5,
  TLALOC_KERNEL_OTHER = 100
} TlalocKernelDtype;

/* A dense row-major tensor. Operands are read-only; results arrive allocated (zeroed). */
typedef struct {
  int32_t dtype; /* TlalocKernelDtype */
  int32_t rank;
  const int64_t* dims;
  void* data;
} TlalocKernelBuffer;

/* A scalar attribute of the layer (e.g. RMSNorm's eps). */
typedef struct {
  const char* name;
  double value;
} TlalocKernelAttr;

/* Returns 0 on success; otherwise writes a NUL-terminated message into `error`. */
typedef int32_t (*TlalocKernelFn)(const TlalocKernelBuffer* operands, int32_t num_operands,
                                  TlalocKernelBuffer* results, int32_t num_results,
                                  const TlalocKernelAttr* attrs, int32_t num_attrs, char* error,
                                  int32_t error_size);

typedef int32_t (*TlalocKernelAbiVersionFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* TLALOC_KERNELS_KERNEL_ABI_H_ */
