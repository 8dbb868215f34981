// generation_config.json: sampling defaults shipped with a model.
#include <nlohmann/json.hpp>

#include "io/io_util.h"
#include "io/json_fields.h"
#include "tlaloc/io/model_config.h"

namespace tlaloc::io {

namespace fs = std::filesystem;
using nlohmann::json;

StatusOr<GenerationConfig> ParseGenerationConfig(std::string_view json_text,
                                                 std::string_view source) {
  const std::string src(source);
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return InvalidArgument(src + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return InvalidArgument(src + ": must be a JSON object");
  JsonFields f(root, src);
  GenerationConfig g;
  TL_RETURN_IF_ERROR(f.OptionalInt("bos_token_id", &g.bos_token_id));
  TL_RETURN_IF_ERROR(f.IntOrIntList("eos_token_id", &g.eos_token_ids));
  TL_RETURN_IF_ERROR(f.OptionalInt("pad_token_id", &g.pad_token_id));
  TL_RETURN_IF_ERROR(f.Bool("do_sample", &g.do_sample));
  TL_RETURN_IF_ERROR(f.Double("temperature", &g.temperature));
  // transformers treats top_k null as "no top-k", i.e. 0 here.
  std::optional<int64_t> top_k = g.top_k;
  TL_RETURN_IF_ERROR(f.OptionalInt("top_k", &top_k));
  g.top_k = top_k.value_or(0);
  std::optional<double> top_p = g.top_p;
  TL_RETURN_IF_ERROR(f.OptionalDouble("top_p", &top_p));
  g.top_p = top_p.value_or(1.0);
  TL_RETURN_IF_ERROR(f.OptionalDouble("min_p", &g.min_p));
  TL_RETURN_IF_ERROR(f.OptionalInt("max_new_tokens", &g.max_new_tokens));
  TL_RETURN_IF_ERROR(f.Int("max_length", &g.max_length));
  TL_RETURN_IF_ERROR(f.Double("repetition_penalty", &g.repetition_penalty));

  if (g.bos_token_id && *g.bos_token_id < 0) return f.Error("bos_token_id is negative");
  if (g.pad_token_id && *g.pad_token_id < 0) return f.Error("pad_token_id is negative");
  for (int64_t id : g.eos_token_ids)
    if (id < 0) return f.Error("eos_token_id " + std::to_string(id) + " is negative");
  if (g.temperature < 0) return f.Error("temperature must not be negative");
  if (g.top_k < 0) return f.Error("top_k must not be negative");
  if (!(g.top_p > 0 && g.top_p <= 1)) return f.Error("top_p must be in (0, 1]");
  if (g.min_p && !(*g.min_p >= 0 && *g.min_p <= 1)) return f.Error("min_p must be in [0, 1]");
  if (g.max_new_tokens && *g.max_new_tokens <= 0) return f.Error("max_new_tokens must be positive");
  if (g.max_length <= 0) return f.Error("max_length must be positive");
  if (!(g.repetition_penalty > 0)) return f.Error("repetition_penalty must be positive");
  return g;
}

StatusOr<GenerationConfig> LoadGenerationConfig(const fs::path& path) {
  fs::path file = fs::is_directory(path) ? path / "generation_config.json" : path;
  TL_ASSIGN_OR_RETURN(std::string text, ReadFileToString(file));
  return ParseGenerationConfig(text, file.string());
}

StatusOr<GenerationConfig> LoadGenerationConfigOrDefault(const fs::path& dir,
                                                         const ModelConfig& model) {
  if (fs::exists(dir / "generation_config.json")) return LoadGenerationConfig(dir);
  GenerationConfig g;
  g.bos_token_id = model.bos_token_id;
  g.eos_token_ids = model.eos_token_ids;
  g.pad_token_id = model.pad_token_id;
  return g;
}

std::string GenerationConfigToJson(const GenerationConfig& g) {
  json j = json::object();
  if (g.bos_token_id) j["bos_token_id"] = *g.bos_token_id;
  if (g.eos_token_ids.size() == 1) j["eos_token_id"] = g.eos_token_ids[0];
  if (g.eos_token_ids.size() > 1) j["eos_token_id"] = g.eos_token_ids;
  if (g.pad_token_id) j["pad_token_id"] = *g.pad_token_id;
  j["do_sample"] = g.do_sample;
  j["temperature"] = g.temperature;
  j["top_k"] = g.top_k;
  j["top_p"] = g.top_p;
  if (g.min_p) j["min_p"] = *g.min_p;
  if (g.max_new_tokens) j["max_new_tokens"] = *g.max_new_tokens;
  j["max_length"] = g.max_length;
  j["repetition_penalty"] = g.repetition_penalty;
  return j.dump(2) + "\n";
}

}  // namespace tlaloc::io
