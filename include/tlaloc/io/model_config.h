// Hugging Face config.json for the model families Tlaloc runs. This file parses the fields the
// families share; which model_types exist, their class defaults and their own fields are the
// model family registry's (models/family.h, one ConfigFamily each), so a config means the same
// model here as in transformers' config class. What Tlaloc runs of a config (its weights, its
// programs) is the model family's business too.
#pragma once

#include <any>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/ir/element_type.h"
#include "tlaloc/ir/quant_format.h"
#include "tlaloc/support/status.h"

namespace tlaloc::io {

// Which model a config is: its config.json "model_type" and "architectures" class. Any pair a
// registered model family claims; io names none of them (each family's public header does:
// models/qwen3.h's kQwen3, models/llama.h's kLlama).
struct ModelArchitecture {
  std::string model_type;  // "qwen3", "qwen3_moe", "llama", ...
  std::string class_name;  // "Qwen3ForCausalLM", ...
  bool operator==(const ModelArchitecture&) const = default;
};

std::string_view ArchitectureClassName(const ModelArchitecture& a);
std::string_view ArchitectureModelType(const ModelArchitecture& a);

// rope_scaling (legacy name) / a non-default rope_parameters: kept as given; Tlaloc's model code
// decides which rope types it implements.
struct RopeScaling {
  std::string rope_type;  // "yarn", "linear", "dynamic", ...
  std::optional<double> factor;
  std::optional<int64_t> original_max_position_embeddings;
  // "llama3" rope: the wavelength band between which the frequencies are blended.
  std::optional<double> low_freq_factor, high_freq_factor;
  std::string json;  // the whole object as JSON text, written back unchanged
};

// config.json "quantization_config" of a quantised checkpoint; the formats and their layouts are
// ir/quant_format.h's table. kTlalocInt8QuantMethod (`tlaloc quantize`, docs/performance.md
// "int8 weights"): every linear-layer matrix (and the embedding table) stored in q8_0: int8
// `X.weight` [out, in] with f16 scales `X.weight_scale` [out, in / 32], weight = int8 * scale.
// kTlalocGgufQuantMethod (a GGUF file's import, models/gguf_import.h): `formats` names each
// matrix's format (q8_0, q4_0, q4_k, q6_k); a matrix not listed is float. Other quant_methods
// are refused.
struct WeightQuantization {
  std::string quant_method = std::string(kTlalocInt8QuantMethod);
  int64_t bits = 8;
  int64_t group_size = kQ8_0BlockElements;
  std::map<std::string, std::string> formats;  // tlaloc_gguf only
};

// A decoder layer's feed-forward block, what the shared code (the decoder, parameter counts,
// sharding plans, inspect) asks of a family's MoE fields: a dense SwiGLU MLP of
// intermediate_size, or a sparse mixture of `experts` SwiGLU experts of width `expert_width`
// behind a router, each token using its top `experts_per_token` (their router weights
// renormalised to sum to 1 when `normalize_top_k`).
struct FeedForward {
  int64_t experts = 0;  // 0: dense
  int64_t experts_per_token = 0;
  int64_t expert_width = 0;
  bool normalize_top_k = false;
  bool sparse() const { return experts > 0; }
};

// The fields decoder families share (their class defaults are the family's: DefaultModelConfig),
// and the family's own fields in family_fields.
struct ModelConfig {
  // Empty until DefaultModelConfig or ParseModelConfig sets it.
  ModelArchitecture architecture;

  int64_t vocab_size = 151936;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 22016;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;
  int64_t head_dim = 128;
  std::string hidden_act = "silu";
  int64_t max_position_embeddings = 32768;
  double initializer_range = 0.02;
  double rms_norm_eps = 1e-6;
  bool use_cache = true;
  bool tie_word_embeddings = false;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool attention_bias = false;
  // "full_attention" / "sliding_attention" per layer; when config.json gives none, derived from
  // the family's own fields by its ConfigFamily::layer_types (full everywhere without one).
  std::vector<std::string> layer_types;
  double attention_dropout = 0.0;

  // torch_dtype (or the newer "dtype"): the checkpoint's stored parameter type.
  std::optional<ElementType> dtype;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // an int or a list in JSON
  std::optional<int64_t> pad_token_id;
  // quantization_config; nullopt for a checkpoint of float weights.
  std::optional<WeightQuantization> quantization;

  // Fields Tlaloc does not interpret ("transformers_version", ...) as a JSON object text,
  // written back so a round trip keeps them.
  std::string extra_json = "{}";

  // The family's own fields (Qwen3's sliding window, Qwen3-MoE's experts, Llama's mlp_bias,
  // ...): its ConfigFamily sets their defaults, parses, writes and checks them, and its public
  // header's typed accessors read them (models/qwen3.h, models/llama.h). io names none of them;
  // what the shared code needs of them it asks through FeedForwardOf and SlidingWindow.
  std::any family_fields;

  // Whether the config's family has sparse MoE layers (its ConfigFamily::sparse_moe), a
  // capability rather than one model_type.
  bool is_moe() const;
  // Whether its attention normalises queries and keys per head (ConfigFamily::qk_norm; true
  // where no family claims the config, as Qwen3).
  bool has_qk_norm() const;
  int64_t num_key_value_groups() const { return num_attention_heads / num_key_value_heads; }
  // Decoder layer `layer`'s feed-forward block, as the family's fields say
  // (ConfigFamily::feed_forward; dense when the family has no hook).
  FeedForward FeedForwardOf(int64_t layer) const;
  // Whether decoder layer `layer` uses a sparse MoE block (FeedForwardOf(layer).sparse()).
  bool IsMoeLayer(int64_t layer) const;
  // Whether layer_types[layer] is "sliding_attention".
  bool IsSlidingLayer(int64_t layer) const;
  // The window (in positions) of the sliding layers, as the family's fields say
  // (ConfigFamily::sliding_window); nullopt when it has none.
  std::optional<int64_t> SlidingWindow() const;
};

// The class defaults of the config class of `architecture`'s family (transformers'
// Qwen3Config, LlamaConfig, ...); the shared defaults above when no family claims it.
ModelConfig DefaultModelConfig(const ModelArchitecture& architecture);

class JsonFields;  // io/json_fields.h: typed reads of a config's fields

// A model family's share of config.json, provided by the model family registry
// (models/family.h): ParseModelConfig asks it for the config's model_type or class.
struct ConfigFamily {
  ModelArchitecture architecture;
  // head_dim absent: hidden_size / num_attention_heads (else the default stays, as
  // Qwen3Config's 128).
  bool head_dim_from_heads = false;
  // Its models have sparse MoE layers (ModelConfig::is_moe).
  bool sparse_moe = false;
  // Its attention has RMS norms over each head's queries and keys (q_norm, k_norm: 2 * head_dim
  // parameters a layer; ModelConfig::has_qk_norm).
  bool qk_norm = false;
  // The config class's own defaults over the shared ones (and its family_fields' defaults).
  void (*defaults)(ModelConfig& c) = nullptr;
  // Reads the family's own fields (after the shared sizes, before the layer types are derived).
  Status (*parse)(JsonFields& f, ModelConfig& c) = nullptr;
  // Writes them into the config.json object.
  void (*write)(const ModelConfig& c, nlohmann::json& j) = nullptr;
  // Checks them (ValidateModelConfig), messages naming the field.
  Status (*validate)(const ModelConfig& c) = nullptr;
  // Layer `layer`'s feed-forward block (ModelConfig::FeedForwardOf); null: dense everywhere.
  FeedForward (*feed_forward)(const ModelConfig& c, int64_t layer) = nullptr;
  // layer_types when config.json gives none (transformers' rule for the class, from the
  // family's fields); also how writing tells whether to write them. Null: full everywhere.
  std::vector<std::string> (*layer_types)(const ModelConfig& c) = nullptr;
  // The sliding layers' window (ModelConfig::SlidingWindow); null: none, so no layer slides.
  std::optional<int64_t> (*sliding_window)(const ModelConfig& c) = nullptr;
};
// io's registry of them, filled by an explicit call at start-up: models::RegisterModelFamilies()
// (models/family.h) registers every family's part (io sits below models, so it cannot name them
// itself; a registration call rather than static initialisers, which a linker may drop from a
// static library). Registering a model_type again replaces its entry. Parsing a config before
// any registration is refused saying so.
void RegisterConfigFamily(const ConfigFamily& family);
// The family that claims `model_type` (or, when empty, `class_name`); nullptr if none.
const ConfigFamily* FindConfigFamily(std::string_view model_type, std::string_view class_name);
// "llama, qwen3, qwen3_moe": for messages.
std::string KnownConfigFamilies();

// Limits of a config Tlaloc accepts beyond its consistency checks: layers and experts (their
// tensors are listed one by one), and a parameter count whose bytes, at up to 8 per parameter,
// fit in int64 (so no size computed from the config overflows).
inline constexpr int64_t kMaxHiddenLayers = 1 << 16;
inline constexpr int64_t kMaxExperts = 1 << 16;
inline constexpr int64_t kMaxParameters = INT64_MAX / 8;

// Parses config.json text. The architecture comes from "architectures" and/or "model_type"
// (they must agree, and a registered family must claim them; others are refused by name). Wrongly
// typed fields, non-positive sizes, heads not divisible by KV heads, top-k above the expert count
// and the like are refused with a message naming the field. `source` starts every error message.
StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text,
                                       std::string_view source = "config.json");
// Reads `path`, or `path`/config.json when `path` is a folder.
StatusOr<ModelConfig> LoadModelConfig(const std::filesystem::path& path);
// The consistency checks ParseModelConfig applies, for configs built in code.
Status ValidateModelConfig(const ModelConfig& config);
// config.json text (sorted keys, indent 2, as transformers writes it).
std::string ModelConfigToJson(const ModelConfig& config);
Status WriteModelConfig(const std::filesystem::path& path, const ModelConfig& config);

// generation_config.json: sampling defaults shipped with a model.
struct GenerationConfig {
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // an int or a list in JSON
  std::optional<int64_t> pad_token_id;
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;
  double top_p = 1.0;
  std::optional<double> min_p;
  std::optional<int64_t> max_new_tokens;
  int64_t max_length = 20;
  double repetition_penalty = 1.0;
};

// Absent fields take transformers' GenerationConfig defaults.
StatusOr<GenerationConfig> ParseGenerationConfig(
    std::string_view json_text, std::string_view source = "generation_config.json");
// Reads `path`, or `path`/generation_config.json when `path` is a folder.
StatusOr<GenerationConfig> LoadGenerationConfig(const std::filesystem::path& path);
// generation_config.json from `dir` when present, else defaults with the token ids of `model`
// (as transformers' GenerationConfig.from_model_config does).
StatusOr<GenerationConfig> LoadGenerationConfigOrDefault(const std::filesystem::path& dir,
                                                         const ModelConfig& model);
std::string GenerationConfigToJson(const GenerationConfig& config);

// The distinct parameters of a config (a tied head counted once) from its sizes alone, every
// product checked: nullopt when a size or the total overflows int64. ValidateModelConfig bounds
// it; the tensor list itself is the model family's (models::ExpectedTensors).
std::optional<int64_t> CountParameters(const ModelConfig& config);

}  // namespace tlaloc::io
