// Random Qwen3 checkpoints: presets, initialisation and the Hugging Face folder layout.
#include "tlaloc/models/init.h"

#include <random>

#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/load_weights.h"
#include "tlaloc/support/atomic_file.h"
#include "tlaloc/support/half.h"
#include "tlaloc/support/memory_info.h"

namespace tlaloc::models {

std::vector<std::string> PresetNames() {
  return {"tiny", "tiny-moe", "qwen3-0.6b", "qwen3-30b-a3b-2l"};
}

StatusOr<io::ModelConfig> PresetConfig(const std::string& name) {
  io::ModelConfig c = io::DefaultModelConfig(io::ModelArchitecture::kQwen3);
  // Token ids of the real Qwen3 tokenizer (FACTS-QWEN3.md).
  c.vocab_size = 151936;
  c.bos_token_id = 151643;
  c.eos_token_ids = {151645};
  c.pad_token_id = 151643;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.initializer_range = 0.02;
  if (name == "tiny" || name == "tiny-moe") {
    if (name == "tiny-moe") {
      c = io::DefaultModelConfig(io::ModelArchitecture::kQwen3Moe);
      c.vocab_size = 151936;
      c.bos_token_id = 151643;
      c.eos_token_ids = {151645};
      c.pad_token_id = 151643;
      c.rope_theta = 1000000.0;
      c.num_experts = 4;
      c.num_experts_per_tok = 2;
      c.moe_intermediate_size = 64;
      c.norm_topk_prob = true;
    }
    c.hidden_size = 64;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 16;
    c.intermediate_size = 128;
    c.max_position_embeddings = 4096;
    c.max_window_layers = 2;
    c.tie_word_embeddings = false;
    c.dtype = ElementType::kF32;
  } else if (name == "qwen3-30b-a3b-2l") {
    // Qwen3-30B-A3B's shapes (its config.json) with 2 of its 48 layers: the MoE layer costs of
    // the real model (128 experts of 768, 8 per token) at 1.8 B parameters (3.7 GB in bf16).
    c = io::DefaultModelConfig(io::ModelArchitecture::kQwen3Moe);
    c.vocab_size = 151936;
    c.bos_token_id = 151643;
    c.eos_token_ids = {151645};
    c.pad_token_id = 151643;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 1000000.0;
    c.initializer_range = 0.02;
    c.hidden_size = 2048;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 4;
    c.head_dim = 128;
    c.intermediate_size = 6144;
    c.moe_intermediate_size = 768;
    c.num_experts = 128;
    c.num_experts_per_tok = 8;
    c.norm_topk_prob = true;
    c.max_position_embeddings = 40960;
    c.max_window_layers = 2;
    c.tie_word_embeddings = false;
    c.dtype = ElementType::kBF16;
  } else if (name == "qwen3-0.6b") {
    c.hidden_size = 1024;
    c.num_hidden_layers = 28;
    c.num_attention_heads = 16;
    c.num_key_value_heads = 8;
    c.head_dim = 128;
    c.intermediate_size = 3072;
    c.max_position_embeddings = 40960;
    c.max_window_layers = 28;
    c.tie_word_embeddings = true;
    c.dtype = ElementType::kBF16;
  } else {
    std::string names;
    for (const auto& n : PresetNames()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgument("unknown preset \"" + name + "\" (expected one of: " + names + ")");
  }
  c.layer_types.assign(c.num_hidden_layers, "full_attention");
  TL_RETURN_IF_ERROR(io::ValidateModelConfig(c));
  return c;
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
  if (options.tokenizer_json.empty() || !options.write_tokenizer_config) return OkStatus();
  const std::filesystem::path path = dir / "tokenizer_config.json";
  return WriteStringAtomic(path, Qwen3TokenizerConfigJson(config));
}

}  // namespace tlaloc::models
