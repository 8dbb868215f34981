// Qwen3 (dense) and Qwen3-MoE: the family's pieces, shared by its source files.
#pragma once

#include <vector>

#include "models/decoder/decoder.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::models::qwen3 {

using io::ModelConfig;

// The shared decoder (models/decoder/) for Qwen3's kind: q/k norms, rotary over rope_theta.
const decoder::DecoderKind& Qwen3Decoder();

Status CheckSupported(const ModelConfig& c);
std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c);
std::vector<WeightSpec> WeightSpecs(const ModelConfig& c);
StatusOr<ModelProgram> BuildStep(const ModelConfig& c, const StepShape& shape,
                                 nn::LayerTrace* trace, const ParallelHooks* parallel);
StatusOr<TrainForward> BuildTrainForward(const ModelConfig& c, const WeightTensors& w,
                                         const Tensor& input_ids, const Tensor* positions,
                                         autodiff::Marks* remat, const ParallelHooks* parallel);

// Qwen3 as llama.cpp's `qwen3` architecture, Qwen3-MoE as its `qwen3moe`.
StatusOr<GgufExportSummary> ExportGguf(const std::filesystem::path& dir,
                                       const std::filesystem::path& out,
                                       const GgufExportOptions& options);

// Qwen3-MoE as llama.cpp's `qwen3moe` (gguf_export_moe.cc): the configs its graph can express
// (refused by field name otherwise), the keys it adds, and layer `layer`'s router and stacked
// experts under llama.cpp's names.
Status CheckQwen3MoeExportable(const ModelConfig& c, const std::string& where);
std::vector<io::GgufKeyValue> Qwen3MoeKeys(const ModelConfig& c);
// The inverse for the GGUF import (ModelFamily::gguf_import_config): Qwen3MoeConfig's fields
// from the qwen3moe.* keys, as llama.cpp's graph runs them (every layer sparse, top-k weights
// renormalised).
Status Qwen3MoeImportConfig(const io::GgufContents& gguf, const std::string& src,
                            nlohmann::ordered_json& config);
// Float tensors come with GgmlType kF32 for the caller to choose their type; int8 experts as
// Q8_0 (s8 values with their f16 scales).
StatusOr<std::vector<io::GgufTensorToWrite>> Qwen3MoeLayerTensors(const io::Checkpoint& checkpoint,
                                                                  const ModelConfig& c,
                                                                  int64_t layer,
                                                                  const std::string& where);

// Qwen3's (or, `moe`, Qwen3-MoE's) share of config.json (config.cc).
io::ConfigFamily ConfigFamilyOf(bool moe);

// Adds the qwen3 and qwen3_moe entries.
void Register(std::vector<ModelFamily>& registry);

}  // namespace tlaloc::models::qwen3
