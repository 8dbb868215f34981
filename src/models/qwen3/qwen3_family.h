// Qwen3 (dense) and Qwen3-MoE: the family's pieces, shared by its source files.
#pragma once

#include <vector>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/models/family.h"

namespace tlaloc::models::qwen3 {

using io::ModelConfig;

// How a decoder layer is used: prefill writes a chunk's keys into cache slots and attends
// within the chunk; decode writes one key per slot and attends over the whole cache; train has
// no cache.
enum class Mode { kPrefill, kDecode, kTrain };

// What every layer of one forward shares.
struct LayerContext {
  Mode mode = Mode::kTrain;
  Tensor cos, sin;   // rotary tables [B, T, head_dim], f32
  Tensor mask;       // pred [B, T, keys]
  Tensor slots;      // prefill: s32 [B], the cache row of each batch row
  Tensor positions;  // decode: s32 [B], where each row's new key goes
  // Paged KV cache (page_size > 0): each row's chunk starts at starts[r] and holds lengths[r]
  // real tokens; block_table [B, M] names the row's blocks, write_blocks [B, W] those its chunk
  // touches (from the block holding starts[r]). The cache is a pool of blocks.
  int64_t page_size = 0;
  Tensor starts, lengths, block_table, write_blocks;
  // Tensor parallelism (shard/): the block reductions and annotations; unset on one device.
  ParallelHooks parallel;
  // Qwen3 RMS-normalises each head's queries and keys before the rotation; Llama does not.
  bool qk_norm = true;
};

// What differs between the Llama-style decoders built here: Qwen3's (q/k norms) and Llama's
// (models/llama/, plain attention and its own rotary frequencies). The layer, the step programs
// and the training forward are shared.
struct DecoderKind {
  const char* name = "Qwen3";  // starts messages; the program module's name in lower case
  const char* module = "qwen3";
  Status (*check)(const ModelConfig& c) = nullptr;
  std::vector<WeightSpec> (*weight_specs)(const ModelConfig& c) = nullptr;
  bool qk_norm = true;
  // cos/sin tables [..., head_dim] for s32 positions; null: nn::RotaryTables over rope_theta.
  std::pair<Tensor, Tensor> (*rotary)(const ModelConfig& c, const Tensor& positions) = nullptr;
};
// Qwen3's.
const DecoderKind& Qwen3Decoder();
StatusOr<ModelProgram> BuildDecoderStep(const DecoderKind& kind, const ModelConfig& c,
                                        const StepShape& shape, nn::LayerTrace* trace,
                                        const ParallelHooks* parallel);
StatusOr<TrainForward> BuildDecoderTrainForward(const DecoderKind& kind, const ModelConfig& c,
                                                const WeightTensors& w, const Tensor& input_ids,
                                                const Tensor* positions, autodiff::Marks* remat,
                                                const ParallelHooks* parallel);

// One layer's KV cache, replaced by its updated value as layers write it.
struct LayerCache {
  Tensor k, v;
};

// Decoder layer `layer` on x [B, T, H] (`cache` unused, may be null, in training).
Tensor DecoderLayer(const ModelConfig& c, const WeightTensors& w, int64_t layer, const Tensor& x,
                    const LayerContext& ctx, LayerCache* cache, nn::LayerTrace* trace);
// The block scales of int8 matrix `name` in `w`, or an invalid Tensor when it is a float matrix.
inline Tensor Int8Scale(const WeightTensors& w, const std::string& name) {
  auto it = w.find(Int8ScaleName(name));
  return it == w.end() ? Tensor() : it->second;
}

// Final RMSNorm.
Tensor FinalNorm(const ModelConfig& c, const WeightTensors& w, const Tensor& x,
                 nn::LayerTrace* trace);
// The LM head matrix's checkpoint name: lm_head.weight, or the embedding when tied.
std::string HeadWeightName(const ModelConfig& c);

Status CheckSupported(const ModelConfig& c);
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c);
std::vector<WeightSpec> WeightSpecs(const ModelConfig& c);
// The tensor-parallel split dimension of weight `name` (WeightSpec::tensor_parallel_dim).
int64_t TensorParallelDim(std::string name);
StatusOr<ModelProgram> BuildStep(const ModelConfig& c, const StepShape& shape,
                                 nn::LayerTrace* trace, const ParallelHooks* parallel);
StatusOr<TrainForward> BuildTrainForward(const ModelConfig& c, const WeightTensors& w,
                                         const Tensor& input_ids, const Tensor* positions,
                                         autodiff::Marks* remat, const ParallelHooks* parallel);

// Qwen3 as llama.cpp's `qwen3` architecture, Qwen3-MoE as its `qwen3moe`.
StatusOr<GgufExportSummary> ExportGguf(const std::filesystem::path& dir,
                                       const std::filesystem::path& out,
                                       const GgufExportOptions& options);

// A Llama-style decoder folder as llama.cpp architecture `arch` ("qwen3", "qwen3moe",
// "llama"): its family's tensors under llama.cpp's names, the shared hyperparameter keys and
// the byte-level BPE tokenizer. No rope scaling.
StatusOr<GgufExportSummary> ExportDecoderGguf(const std::filesystem::path& dir,
                                              const std::filesystem::path& out,
                                              const GgufExportOptions& options,
                                              const ModelConfig& config, const std::string& arch);

// Qwen3-MoE as llama.cpp's `qwen3moe` (gguf_export_moe.cc): the configs its graph can express
// (refused by field name otherwise), the keys it adds, and layer `layer`'s router and stacked
// experts under llama.cpp's names.
Status CheckQwen3MoeExportable(const ModelConfig& c, const std::string& where);
std::vector<io::GgufKeyValue> Qwen3MoeKeys(const ModelConfig& c);
// Float tensors come with GgmlType kF32 for the caller to choose their type; int8 experts as
// Q8_0 (s8 values with their f16 scales).
StatusOr<std::vector<io::GgufTensorToWrite>> Qwen3MoeLayerTensors(const io::Checkpoint& checkpoint,
                                                                  const ModelConfig& c,
                                                                  int64_t layer,
                                                                  const std::string& where);

// Qwen3's or Qwen3-MoE's share of config.json (config.cc).
io::ConfigFamily ConfigFamilyOf(const io::ModelArchitecture& arch);

// Adds the qwen3 and qwen3_moe entries.
void Register(std::vector<ModelFamily>& registry);

}  // namespace tlaloc::models::qwen3
