// Named composites: an op sequence emitted as one stablehlo.composite whose decomposition is a
// private function of the module (ops/composite.cc), so later passes find the operation by its
// name (the interpreter maps it to a kernel: interp/fusion_composite.cc; kernelize replaces it)
// instead of recognising the chain it decomposes into.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tlaloc/builder/tensor.h"

namespace tlaloc {

// The composites the builder and nn emit (their attributes: the functions that emit them).
inline constexpr std::string_view kRmsNormComposite = "tlaloc.rms_norm";
inline constexpr std::string_view kSiluAndMulComposite = "tlaloc.silu_and_mul";
inline constexpr std::string_view kRotaryComposite = "tlaloc.rotary";
// builder::Argmax over a non-empty axis {axis}: the first index of the maximum (NaN the largest).
inline constexpr std::string_view kArgmaxComposite = "tlaloc.argmax";
// builder::MaskedSoftmax {broadcast_dimensions, fill}: softmax over the last axis of x with the
// elements the (broadcast) pred mask leaves out set to fill: attention's probabilities.
inline constexpr std::string_view kMaskedSoftmaxComposite = "tlaloc.masked_softmax";
// The LM head's cross-entropy (train/loss.h), whose gradient rule lives in autodiff.
inline constexpr std::string_view kLinearCrossEntropyComposite = "tlaloc.linear_cross_entropy";

// Softmax over the last axis of Where(BroadcastInDim(mask, x's dims, broadcast_dimensions), x,
// fill): attention's masked scores (fill a large finite negative, so a fully masked row stays
// finite). The composite tlaloc.masked_softmax {broadcast_dimensions, fill}, whose
// decomposition is those ops (builder::Softmax's).
Tensor MaskedSoftmax(const Tensor& x, const Tensor& mask,
                     const std::vector<int64_t>& broadcast_dimensions, double fill);

// Emits stablehlo.composite `name` on `operands` with `attributes` (version 1). Its
// decomposition is the private function `function` of the builder's module, built by `body` on
// that function's arguments the first time the name is asked for; so everything the body depends
// on beyond the operands' types (constants, settings) must be part of `function`, and every call
// with the same types and settings shares one function. Without a module (an OpBuilder over a
// bare block) the body's ops are emitted in place. Returns the results, empty on an error
// (recorded on the builder).
std::vector<Tensor> EmitComposite(
    std::string_view name, const std::vector<Tensor>& operands, AttrDict attributes,
    const std::string& function,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>& args)>& body);

// Copies into `to` every private function of `from` that `to` lacks (by name): the
// decompositions of composites built in one module (a scratch module, such as the trainer's
// loss) and differentiated or called from another.
void CopyPrivateFunctions(const Module& from, Module& to);

// Appends a copy of `src`'s operations (their regions too) to `dst`; `map` takes each value of
// `src` (and of its enclosing blocks, as the caller fills it) to its copy.
void CloneBlockInto(const Block& src, Block& dst, std::unordered_map<ValueImpl*, Value>& map);

// A symbol-safe name for a tensor type, e.g. "bf16_2x5x64" ([A-Za-z0-9_] only).
std::string CompositeTypeName(const TensorType& t);

}  // namespace tlaloc
