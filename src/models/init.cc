// Random checkpoints: presets (src/models/presets/*.json), initialisation and the Hugging Face
// folder layout.
#include "tlaloc/models/init.h"

#include <algorithm>
#include <random>

#include "models/presets.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/load_weights.h"
#include "tlaloc/support/atomic_file.h"
#include "tlaloc/support/half.h"
#include "tlaloc/support/memory_info.h"

namespace tlaloc::models {

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const EmbeddedPreset& p : EmbeddedPresets()) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  return names;
}

StatusOr<io::ModelConfig> PresetConfig(const std::string& name) {
  for (const EmbeddedPreset& p : EmbeddedPresets()) {
    if (p.name != name) continue;
    TL_ASSIGN_OR_RETURN(io::ModelConfig c,
                        ParseConfig(p.json, "preset " + name + " (src/models/presets/)"));
    TL_RETURN_IF_ERROR(io::ValidateModelConfig(c));
    return c;
  }
  std::string names;
  for (const auto& n : PresetNames()) names += (names.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown preset \"" + name + "\" (expected one of: " + names + ")");
}

std::vector<io::NamedTensor> RandomWeights(const io::ModelConfig& config, uint64_t seed,
                                           ElementType dtype) {
  std::vector<io::NamedTensor> out;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, static_cast<float>(config.initializer_range));
  for (const auto& spec : WeightSpecs(config)) {
    const bool is_norm = spec.name.find("norm.weight") != std::string::npos ||
                         spec.name.find("layernorm.weight") != std::string::npos;
    Literal lit(TensorType(dtype, spec.shape));
    const int64_t n = lit.num_elements();
    if (dtype == ElementType::kF32) {
      auto s = lit.span<float>();
      for (int64_t i = 0; i < n; ++i) s[i] = is_norm ? 1.0f : normal(rng);
    } else if (dtype == ElementType::kBF16) {
      auto s = lit.span<uint16_t>();
      for (int64_t i = 0; i < n; ++i) s[i] = FloatToBf16Bits(is_norm ? 1.0f : normal(rng));
    } else {
      for (int64_t i = 0; i < n; ++i) lit.SetFromDouble(i, is_norm ? 1.0 : normal(rng));
    }
    out.push_back({spec.name, std::move(lit)});
  }
  return out;
}

Status WriteModelFolder(const io::ModelConfig& config, const std::filesystem::path& dir,
                        std::span<const io::NamedTensor> weights,
                        const io::GenerationConfig& generation,
                        const std::filesystem::path& tokenizer_json) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgument("cannot create " + dir.string() + ": " + ec.message());
  // Program weights name stacked experts; the checkpoint holds transformers' per-expert tensors.
  TL_RETURN_IF_ERROR(
      io::WriteCheckpoint(dir, CheckpointTensors(config, weights), ExpertsInOrder()));
  TL_RETURN_IF_ERROR(io::WriteModelConfig(dir / "config.json", config));
  TL_RETURN_IF_ERROR(WriteStringAtomic(dir / "generation_config.json",
                                       io::GenerationConfigToJson(generation) + "\n"));
  if (!tokenizer_json.empty())
    TL_RETURN_IF_ERROR(CopyFileAtomic(tokenizer_json, dir / "tokenizer.json"));
  return OkStatus();
}

Status WriteRandomCheckpoint(const io::ModelConfig& config_in, const std::filesystem::path& dir,
                             const InitOptions& options) {
  TL_RETURN_IF_ERROR(CheckSupported(config_in));
  io::ModelConfig config = config_in;
  config.dtype = options.dtype;
  // Every weight is held in memory before the file is streamed out: refuse a model that cannot
  // fit instead of aborting with std::bad_alloc half-way (a bare {"model_type": "qwen3"} config
  // means transformers' 8B defaults).
  const int64_t params = models::ParameterCount(config);
  const uint64_t weight_bytes =
      static_cast<uint64_t>(params) * static_cast<uint64_t>(BitWidth(options.dtype) / 8);
  // A margin of 1/8 plus 64 MiB covers the allocator, the tokenizer copy and the program itself.
  const uint64_t needed = weight_bytes + weight_bytes / 8 + (uint64_t{64} << 20);
  if (auto available = AvailableMemoryBytes(); available && needed > *available)
    return ResourceExhausted("a model of " + std::to_string(params) + " parameters needs about " +
                             FormatBytes(needed) + " of memory in " +
                             std::string(MlirName(options.dtype)) + " and " +
                             FormatBytes(*available) +
                             " is available: choose a smaller config (hidden_size, "
                             "num_hidden_layers, vocab_size) or --dtype bf16");
  auto weights = RandomWeights(config, options.seed, options.dtype);
  io::GenerationConfig gen;
  gen.bos_token_id = config.bos_token_id;
  gen.eos_token_ids = config.eos_token_ids;
  gen.pad_token_id = config.pad_token_id;
  TL_RETURN_IF_ERROR(WriteModelFolder(config, dir, weights, gen, options.tokenizer_json));
  // The family's tokenizer files: its built-in tokenizer.json when none was given, and its
  // tokenizer_config.json (chat template, special tokens) with either.
  TL_ASSIGN_OR_RETURN(const ModelFamily* family, FamilyOf(config));
  if (options.tokenizer_json.empty()) {
    if (!family->builtin_tokenizer_json) return OkStatus();
    TL_RETURN_IF_ERROR(WriteStringAtomic(dir / "tokenizer.json", family->builtin_tokenizer_json()));
  }
  if (!options.write_tokenizer_config || !family->tokenizer_config_json) return OkStatus();
  return WriteStringAtomic(dir / "tokenizer_config.json", family->tokenizer_config_json(config));
}

}  // namespace tlaloc::models
