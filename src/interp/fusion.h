// Chains of ops the interpreter runs as one fused kernel, found when a function is planned.
// Each fused kernel returns bit for bit what the ops would, so fusion changes speed only;
// InterpreterOptions::fuse (TLALOC_FUSION=0 in the environment) turns it off.
//
// softmax over the last axis, as builder::Softmax emits it:
//   m = reduce(x, max) ; bm = broadcast(reshape?(m)) ; d = x - bm ; e = exp(d)
//   s = reduce(e, add) ; bs = broadcast(reshape?(s)) ; p = e / bs
// with every intermediate used only inside the chain: one pass per row instead of seven
// passes over the whole tensor and five full-size temporaries (MoE's router, sampling, and a
// tlaloc.masked_softmax decomposition that runs: attention's own is the composite's kernel).
//
// named composites (builder/composite.h, nn/int8_linear.h, nn/paged_attention.h) as one kernel
// each, by name from one table (fusion_composite.cc): tlaloc.int8_linear (fusion_int8.cc),
// tlaloc.rms_norm (fusion_norm.cc), tlaloc.rotary (fusion_rotary.cc), tlaloc.silu_and_mul
// (fusion_silu.cc), tlaloc.linear_cross_entropy (fusion_xent.cc: the LM head's loss with its
// gradients), tlaloc.paged_dot (fusion_paged.cc: decode attention's products over the paged KV
// pool, the pages read in place through the block table), tlaloc.argmax (fusion_argmax.cc: one
// pass per row), tlaloc.masked_softmax (fusion_masked_softmax.cc: attention's probabilities,
// each row masked into the result, then softmaxed in place; with the convert to bf16 that
// follows it over a bf16 cache, the one chain matched after a composite). Otherwise no chain
// is recognised for these: the builder, nn and train emit the composite.
//
// int8 expert products, as nn::SparseMoe emits them for int8 weights (fusion_int8.cc):
//   chlo.ragged_dot(x f32, reshape(convert(reshape(q s8)) * broadcast_in_dim(convert(scale))))
// on a stack of matrices, run as one kernel on (q, scale, x, group_sizes) that reads the int8
// matrices in place (nn::Linear's int8 products are the composite tlaloc.int8_linear).
//
// a broadcast read in place (fusion_broadcast.cc): broadcast_in_dim(s) used only by an f32
// add, subtract, multiply or divide with a full-size x, run as one kernel on (x, s) that reads
// s with stride 0 instead of materialising the broadcast. Matched after the chains above, so
// it never takes a broadcast that one of them would fuse.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ops/reduction_kernels.h"
#include "plan.h"
#include "tlaloc/ir/liveness.h"

namespace tlaloc::interp {

// `op` reduces an f32 tensor of rank >= 1 over its last axis with a body of `kind`.
bool IsLastAxisReduce(const Operation& op, ops::BinaryKind kind);

// Follows a reduced row value `r` (shape x without its last axis, or with it as 1) through
// reshapes between those shapes and a broadcast_in_dim back to x's shape that repeats it along
// the last axis. Returns the broadcast op's index, or -1. `chain` collects the ops passed.
int RowBroadcast(const Block& block, const BlockUses& uses, Value r, const TensorType& x,
                 std::vector<int>& chain);

// Rewrites `plan` (the plan of `block`, whose uses are `uses`) so fused kernels replace the
// chains they match. `slot_of` gives a value's slot.
void FuseChains(const Block& block, const BlockUses& uses, BlockPlan& plan,
                const std::function<int(const ValueImpl*)>& slot_of);

// The composite tlaloc.int8_linear at op `a`: mode "exact" run as cpu::Int8Matmul, mode "q8_0"
// as the in-order VNNI q8_0 kernel, each with its decomposition's bits (fusion_int8.cc).
bool MatchInt8Composite(const Block& block, int a, std::vector<int>& chain,
                        std::vector<Value>& operands, const FusedKernel*& kernel);
// The composite tlaloc.ragged_int8_linear at op `a` (nn::SparseMoe's int8 experts): run as
// cpu::RaggedDotInt8 in its mode, with its decomposition's bits (fusion_int8.cc).
bool MatchRaggedInt8Composite(const Block& block, int a, std::vector<int>& chain,
                              std::vector<Value>& operands, const FusedKernel*& kernel);
// The composite tlaloc.gguf_linear (q4_0, q4_k, q6_k) at op `a`, run as cpu::GgufMatmul with its
// decomposition's bits (fusion_gguf.cc).
bool MatchGgufComposite(const Block& block, int a, std::vector<int>& chain,
                        std::vector<Value>& operands, const FusedKernel*& kernel);

// The broadcast-into-arithmetic pair starting at op `a` (the broadcast_in_dim): on success
// `chain` holds (a, the arithmetic op), `operands` (x, s), and the kernel (its shapes bound)
// is returned; nullptr otherwise.
std::shared_ptr<const FusedKernel> MatchBroadcastBinary(const Block& block, const BlockUses& uses,
                                                        int a, std::vector<int>& chain,
                                                        std::vector<Value>& operands);

// The kernel of the composite at op `a` by its name (fusion_composite.cc's table): on success
// `chain` is {a} and `operands` the composite's; nullptr when `a` is no composite with a kernel
// for its types and attributes (its decomposition runs).
std::shared_ptr<const FusedKernel> CompositeKernel(const Block& block, int a,
                                                   std::vector<int>& chain,
                                                   std::vector<Value>& operands);

// tlaloc.rms_norm {eps} on (x, weight) (fusion_norm.cc), or nullptr for types it does not take.
std::shared_ptr<const FusedKernel> RmsNormCompositeKernel(const Operation& op);

// tlaloc.linear_cross_entropy on (hidden, head, labels) (fusion_xent.cc), with its gradients
// when it returns them, or nullptr for types it does not take.
std::shared_ptr<const FusedKernel> LinearCrossEntropyCompositeKernel(const Operation& op);

// tlaloc.rotary on (x, cos, sin) (fusion_rotary.cc), or nullptr for types it does not take.
std::shared_ptr<const FusedKernel> RotaryCompositeKernel(const Operation& op);

// tlaloc.paged_dot on (lhs, pool, table) (fusion_paged.cc): decode attention's keys or values
// product with the pages read in place, or nullptr for shapes it does not take (more vectors
// than a decode step's).
std::shared_ptr<const FusedKernel> PagedDotCompositeKernel(const Operation& op);

// tlaloc.silu_and_mul on (gate, up) (fusion_silu.cc), or nullptr for types it does not take.
std::shared_ptr<const FusedKernel> SiluMulCompositeKernel(const Operation& op);

// tlaloc.argmax over the last axis of f32 x with s32 indices (fusion_argmax.cc), or nullptr for
// types and axes it does not take.
std::shared_ptr<const FusedKernel> ArgmaxCompositeKernel(const Operation& op);

// tlaloc.masked_softmax {broadcast_dimensions, fill} on (f32 x, pred mask) over the last axis
// (fusion_masked_softmax.cc), its result f32 or, with `out_type` bf16, rounded to bf16 as a
// convert would; nullptr for types and shapes it does not take.
std::shared_ptr<const FusedKernel> MaskedSoftmaxCompositeKernel(
    const Operation& op, ElementType out_type = ElementType::kF32);
// The composite tlaloc.masked_softmax at op `a` whose only use is a convert to bf16: on success
// `chain` is (a, the convert), `operands` the composite's, and the kernel writes bf16.
std::shared_ptr<const FusedKernel> MatchMaskedSoftmaxToBf16(const Block& block,
                                                            const BlockUses& uses, int a,
                                                            std::vector<int>& chain,
                                                            std::vector<Value>& operands);

// Makes the op plans of `chain` run `kernel` on `operands` at the chain's last op (fusion.cc).
void ReplaceChain(const std::vector<int>& chain, const std::vector<Value>& operands,
                  const FusedKernel* kernel, BlockPlan& plan,
                  const std::function<int(const ValueImpl*)>& slot_of);

// Trees of f32 add, subtract, multiply, divide, sqrt and negate (inner values used once,
// broadcasts as leaves) of at least two ops, run tile by tile as one kernel
// (fusion_train_elementwise.cc): AdamW's update, gradient clipping, the backward's chains.
void FuseElementwiseTrees(const Block& block, const BlockUses& uses, BlockPlan& plan,
                          const std::function<int(const ValueImpl*)>& slot_of);

}  // namespace tlaloc::interp
