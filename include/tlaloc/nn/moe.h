// Mixture of experts (Qwen3-MoE's sparse block): an f32 router whose top-k needs no sort, and
// the experts in one of four forms with the same results. Only the chosen k experts of each
// token are computed in the three sparse forms; the dense-masked form (every expert on every
// token, weighted by mostly-zero routing weights) is kept as the reference.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tlaloc/builder/tensor.h"
#include "tlaloc/nn/layers.h"

namespace tlaloc::nn {

enum class MoeForm {
  kAuto,           // by pair count: MoeFormForPairs
  kRaggedDot,      // pairs sorted by expert (gather in), chlo.ragged_dot x3, scatter-add out
  kOneHotPermute,  // the same ragged_dot core, permuted in and out by one-hot matrix products
  kPairGather,     // each pair's expert weights gathered, batched products; no grouping
  kDenseMasked,    // every expert on every token, masked by the routing weights (reference)
};

std::string_view MoeFormName(MoeForm form);
// "auto", "ragged_dot", "onehot", "gather", "dense"; error naming the choices otherwise.
StatusOr<MoeForm> ParseMoeForm(std::string_view name);

// The form kAuto takes for `pairs` token-expert pairs (tokens x top_k), from the crossovers
// measured by bench/moe_bench.cc on the interpreter (docs/performance.md). TLALOC_MOE_FORM
// (one of the names above) overrides it.
MoeForm MoeFormForPairs(int64_t pairs);

// How the router picks its k experts. None sorts all experts of a row except kSort.
// bench/moe_bench.cc BM_RouterTopK, 2,048 rows x 128 experts, k = 8, on the interpreter:
// chlo.top_k (a partial sort per row) is the cheapest there, so it is the default; the k
// passes of max-and-mask are the form the TPU bring-up runbook measured as cheaper on a TPU.
enum class TopKMethod {
  kChloTopK,  // chlo.top_k on the probabilities (the default)
  kMaxMask,   // k passes of argmax then mask: elementwise ops and reductions only
  kSort,      // a full stable sort of every row (TopK), for comparison
};

struct MoeRouting {
  Tensor weights;  // f32 [N, k]: the chosen experts' probabilities (renormalised if asked)
  Tensor experts;  // s32 [N, k]: their ids, most probable first, ties to the lower id
};

// Softmax over all experts in f32 of logits [N, E] (any float type, widened), then the top k
// and, with norm_topk_prob, the k weights divided by their sum. The weights are differentiable
// (a one-hot contraction of the probabilities); the ids are not.
MoeRouting RouteTopK(const Tensor& logits, int64_t top_k, bool norm_topk_prob,
                     TopKMethod method = TopKMethod::kChloTopK);

// One MoE block's weights, the experts stacked on a leading axis in PyTorch's [out, in]
// layout (as GGUF's ffn_*_exps hold them).
//
// Expert parallelism: a device may hold only a slice of L consecutive experts (gate, up and
// down [L, ...], L dividing E; the router stays whole) starting at global expert
// `first_expert` (s32 scalar). It then routes every token over all E experts, keeps the pairs
// whose expert it holds and returns its experts' share of the result; the shares summed over
// the devices that split the experts are the whole block's output.
//
// int8 experts (io::WeightQuantization): gate, up and down s8 with their f16 block scales
// ([E, I, H / B], [E, I, H / B], [E, H, I / B]); every form then multiplies f32 activations by
// DequantizeInt8 of the experts it uses (the chain the interpreter fuses, as nn::Linear's),
// and the router stays float.
struct MoeWeights {
  Tensor router;                   // [E, H]
  Tensor gate;                     // [E, I, H], or [L, I, H] with first_expert
  Tensor up;                       // [E, I, H], or [L, I, H]
  Tensor down;                     // [E, H, I], or [L, H, I]
  Tensor first_expert = Tensor();  // unset: every expert is here
  Tensor gate_scale = Tensor();    // int8 experts' block scales; unset for float experts
  Tensor up_scale = Tensor();
  Tensor down_scale = Tensor();
};

// The sparse MoE block on x [N, H]: router logits in f32, RouteTopK, SwiGLU experts, the
// routing-weighted sum (in f32, rounded to x's type once). Result [N, H] in x's type; with a
// slice of the experts (MoeWeights::first_expert), that slice's share of it.
Tensor SparseMoe(const Tensor& x, const MoeWeights& w, int64_t top_k, bool norm_topk_prob,
                 MoeForm form = MoeForm::kAuto, LayerTrace* trace = nullptr,
                 const std::string& path = "");

}  // namespace tlaloc::nn
