// config.json: the fields model families share, parsed with their config class's defaults;
// checks; writing. The families' own fields are their ConfigFamily's.
#include "tlaloc/io/model_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/io_util.h"
#include "io/json_fields.h"

namespace tlaloc::io {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::string_view kFullAttention = "full_attention";
constexpr std::string_view kSlidingAttention = "sliding_attention";

struct TorchDtype {
  std::string_view name;
  ElementType type;
};
constexpr TorchDtype kTorchDtypes[] = {
    {"float32", ElementType::kF32},   {"float16", ElementType::kF16},
    {"bfloat16", ElementType::kBF16}, {"float64", ElementType::kF64},
    {"float", ElementType::kF32},     {"half", ElementType::kF16},
    {"double", ElementType::kF64},
};

std::string_view TorchDtypeName(ElementType t) {
  for (const auto& d : kTorchDtypes)
    if (d.type == t) return d.name;
  return "";
}

// The family that claims the config's "architectures" and/or "model_type" (the registry the
// model families fill answers; io knows none of them).
StatusOr<const ConfigFamily*> ResolveFamily(JsonFields& f) {
  const ConfigFamily* from_class = nullptr;
  const ConfigFamily* from_type = nullptr;
  if (f.Has("architectures") && !f.IsNull("architectures")) {
    std::vector<std::string> classes;
    TL_RETURN_IF_ERROR(f.StringList("architectures", &classes));
    for (const auto& c : classes) {
      const ConfigFamily* family = FindConfigFamily("", c);
      if (!family)
        return f.Error("architecture \"" + c + "\" is not a model family Tlaloc runs (known: " +
                       KnownConfigFamilies() + ")");
      if (from_class && from_class != family)
        return f.Error("architectures lists both " + from_class->architecture.class_name + " and " +
                       family->architecture.class_name);
      from_class = family;
    }
  } else {
    f.MarkUsed("architectures");
  }
  if (f.Has("model_type")) {
    std::string type;
    TL_RETURN_IF_ERROR(f.String("model_type", &type));
    from_type = FindConfigFamily(type, "");
    if (!from_type)
      return f.Error("model_type \"" + type +
                     "\" is not a model family Tlaloc runs (known: " + KnownConfigFamilies() + ")");
  }
  if (from_class && from_type && from_class != from_type)
    return f.Error("model_type \"" + from_type->architecture.model_type +
                   "\" does not match architecture " + from_class->architecture.class_name);
  if (from_class) return from_class;
  if (from_type) return from_type;
  return f.Error("neither \"architectures\" nor \"model_type\" says which model this is");
}

Status ParseRopeScaling(JsonFields& f, const json& j, const std::string& key,
                        std::optional<RopeScaling>* out) {
  if (j.is_null()) {
    out->reset();
    return OkStatus();
  }
  if (!j.is_object()) return f.WrongType(key, "an object or null");
  RopeScaling r;
  const char* type_key = j.contains("rope_type") ? "rope_type" : "type";
  if (j.contains(type_key)) {
    if (!j[type_key].is_string()) return f.Error(key + "." + type_key + " must be a string");
    r.rope_type = j[type_key].get<std::string>();
  }
  if (j.contains("factor")) {
    if (!j["factor"].is_number() || j["factor"].get<double>() <= 0)
      return f.Error(key + ".factor must be a positive number, got " + DescribeJson(j["factor"]));
    r.factor = j["factor"].get<double>();
  }
  if (j.contains("original_max_position_embeddings")) {
    const json& o = j["original_max_position_embeddings"];
    if (!o.is_number_integer() || o.get<int64_t>() <= 0)
      return f.Error(key + ".original_max_position_embeddings must be a positive integer, got " +
                     DescribeJson(o));
    r.original_max_position_embeddings = o.get<int64_t>();
  }
  for (auto [name, field] : {std::pair{"low_freq_factor", &r.low_freq_factor},
                             std::pair{"high_freq_factor", &r.high_freq_factor}}) {
    if (!j.contains(name)) continue;
    if (!j[name].is_number() || j[name].get<double>() <= 0)
      return f.Error(key + "." + name + " must be a positive number, got " + DescribeJson(j[name]));
    *field = j[name].get<double>();
  }
  r.json = j.dump();
  *out = std::move(r);
  return OkStatus();
}

Status ParseRope(JsonFields& f, ModelConfig& c) {
  bool has_theta = f.Has("rope_theta");
  TL_RETURN_IF_ERROR(f.Double("rope_theta", &c.rope_theta));
  if (f.Has("rope_scaling"))
    TL_RETURN_IF_ERROR(ParseRopeScaling(f, f.Raw("rope_scaling"), "rope_scaling", &c.rope_scaling));
  // Newer transformers folds both into rope_parameters {"rope_type", "rope_theta", ...}.
  if (f.Has("rope_parameters") && !f.IsNull("rope_parameters")) {
    json p = f.Raw("rope_parameters");
    if (!p.is_object()) return f.WrongType("rope_parameters", "an object or null");
    if (p.contains("rope_theta")) {
      if (!p["rope_theta"].is_number())
        return f.Error("rope_parameters.rope_theta must be a number, got " +
                       DescribeJson(p["rope_theta"]));
      double theta = p["rope_theta"].get<double>();
      if (has_theta && theta != c.rope_theta)
        return f.Error("rope_theta and rope_parameters.rope_theta disagree");
      c.rope_theta = theta;
      p.erase("rope_theta");
    }
    if (p.contains("rope_type") && !p["rope_type"].is_string())
      return f.Error("rope_parameters.rope_type must be a string, got " +
                     DescribeJson(p["rope_type"]));
    std::string type = p.value("rope_type", std::string("default"));
    if (type != "default") {
      if (c.rope_scaling) return f.Error("both rope_scaling and rope_parameters set a rope type");
      TL_RETURN_IF_ERROR(ParseRopeScaling(f, p, "rope_parameters", &c.rope_scaling));
    }
  } else if (f.Has("rope_parameters")) {
    f.MarkUsed("rope_parameters");
  }
  return OkStatus();
}

Status ParseDtype(JsonFields& f, ModelConfig& c) {
  std::optional<ElementType> found;
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!f.Has(key)) continue;
    if (f.IsNull(key)) {
      f.MarkUsed(key);
      continue;
    }
    std::string name;
    TL_RETURN_IF_ERROR(f.String(key, &name));
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
    auto it = std::find_if(std::begin(kTorchDtypes), std::end(kTorchDtypes),
                           [&](const TorchDtype& d) { return d.name == name; });
    if (it == std::end(kTorchDtypes))
      return f.Error(std::string(key) + " \"" + name +
                     "\" is not supported (expected float32, bfloat16, float16 or float64)");
    if (found && *found != it->type) return f.Error("torch_dtype and dtype disagree");
    found = it->type;
  }
  c.dtype = found;
  return OkStatus();
}

Status ParseQuantization(JsonFields& f, ModelConfig& c) {
  const std::string key = "quantization_config";
  if (!f.Has(key)) return OkStatus();
  if (f.IsNull(key)) {
    f.MarkUsed(key);
    return OkStatus();
  }
  const json& q = f.Raw(key);
  if (!q.is_object()) return f.WrongType(key, "an object or null");
  WeightQuantization w;
  if (!q.contains("quant_method") || !q["quant_method"].is_string())
    return f.Error(key + ".quant_method must be a string");
  w.quant_method = q["quant_method"].get<std::string>();
  if (w.quant_method == kTlalocGgufQuantMethod) {
    if (!q.contains("formats") || !q["formats"].is_object())
      return f.Error(key + ".formats must be an object (tensor name -> one of " +
                     KnownQuantFormats() + ")");
    for (const auto& [name, v] : q["formats"].items()) {
      const std::string fmt = v.is_string() ? v.get<std::string>() : "";
      if (!FindQuantFormat(fmt))
        return f.Error(key + ".formats[\"" + name + "\"] must be one of " + KnownQuantFormats() +
                       ", got " + DescribeJson(v));
      w.formats[name] = fmt;
    }
    w.bits = 4;
    c.quantization = w;
    return OkStatus();
  }
  if (w.quant_method != kTlalocInt8QuantMethod)
    return f.Error(key + ".quant_method \"" + w.quant_method +
                   "\" is not supported (Tlaloc runs \"" + std::string(kTlalocInt8QuantMethod) +
                   "\", written by tlaloc quantize)");
  for (const auto& [name, want] :
       {std::pair<const char*, int64_t>{"bits", 8},
        std::pair<const char*, int64_t>{"group_size", kQ8_0BlockElements}}) {
    if (!q.contains(name)) continue;
    const json& v = q[name];
    if (!v.is_number_integer() || v.get<int64_t>() != want)
      return f.Error(key + "." + name + " must be " + std::to_string(want) + " for " +
                     std::string(kTlalocInt8QuantMethod) + ", got " + DescribeJson(v));
  }
  c.quantization = w;
  return OkStatus();
}

const ConfigFamily* FamilyOfConfig(const ModelConfig& c) {
  return FindConfigFamily(c.architecture.model_type, "");
}

// layer_types when config.json gives none: the family's rule over its own fields (Qwen3's
// sliding window), full attention everywhere without one.
std::vector<std::string> DerivedLayerTypes(const ModelConfig& c) {
  const ConfigFamily* family = FamilyOfConfig(c);
  if (family && family->layer_types) return family->layer_types(c);
  return std::vector<std::string>(static_cast<size_t>(std::max<int64_t>(c.num_hidden_layers, 0)),
                                  std::string(kFullAttention));
}

Status Positive(const char* name, int64_t v) {
  if (v <= 0)
    return InvalidArgument(std::string(name) + " must be positive, got " + std::to_string(v));
  return OkStatus();
}

}  // namespace

std::string_view ArchitectureClassName(const ModelArchitecture& a) { return a.class_name; }

std::string_view ArchitectureModelType(const ModelArchitecture& a) { return a.model_type; }

bool ModelConfig::is_moe() const {
  const ConfigFamily* family = FamilyOfConfig(*this);
  return family != nullptr && family->sparse_moe;
}

bool ModelConfig::has_qk_norm() const {
  const ConfigFamily* family = FamilyOfConfig(*this);
  return family == nullptr || family->qk_norm;
}

FeedForward ModelConfig::FeedForwardOf(int64_t layer) const {
  const ConfigFamily* family = FamilyOfConfig(*this);
  return family && family->feed_forward ? family->feed_forward(*this, layer) : FeedForward{};
}

std::optional<int64_t> ModelConfig::SlidingWindow() const {
  const ConfigFamily* family = FamilyOfConfig(*this);
  return family && family->sliding_window ? family->sliding_window(*this) : std::nullopt;
}

bool ModelConfig::IsMoeLayer(int64_t layer) const { return FeedForwardOf(layer).sparse(); }

bool ModelConfig::IsSlidingLayer(int64_t layer) const {
  return layer >= 0 && static_cast<size_t>(layer) < layer_types.size() &&
         layer_types[layer] == kSlidingAttention;
}

ModelConfig DefaultModelConfig(const ModelArchitecture& architecture) {
  ModelConfig c;
  c.architecture = architecture;
  const ConfigFamily* family =
      FindConfigFamily(architecture.model_type, architecture.model_type.empty()
                                                    ? std::string_view(architecture.class_name)
                                                    : std::string_view());
  if (family) {
    c.architecture = family->architecture;  // both names, when given one
    if (family->defaults) family->defaults(c);
  }
  c.layer_types = DerivedLayerTypes(c);
  return c;
}

// Counts that bound how many tensors (and layer types) a config lists.
static Status CheckCounts(const ModelConfig& c) {
  if (c.num_hidden_layers > kMaxHiddenLayers)
    return InvalidArgument("num_hidden_layers " + std::to_string(c.num_hidden_layers) +
                           " is more than Tlaloc supports (" + std::to_string(kMaxHiddenLayers) +
                           ")");
  return OkStatus();
}

Status ValidateModelConfig(const ModelConfig& c) {
  TL_RETURN_IF_ERROR(CheckCounts(c));
  TL_RETURN_IF_ERROR(Positive("vocab_size", c.vocab_size));
  TL_RETURN_IF_ERROR(Positive("hidden_size", c.hidden_size));
  TL_RETURN_IF_ERROR(Positive("intermediate_size", c.intermediate_size));
  TL_RETURN_IF_ERROR(Positive("num_hidden_layers", c.num_hidden_layers));
  TL_RETURN_IF_ERROR(Positive("num_attention_heads", c.num_attention_heads));
  TL_RETURN_IF_ERROR(Positive("num_key_value_heads", c.num_key_value_heads));
  TL_RETURN_IF_ERROR(Positive("head_dim", c.head_dim));
  TL_RETURN_IF_ERROR(Positive("max_position_embeddings", c.max_position_embeddings));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return InvalidArgument("num_attention_heads (" + std::to_string(c.num_attention_heads) +
                           ") must be a multiple of num_key_value_heads (" +
                           std::to_string(c.num_key_value_heads) + ")");
  if (c.head_dim % 2 != 0)
    return InvalidArgument("head_dim must be even (rotary embedding rotates halves), got " +
                           std::to_string(c.head_dim));
  if (c.hidden_act != "silu" && c.hidden_act != "swish")
    return InvalidArgument("hidden_act \"" + c.hidden_act + "\" is not supported (expected silu)");
  if (!(c.rms_norm_eps > 0)) return InvalidArgument("rms_norm_eps must be positive");
  if (!(c.rope_theta > 0)) return InvalidArgument("rope_theta must be positive");
  if (!(c.attention_dropout >= 0 && c.attention_dropout < 1))
    return InvalidArgument("attention_dropout must be in [0, 1)");
  if (c.layer_types.size() != static_cast<size_t>(c.num_hidden_layers))
    return InvalidArgument("layer_types has " + std::to_string(c.layer_types.size()) +
                           " entries for " + std::to_string(c.num_hidden_layers) + " layers");
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    if (c.layer_types[i] != kFullAttention && c.layer_types[i] != kSlidingAttention)
      return InvalidArgument("layer_types[" + std::to_string(i) + "] \"" + c.layer_types[i] +
                             "\" is not full_attention or sliding_attention");
    if (c.layer_types[i] == kSlidingAttention && !c.SlidingWindow())
      return InvalidArgument("layer_types[" + std::to_string(i) +
                             "] is sliding_attention but no sliding_window is set");
  }
  if (c.bos_token_id && *c.bos_token_id < 0) return InvalidArgument("bos_token_id is negative");
  if (c.pad_token_id && *c.pad_token_id < 0) return InvalidArgument("pad_token_id is negative");
  for (int64_t id : c.eos_token_ids)
    if (id < 0) return InvalidArgument("eos_token_id " + std::to_string(id) + " is negative");
  const ConfigFamily* family = FamilyOfConfig(c);
  if (family && family->validate) TL_RETURN_IF_ERROR(family->validate(c));
  // Sizes from a file: every product of them must fit, or shapes and byte counts overflow.
  std::optional<int64_t> params = CountParameters(c);
  if (!params || *params > kMaxParameters)
    return InvalidArgument("the sizes (vocab_size " + std::to_string(c.vocab_size) +
                           ", hidden_size " + std::to_string(c.hidden_size) +
                           ", heads x head_dim, intermediate sizes, layers, experts) " + "give " +
                           (params ? std::to_string(*params) : std::string("more than 2^63")) +
                           " parameters, more than Tlaloc supports (" +
                           std::to_string(kMaxParameters) + ")");
  return OkStatus();
}

StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, std::string_view source) {
  const std::string src(source);
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return InvalidArgument(src + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return InvalidArgument(src + ": must be a JSON object");
  JsonFields f(root, src);
  TL_ASSIGN_OR_RETURN(const ConfigFamily* family, ResolveFamily(f));
  ModelConfig c = DefaultModelConfig(family->architecture);
  TL_RETURN_IF_ERROR(f.Int("vocab_size", &c.vocab_size));
  TL_RETURN_IF_ERROR(f.Int("hidden_size", &c.hidden_size));
  TL_RETURN_IF_ERROR(f.Int("intermediate_size", &c.intermediate_size));
  TL_RETURN_IF_ERROR(f.Int("num_hidden_layers", &c.num_hidden_layers));
  TL_RETURN_IF_ERROR(f.Int("num_attention_heads", &c.num_attention_heads));
  std::optional<int64_t> kv = c.num_key_value_heads;
  TL_RETURN_IF_ERROR(f.OptionalInt("num_key_value_heads", &kv));
  c.num_key_value_heads = kv.value_or(c.num_attention_heads);  // null: as many as query heads
  // Qwen3Config defaults head_dim to 128; Qwen3MoeConfig and LlamaConfig have none, and the
  // model then uses hidden_size / num_attention_heads.
  std::optional<int64_t> head_dim;
  TL_RETURN_IF_ERROR(f.OptionalInt("head_dim", &head_dim));
  if (head_dim) {
    c.head_dim = *head_dim;
  } else if (family->head_dim_from_heads || f.IsNull("head_dim")) {
    if (c.num_attention_heads <= 0 || c.hidden_size % c.num_attention_heads != 0)
      return f.Error("head_dim is absent and hidden_size (" + std::to_string(c.hidden_size) +
                     ") is not a multiple of num_attention_heads (" +
                     std::to_string(c.num_attention_heads) + ")");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  TL_RETURN_IF_ERROR(f.String("hidden_act", &c.hidden_act));
  TL_RETURN_IF_ERROR(f.Int("max_position_embeddings", &c.max_position_embeddings));
  TL_RETURN_IF_ERROR(f.Double("initializer_range", &c.initializer_range));
  TL_RETURN_IF_ERROR(f.Double("rms_norm_eps", &c.rms_norm_eps));
  TL_RETURN_IF_ERROR(f.Bool("use_cache", &c.use_cache));
  TL_RETURN_IF_ERROR(f.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  TL_RETURN_IF_ERROR(ParseRope(f, c));
  TL_RETURN_IF_ERROR(f.Bool("attention_bias", &c.attention_bias));
  // The family's own fields (Qwen3's sliding window, Qwen3-MoE's experts, Llama's mlp_bias).
  if (family->parse) TL_RETURN_IF_ERROR(family->parse(f, c));
  // Before the layer types are derived (one per layer).
  if (Status counts = CheckCounts(c); !counts.ok()) return f.Error(counts.message());
  c.layer_types.clear();
  TL_RETURN_IF_ERROR(f.StringList("layer_types", &c.layer_types));
  if (!f.Has("layer_types") || f.IsNull("layer_types")) c.layer_types = DerivedLayerTypes(c);
  TL_RETURN_IF_ERROR(f.Double("attention_dropout", &c.attention_dropout));
  TL_RETURN_IF_ERROR(ParseDtype(f, c));
  TL_RETURN_IF_ERROR(ParseQuantization(f, c));
  TL_RETURN_IF_ERROR(f.OptionalInt("bos_token_id", &c.bos_token_id));
  TL_RETURN_IF_ERROR(f.IntOrIntList("eos_token_id", &c.eos_token_ids));
  TL_RETURN_IF_ERROR(f.OptionalInt("pad_token_id", &c.pad_token_id));
  c.extra_json = f.Unused().dump();

  Status valid = ValidateModelConfig(c);
  if (!valid.ok()) return InvalidArgument(src + ": " + valid.message());
  return c;
}

StatusOr<ModelConfig> LoadModelConfig(const fs::path& path) {
  fs::path file = fs::is_directory(path) ? path / "config.json" : path;
  TL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
  return ParseModelConfig(text, file.string());
}

std::string ModelConfigToJson(const ModelConfig& c) {
  json j = json::parse(c.extra_json.empty() ? "{}" : c.extra_json, nullptr, false);
  if (!j.is_object()) j = json::object();
  j["architectures"] = {std::string(ArchitectureClassName(c.architecture))};
  j["model_type"] = std::string(ArchitectureModelType(c.architecture));
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = c.hidden_act;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["initializer_range"] = c.initializer_range;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["use_cache"] = c.use_cache;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["rope_theta"] = c.rope_theta;
  j["rope_scaling"] = c.rope_scaling ? json::parse(c.rope_scaling->json, nullptr, false) : json();
  j["attention_bias"] = c.attention_bias;
  // Written only when they differ from what the other fields imply, so a hand edit of
  // num_hidden_layers keeps the file consistent.
  if (c.layer_types != DerivedLayerTypes(c)) j["layer_types"] = c.layer_types;
  j["attention_dropout"] = c.attention_dropout;
  const ConfigFamily* family = FamilyOfConfig(c);
  if (family && family->write) family->write(c, j);
  if (c.dtype) j["torch_dtype"] = std::string(TorchDtypeName(*c.dtype));
  j["bos_token_id"] = c.bos_token_id ? json(*c.bos_token_id) : json();
  if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids[0];
  else
    j["eos_token_id"] = c.eos_token_ids.empty() ? json() : json(c.eos_token_ids);
  j["pad_token_id"] = c.pad_token_id ? json(*c.pad_token_id) : json();
  if (c.quantization && c.quantization->quant_method == kTlalocGgufQuantMethod) {
    json formats = json::object();
    for (const auto& [name, fmt] : c.quantization->formats) formats[name] = fmt;
    j["quantization_config"] = {{"quant_method", c.quantization->quant_method},
                                {"group_size", c.quantization->group_size},
                                {"formats", formats}};
  } else if (c.quantization)
    j["quantization_config"] = {{"quant_method", c.quantization->quant_method},
                                {"bits", c.quantization->bits},
                                {"group_size", c.quantization->group_size},
                                {"scale_dtype", "float16"},
                                {"format", "gguf_q8_0_blocks"}};
  return j.dump(2) + "\n";
}

Status WriteModelConfig(const fs::path& path, const ModelConfig& config) {
  Status valid = ValidateModelConfig(config);
  if (!valid.ok()) return InvalidArgument(path.string() + ": " + valid.message());
  fs::path file = fs::is_directory(path) ? path / "config.json" : path;
  return WriteStringAtomically(file, ModelConfigToJson(config));
}

}  // namespace tlaloc::io
