// Which dimension tensor parallelism splits each weight of the shared decoder, by transformers'
// projection names (the same in Qwen3, Qwen3-MoE and Llama checkpoints).
#include "models/decoder/decoder.h"
#include "tlaloc/ir/quant_format.h"

namespace tlaloc::models::decoder {

namespace {

bool EndsWith(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

// Column-parallel projections (q, k, v, gate, up) split their output rows, row-parallel ones
// (o, down: the layer's partial sums ParallelHooks::Reduce adds) their input columns, stacked
// experts their experts; an int8 matrix's scales follow it.
int64_t TensorParallelDim(std::string name) {
  if (auto weight = QuantWeightOfScale(name)) name = std::string(*weight);
  if (name.find(".mlp.experts.") != std::string::npos) return 0;
  for (const char* col : {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                          "self_attn.v_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight"})
    if (EndsWith(name, col)) return 0;
  for (const char* row : {"self_attn.o_proj.weight", "mlp.down_proj.weight"})
    if (EndsWith(name, row)) return 1;
  return -1;
}

}  // namespace tlaloc::models::decoder
