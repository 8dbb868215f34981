// Llama as a model family: its config.json share (LlamaConfig's defaults, mlp_bias), what Tlaloc
// runs of it, its tensors, its GGUF form, and its registry entry. The decoder is the shared one
// (models/decoder/: the same layer, step programs and training forward as Qwen3's) without the
// q/k norms, over Llama's rotary frequencies.
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>

#include "io/json_fields.h"
#include "models/decoder/decoder.h"
#include "models/decoder/gguf.h"
#include "models/llama/llama_family.h"

namespace tlaloc::models::llama {

namespace {

// transformers' LlamaConfig defaults, where they differ from the shared ones.
void Defaults(ModelConfig& c) {
  c.vocab_size = 32000;
  c.hidden_size = 4096;
  c.intermediate_size = 11008;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 32;
  c.head_dim = c.hidden_size / c.num_attention_heads;
  c.max_position_embeddings = 2048;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.family_fields = LlamaFields{};
}

Status ParseFields(io::JsonFields& f, ModelConfig& c) {
  return f.Bool("mlp_bias", &MutableFields(c).mlp_bias);
}

void WriteFields(const ModelConfig& c, nlohmann::json& j) { j["mlp_bias"] = Fields(c).mlp_bias; }

std::pair<Tensor, Tensor> Rotary(const ModelConfig& c, const Tensor& positions) {
  std::vector<float> inv = InverseFrequencies(c);
  const int64_t half = static_cast<int64_t>(inv.size());
  Tensor inv_freq = Constant(*positions.builder(), Literal::FromVector<float>({half}, inv));
  Tensor angles = ExpandDims(Convert(positions, ElementType::kF32), -1) * inv_freq;
  Tensor emb = Concat({angles, angles}, -1);
  return {Cos(emb), Sin(emb)};
}

const decoder::DecoderKind& LlamaDecoder() {
  static const decoder::DecoderKind kind{"Llama",     "llama", CheckSupported,
                                         WeightSpecs, false,   Rotary};
  return kind;
}

StatusOr<ModelProgram> BuildStep(const ModelConfig& c, const StepShape& shape,
                                 nn::LayerTrace* trace, const ParallelHooks* parallel) {
  return decoder::BuildDecoderStep(LlamaDecoder(), c, shape, trace, parallel);
}

StatusOr<TrainForward> BuildTrainForward(const ModelConfig& c, const WeightTensors& w,
                                         const Tensor& input_ids, const Tensor* positions,
                                         autodiff::Marks* remat, const ParallelHooks* parallel) {
  return decoder::BuildDecoderTrainForward(LlamaDecoder(), c, w, input_ids, positions, remat,
                                           parallel);
}

}  // namespace

std::string ChatTemplate() {
  return "{{- bos_token }}{%- for message in messages %}"
         "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + "
         "message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
         "{%- if add_generation_prompt %}"
         "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";
}

const LlamaFields& Fields(const ModelConfig& c) {
  static const LlamaFields kDefaults;
  const LlamaFields* f = std::any_cast<LlamaFields>(&c.family_fields);
  return f ? *f : kDefaults;
}

LlamaFields& MutableFields(ModelConfig& c) {
  if (!std::any_cast<LlamaFields>(&c.family_fields)) c.family_fields = LlamaFields{};
  return *std::any_cast<LlamaFields>(&c.family_fields);
}

std::vector<float> InverseFrequencies(const ModelConfig& c) {
  const int64_t half = c.head_dim / 2;
  std::vector<float> inv(half);
  for (int64_t i = 0; i < half; ++i) {
    // transformers: 1 / base ** (arange(0, d, 2).float() / d), a float32 power.
    const float expo = static_cast<float>(2 * i) / static_cast<float>(c.head_dim);
    inv[i] = 1.0f / std::pow(static_cast<float>(c.rope_theta), expo);
  }
  if (!c.rope_scaling || c.rope_scaling->rope_type != "llama3") return inv;
  // transformers' _compute_llama3_parameters: long wavelengths slowed by `factor`, short ones
  // kept, the band between blended.
  const RopeScaling& r = *c.rope_scaling;
  const float factor = static_cast<float>(*r.factor);
  const float low = static_cast<float>(*r.low_freq_factor);
  const float high = static_cast<float>(*r.high_freq_factor);
  const float old_len = static_cast<float>(*r.original_max_position_embeddings);
  const float low_wavelen = old_len / low, high_wavelen = old_len / high;
  for (float& f : inv) {
    const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
    const float scaled = wavelen > low_wavelen ? f / factor : f;
    const float smooth = (old_len / wavelen - low) / (high - low);
    const float blended = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    f = medium ? blended : scaled;
  }
  return inv;
}

std::vector<float> RopeFreqDivisors(const ModelConfig& c) {
  // llama.cpp's convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors): 1 for short
  // wavelengths, `factor` for long ones, 1 / blend in the band between, over float32
  // frequencies.
  const RopeScaling& r = *c.rope_scaling;
  const double factor = *r.factor, low = *r.low_freq_factor, high = *r.high_freq_factor;
  const double old_len = static_cast<double>(*r.original_max_position_embeddings);
  const double low_wavelen = old_len / low, high_wavelen = old_len / high;
  std::vector<float> out;
  for (int64_t i = 0; i < c.head_dim / 2; ++i) {
    const float freq = 1.0f / std::pow(static_cast<float>(c.rope_theta),
                                       static_cast<float>(2 * i) / static_cast<float>(c.head_dim));
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_len / wavelen - low) / (high - low);
      out.push_back(static_cast<float>(1 / ((1 - smooth) / factor + smooth)));
    }
  }
  return out;
}

Status CheckSupported(const ModelConfig& c) {
  TL_RETURN_IF_ERROR(io::ValidateModelConfig(c));
  if (c.hidden_act != "silu" && c.hidden_act != "swish")
    return InvalidArgument("config hidden_act \"" + c.hidden_act +
                           "\": Tlaloc's Llama expects silu (or its alias swish)");
  if (c.attention_bias)
    return InvalidArgument(
        "config attention_bias true: Tlaloc's Llama has no attention projection biases");
  if (Fields(c).mlp_bias)
    return InvalidArgument("config mlp_bias true: Tlaloc's Llama has no MLP projection biases");
  if (c.quantization) {
    // tlaloc_int8 (`tlaloc quantize`, an all-Q8_0 GGUF import); a GGUF import's packed formats
    // (Q4_0, Q4_K, Q6_K) are checked against llama.cpp for Qwen3 only so far.
    if (!c.quantization->formats.empty())
      return Unimplemented("config quantization_config " + c.quantization->quant_method +
                           ": Tlaloc's Llama runs int8 checkpoints (tlaloc quantize, all-Q8_0 GGUF "
                           "files) only, not packed GGUF formats yet");
    const int64_t block = c.quantization->group_size;
    for (const auto& [what, width] :
         {std::pair<const char*, int64_t>{"hidden_size", c.hidden_size},
          {"num_attention_heads * head_dim", c.num_attention_heads * c.head_dim},
          {"intermediate_size", c.intermediate_size}})
      if (width % block != 0)
        return InvalidArgument("config quantization_config: " + std::string(what) + " " +
                               std::to_string(width) + " is not a multiple of the int8 block of " +
                               std::to_string(block));
  }
  if (c.rope_scaling) {
    const RopeScaling& r = *c.rope_scaling;
    if (r.rope_type == "llama3") {
      if (!r.factor || !r.low_freq_factor || !r.high_freq_factor ||
          !r.original_max_position_embeddings)
        return InvalidArgument(
            "config rope_scaling type \"llama3\" needs factor, low_freq_factor, high_freq_factor "
            "and original_max_position_embeddings");
      if (!(*r.high_freq_factor > *r.low_freq_factor))
        return InvalidArgument("config rope_scaling: high_freq_factor must exceed low_freq_factor");
    } else if (r.rope_type != "default") {
      return InvalidArgument("config rope_scaling type \"" + r.rope_type +
                             "\": Tlaloc's Llama implements the default and \"llama3\" rotary "
                             "embeddings");
    }
  }
  return OkStatus();
}

std::vector<ExpectedTensor> ExpectedTensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> out;
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, m = c.intermediate_size;
  auto add = [&](std::string name, std::vector<int64_t> shape, bool optional = false) {
    out.push_back({std::move(name), std::move(shape), optional});
  };
  add("model.embed_tokens.weight", {c.vocab_size, h});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    add(l + "input_layernorm.weight", {h});
    add(l + "post_attention_layernorm.weight", {h});
    add(l + "self_attn.q_proj.weight", {q, h});
    add(l + "self_attn.k_proj.weight", {kv, h});
    add(l + "self_attn.v_proj.weight", {kv, h});
    add(l + "self_attn.o_proj.weight", {h, q});
    if (c.attention_bias) {  // what such a checkpoint holds (CheckSupported refuses to run it)
      add(l + "self_attn.q_proj.bias", {q});
      add(l + "self_attn.k_proj.bias", {kv});
      add(l + "self_attn.v_proj.bias", {kv});
      add(l + "self_attn.o_proj.bias", {h});
    }
    add(l + "mlp.gate_proj.weight", {m, h});
    add(l + "mlp.up_proj.weight", {m, h});
    add(l + "mlp.down_proj.weight", {h, m});
  }
  add("model.norm.weight", {h});
  // A tied head shares the embedding; its file may still store a copy.
  add("lm_head.weight", {c.vocab_size, h}, c.tie_word_embeddings);
  return decoder::Int8CheckpointTensors(c, std::move(out));
}

std::vector<WeightSpec> WeightSpecs(const ModelConfig& c) {
  std::vector<WeightSpec> out;
  for (const auto& t : ExpectedTensors(c)) {
    if (t.optional) continue;
    WeightSpec s{t.name, t.shape, {}, t.fixed_type};
    // Untied, the embedding is only gathered by token id; tied, the head reads it whole.
    s.read_by_rows = t.name == "model.embed_tokens.weight" && !c.tie_word_embeddings;
    s.tensor_parallel_dim = decoder::TensorParallelDim(t.name);  // the same projection names
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<GgufExportSummary> ExportGguf(const std::filesystem::path& dir,
                                       const std::filesystem::path& out,
                                       const GgufExportOptions& options) {
  const std::string where = "GGUF export of " + dir.string();
  TL_ASSIGN_OR_RETURN(ModelConfig config, LoadConfig(dir));
  TL_RETURN_IF_ERROR(CheckSupported(config));
  // llama.cpp's `llama` rotates interleaved pairs, so the export reorders q and k rows; an int8
  // matrix's rows (and their scales) are not reordered yet.
  if (config.quantization)
    return Unimplemented(where +
                         ": int8 Llama checkpoints are not exported yet (export the float "
                         "checkpoint, or let llama.cpp quantize it)");
  // llama.cpp takes "llama3" scaling as rope_freqs.weight, the per-frequency divisors of the
  // plain rotary frequencies (CheckSupported admits no other scaling).
  std::vector<io::GgufTensorToWrite> extra;
  if (config.rope_scaling && config.rope_scaling->rope_type == "llama3") {
    const std::vector<float> divisors = RopeFreqDivisors(config);
    extra.push_back({"rope_freqs.weight",
                     Literal::FromVector<float>({static_cast<int64_t>(divisors.size())}, divisors),
                     io::GgmlType::kF32});
  }
  config.rope_scaling.reset();  // the rest is the plain rotary embedding
  decoder::GgufExportHooks hooks;
  hooks.arch = "llama";
  hooks.extra_tensors = std::move(extra);
  return decoder::ExportDecoderGguf(dir, out, options, config, std::move(hooks));
}

std::vector<int64_t> GgufRowOrder(const ModelConfig& c, const std::string& name) {
  // llama.cpp's `llama` rotates interleaved pairs where transformers rotates halves: its
  // converter reorders each head's q and k rows (h, j, i) -> (h, i, j).
  const bool q = name.ends_with(".self_attn.q_proj.weight");
  const bool k = name.ends_with(".self_attn.k_proj.weight");
  if (!q && !k) return {};
  const int64_t heads = q ? c.num_attention_heads : c.num_key_value_heads;
  const int64_t d = c.head_dim, half = d / 2;
  std::vector<int64_t> order(static_cast<size_t>(heads * d));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < half; ++i) order[h * d + i * 2 + j] = h * d + j * half + i;
  return order;
}

void Register(std::vector<ModelFamily>& registry) {
  ModelFamily f;
  // Views of the global kLlama's names (f's own copy moves with f).
  f.model_type = kLlama.model_type;
  f.architecture = kLlama.class_name;
  f.config.architecture = kLlama;
  f.config.head_dim_from_heads = true;
  f.config.defaults = Defaults;
  f.config.parse = ParseFields;
  f.config.write = WriteFields;
  f.embedding_weight = "model.embed_tokens.weight";
  f.check_supported = CheckSupported;
  f.checkpoint_tensors = ExpectedTensors;
  f.weight_specs = WeightSpecs;
  f.build_step = BuildStep;
  f.train_forward = BuildTrainForward;
  f.document_end_token = "<|end_of_text|>";  // Llama 3's; <|eot_id|> ends chat turns
  f.chat_template_jinja = ChatTemplate;
  f.tokenizer_config_json = TokenizerConfigJson;
  f.builtin_tokenizer_json = BuiltinTokenizerJson;
  f.tokenizer_note =
      "Llama 3's tokenizer_config.json and chat template (<|begin_of_text|>, <|eot_id|>)";
  f.export_gguf = ExportGguf;
  f.gguf_architecture = "llama";
  f.gguf_row_order = GgufRowOrder;
  registry.push_back(f);
}

}  // namespace tlaloc::models::llama
