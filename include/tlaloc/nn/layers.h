// Transformer layers written only with builder ops (no model-specific IR ops). Each layer has a
// stable kernel-layer name; when a LayerTrace is attached, every layer call records its name,
// its instance path and the range of ops it emitted, so a later kernelize pass can find the
// decomposition and swap it for a kernel.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/builder/tensor.h"

namespace tlaloc::nn {

// Kernel-layer names (stable: kernel repositories refer to them).
inline constexpr std::string_view kEmbeddingLayer = "Embedding";
inline constexpr std::string_view kLinearLayer = "Linear";
inline constexpr std::string_view kRmsNormLayer = "RMSNorm";
inline constexpr std::string_view kRotaryEmbeddingLayer = "RotaryEmbedding";
inline constexpr std::string_view kAttentionLayer = "Attention";
// nn::PagedAttention: attention reading a paged KV cache through a block table.
inline constexpr std::string_view kPagedAttentionLayer = "PagedAttention";
inline constexpr std::string_view kSiluAndMulLayer = "SiluAndMul";
inline constexpr std::string_view kMlpLayer = "MLP";
inline constexpr std::string_view kMoeLayer = "SparseMoeBlock";
inline constexpr std::string_view kDecoderLayer = "DecoderLayer";
inline constexpr std::string_view kLmHeadLayer = "LMHead";

// One layer call: ops [begin_op, end_op) of `block` belong to it (nested calls overlap).
struct LayerRecord {
  std::string kernel;
  std::string path;  // e.g. "model.layers.3.self_attn"
  const Block* block = nullptr;
  size_t begin_op = 0;
  size_t end_op = 0;
  // The call's scalar settings a kernel needs (RMSNorm's eps, Attention's scale).
  std::map<std::string, double> attributes;
};

class LayerTrace {
 public:
  const std::vector<LayerRecord>& records() const { return records_; }
  // Records with this kernel name.
  std::vector<LayerRecord> Find(std::string_view kernel) const;

 private:
  friend class LayerScope;
  std::vector<LayerRecord> records_;
};

// RAII: records one layer call in `trace` (may be null) from construction to destruction.
class LayerScope {
 public:
  LayerScope(LayerTrace* trace, OpBuilder* b, std::string_view kernel, std::string path,
             std::map<std::string, double> attributes = {});
  ~LayerScope();
  LayerScope(const LayerScope&) = delete;
  LayerScope& operator=(const LayerScope&) = delete;

 private:
  LayerTrace* trace_;
  OpBuilder* b_;
  size_t index_ = 0;
};

// int8 weights with block scales (io::WeightQuantization): q s8 [..., K] and scale f16 (or f32)
// [..., K / B] give q * scale in f32, each scale applying to B consecutive elements of the last
// axis. Emitted as ordinary StableHLO, the form XLA fuses into its consumer:
//   reshape(q) [..., K/B, B] -> convert f32 -> multiply by broadcast_in_dim(convert(scale))
//   -> reshape [..., K]
// (exact: an int8 times an f16 fits f32's significand).
Tensor DequantizeInt8(const Tensor& q, const Tensor& scale);

// table[ids]: ids of any shape (s32), table [vocab, hidden]. An int8 table (`int8_scale` valid)
// gathers its rows and their scales and returns them dequantised, in f32.
Tensor Embedding(const Tensor& table, const Tensor& ids, LayerTrace* trace = nullptr,
                 const std::string& path = "", const Tensor& int8_scale = Tensor());
// x [..., in] times weight [out, in] (the PyTorch layout) -> [..., out], no bias. bf16/f16
// inputs accumulate in f32 and are rounded once. With `int8_scale` valid, weight is s8 and the
// product is in f32, rounded once to x's type, in the form CurrentInt8Form() names
// (int8_linear.h): q8_0 (the default; f16 scales per 32-block on a builder with a module) is
// the composite tlaloc.int8_linear, exact is dot_general(f32 x, DequantizeInt8(weight,
// int8_scale)) (the interpreter runs that chain as one fused int8 kernel: interp/fusion.h).
Tensor Linear(const Tensor& x, const Tensor& weight, LayerTrace* trace = nullptr,
              const std::string& path = "", const Tensor& int8_scale = Tensor());
// RMSNorm over the last axis, in f32, eps inside the square root, weight in x's type.
Tensor RmsNormLayer(const Tensor& x, const Tensor& weight, double eps, LayerTrace* trace = nullptr,
                    const std::string& path = "");

// cos and sin tables for `positions` (s32, any shape P): f32 [P..., head_dim], angles
// positions * theta^(-2i/head_dim) duplicated over the two halves.
std::pair<Tensor, Tensor> RotaryTables(const Tensor& positions, int64_t head_dim, double theta);
// Non-interleaved rotary embedding: x*cos + rotate_half(x)*sin, rotate_half = cat(-x2, x1).
// x [B, T, heads, D]; cos/sin [B, T, D] from RotaryTables. Computed in f32, cast back.
Tensor ApplyRotary(const Tensor& x, const Tensor& cos, const Tensor& sin,
                   LayerTrace* trace = nullptr, const std::string& path = "");

// silu(gate) * up.
Tensor SiluAndMul(const Tensor& gate, const Tensor& up, LayerTrace* trace = nullptr,
                  const std::string& path = "");
// Block scales of an int8 MLP's three matrices (all invalid: float weights).
struct MlpInt8Scales {
  Tensor gate, up, down;
};
// SwiGLU MLP: down(silu(gate(x)) * up(x)).
Tensor SwiGluMlp(const Tensor& x, const Tensor& gate_w, const Tensor& up_w, const Tensor& down_w,
                 LayerTrace* trace = nullptr, const std::string& path = "",
                 const MlpInt8Scales& int8_scales = {});

// Scaled dot-product attention with grouped KV heads.
// q [B, T, Hq, D]; k, v [B, Hkv, S, D]; mask pred [B, T, S] (true = may attend).
// Scores and softmax in f32; returns [B, T, Hq, D] in q's type. Query head h reads KV head
// h / (Hq / Hkv).
Tensor GroupedAttention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
                        double scale, LayerTrace* trace = nullptr, const std::string& path = "");

// The MoE block (SparseMoe) is in moe.h.

}  // namespace tlaloc::nn
