// A model program's typed signature: what each argument and result carries (weights, tokens,
// positions, cache slots, sampling settings, KV caches, ...), so callers bind inputs and read
// outputs by name instead of repeating an argument order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/ir/ir.h"
#include "tlaloc/ir/type.h"

namespace tlaloc::models {

enum class Port {
  kWeight,         // one checkpoint tensor (name: its checkpoint name)
  kTokens,         // s32 [B, T] (prefill) or [B] (decode)
  kPositions,      // s32, same shape as the tokens: each token's position in its sequence
  kLengths,        // s32 [B]: real tokens per prefill (or paged) row (the rest is padding)
  kSlots,          // s32 [B]: the KV-cache row each prefill row writes
  kBlockTable,     // s32 [B, M] (paged): the blocks holding each row's sequence, in order
  kWriteBlocks,    // s32 [B, W] (paged): the blocks a row's new tokens go to, from its first's
  kTemperature,    // f32 [B]
  kTopK,           // s32 [B]
  kTopP,           // f32 [B]
  kKeys,           // u32 [B, 2]: each row's threefry key
  kSteps,          // u32 [B]: each row's draw counter
  kMinP,           // f32 [B]
  kLogitBias,      // f32 [B, V] (penalised programs): each row's logit_bias
  kPenaltyScale,   // f32 [B, V] (penalised programs): repetition penalty of seen ids, else 1
  kPenaltyOffset,  // f32 [B, V] (penalised programs): presence and frequency penalties
  kKCache,         // one layer's keys [slots, kv_heads, max_len, head_dim] or, paged,
                   // [blocks, kv_heads, page_size, head_dim] (donated)
  kVCache,         // one layer's values, same type
  kNextTokens,     // s32 [B]: the sampled next token of each row
  kLogits,         // f32 [B, V]: the logits it was drawn from
};

std::string_view PortName(Port port);

struct PortSpec {
  Port port;
  std::string name;  // the weight's checkpoint name, "k_cache.3", or the port name
  TensorType type;
  int64_t layer = -1;      // caches: their decoder layer
  int aliased_input = -1;  // results: the donated argument this one updates in place
};

class ProgramSignature {
 public:
  std::vector<PortSpec> inputs, outputs;

  // Position of the `n`-th input / output with `port` (-1 when there is none).
  int Input(Port port, int n = 0) const;
  int Output(Port port, int n = 0) const;
  // Positions of every input / output with `port`, in order.
  std::vector<int> Inputs(Port port) const;
  std::vector<int> Outputs(Port port) const;
  // Whether the input at `index` is a donated KV cache.
  bool IsCacheInput(int index) const;
  // One line per port: "in  tokens s32[2,16]".
  std::string ToString() const;
};

// A built program: its module, entry function and signature.
struct ModelProgram {
  std::shared_ptr<Module> module;
  std::string entry;
  ProgramSignature signature;
};

}  // namespace tlaloc::models
