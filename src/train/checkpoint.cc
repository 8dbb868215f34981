// Fine-tuned model folders and resumable training state (see checkpoint.h).
#include "tlaloc/train/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tlaloc/generate/generator.h"
#include "tlaloc/io/safetensors.h"
#include "tlaloc/models/init.h"
#include "tlaloc/models/qwen3.h"

namespace tlaloc::train {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// chat_template.jinja is where newer transformers keep the chat template (instead of
// tokenizer_config.json); without it a fine-tuned model's GGUF export has no chat template.
constexpr const char* kTokenizerFiles[] = {
    "tokenizer_config.json",   "vocab.json",        "merges.txt",
    "special_tokens_map.json", "added_tokens.json", "chat_template.jinja"};
constexpr std::string_view kMasterPrefix = "master.";

Status CheckWeightCount(const io::ModelConfig& config, size_t count) {
  const size_t expected = models::WeightSpecs(config).size();
  if (count != expected)
    return InvalidArgument("expected " + std::to_string(expected) +
                           " weights for this config, got " + std::to_string(count));
  return OkStatus();
}

}  // namespace

Status SaveModelFolder(const fs::path& out, const fs::path& source_dir,
                       const io::ModelConfig& config_in, std::span<const Literal> weights,
                       ElementType dtype) {
  TL_RETURN_IF_ERROR(CheckWeightCount(config_in, weights.size()));
  io::ModelConfig config = config_in;
  config.dtype = dtype;
  std::vector<io::NamedTensor> tensors;
  const auto specs = models::WeightSpecs(config);
  for (size_t i = 0; i < specs.size(); ++i)
    tensors.push_back({specs[i].name, generate::ConvertLiteral(weights[i], dtype)});
  TL_ASSIGN_OR_RETURN(io::GenerationConfig generation,
                      io::LoadGenerationConfigOrDefault(source_dir, config));
  std::error_code ec;
  // Writing over the source folder (a resumed run saving in place) keeps its tokenizer files.
  const bool in_place = fs::exists(out, ec) && fs::equivalent(out, source_dir, ec);
  const fs::path tokenizer = source_dir / "tokenizer.json";
  TL_RETURN_IF_ERROR(
      models::WriteModelFolder(config, out, tensors, generation,
                               !in_place && fs::exists(tokenizer, ec) ? tokenizer : fs::path()));
  for (const char* name : kTokenizerFiles) {
    if (in_place || !fs::exists(source_dir / name, ec)) continue;
    fs::copy_file(source_dir / name, out / name, fs::copy_options::overwrite_existing, ec);
    if (ec)
      return InvalidArgument("cannot copy " + (source_dir / name).string() + ": " + ec.message());
  }
  return OkStatus();
}

Status SaveTrainingState(const fs::path& dir, const io::ModelConfig& config,
                         const NamedLiterals& optimizer_state,
                         std::span<const Literal> master_weights, const TrainerState& state) {
  TL_RETURN_IF_ERROR(CheckWeightCount(config, master_weights.size()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return InvalidArgument("cannot create " + dir.string() + ": " + ec.message());
  std::vector<io::NamedTensor> tensors;
  for (const auto& [name, value] : optimizer_state) tensors.push_back({name, value});
  const auto specs = models::WeightSpecs(config);
  for (size_t i = 0; i < specs.size(); ++i)
    tensors.push_back({std::string(kMasterPrefix) + specs[i].name,
                       generate::ConvertLiteral(master_weights[i], ElementType::kF32)});
  TL_RETURN_IF_ERROR(io::WriteSafetensors(dir / kOptimizerFile, tensors));
  json j = {{"step", state.step},
            {"seed", state.seed},
            {"batch", state.batch},
            {"seq_len", state.seq_len},
            {"lr", state.lr},
            {"warmup_steps", state.warmup_steps},
            {"total_steps", state.total_steps},
            {"weight_decay", state.weight_decay},
            {"grad_clip_norm", state.grad_clip_norm},
            {"source_model", state.source_model},
            {"data", state.data},
            {"optimizer_order", json::array()}};
  for (const auto& entry : optimizer_state) j["optimizer_order"].push_back(entry.first);
  std::ofstream f(dir / kTrainerStateFile);
  f << j.dump(2) << "\n";
  if (!f) return InvalidArgument("cannot write " + (dir / kTrainerStateFile).string());
  return OkStatus();
}

StatusOr<LoadedTrainingState> LoadTrainingState(const fs::path& dir,
                                                const io::ModelConfig& config) {
  const fs::path state_path = dir / kTrainerStateFile;
  std::ifstream in(state_path);
  if (!in)
    return NotFound("cannot resume from " + dir.string() + ": no " +
                    std::string(kTrainerStateFile) + " (written by tlaloc finetune)");
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return InvalidArgument(state_path.string() + ": not a JSON object");
  LoadedTrainingState out;
  TrainerState& s = out.state;
  try {
    s.step = j.at("step").get<int64_t>();
    s.seed = j.at("seed").get<uint64_t>();
    s.batch = j.at("batch").get<int64_t>();
    s.seq_len = j.at("seq_len").get<int64_t>();
    s.lr = j.value("lr", 0.0);
    s.warmup_steps = j.value("warmup_steps", int64_t{0});
    s.total_steps = j.value("total_steps", int64_t{0});
    s.weight_decay = j.value("weight_decay", 0.0);
    s.grad_clip_norm = j.value("grad_clip_norm", 0.0);
    s.source_model = j.value("source_model", std::string());
    s.data = j.value("data", std::string());
  } catch (const json::exception& e) {
    return InvalidArgument(state_path.string() + ": " + e.what() +
                           " (expected integer step, seed, batch and seq_len)");
  }
  TL_ASSIGN_OR_RETURN(auto file, io::SafetensorsFile::Open(dir / kOptimizerFile));
  for (const auto& info : file->tensors()) {
    if (info.name.rfind(kMasterPrefix, 0) == 0) continue;
    // A copy, so the trainer may update it in place without touching the mapping.
    out.optimizer_state.emplace_back(info.name, file->Load(info).Clone());
  }
  for (const auto& spec : models::WeightSpecs(config)) {
    const std::string name = std::string(kMasterPrefix) + spec.name;
    const io::SafetensorsTensorInfo* info = file->Find(name);
    if (!info)
      return NotFound((dir / kOptimizerFile).string() + " lacks \"" + name +
                      "\": it was saved for another model");
    if (info->shape != spec.shape)
      return InvalidArgument((dir / kOptimizerFile).string() + ": \"" + name +
                             "\" has another shape than this model's weight");
    out.master_weights.push_back(file->Load(*info).Clone());
  }
  // The file keeps tensors sorted by name; the trainer gets them back in the order it gave.
  if (!j.contains("optimizer_order") || !j["optimizer_order"].is_array())
    return InvalidArgument(state_path.string() + ": lacks the \"optimizer_order\" name list");
  NamedLiterals ordered;
  for (const json& name_json : j["optimizer_order"]) {
    const std::string name = name_json.is_string() ? name_json.get<std::string>() : "";
    auto it = std::find_if(out.optimizer_state.begin(), out.optimizer_state.end(),
                           [&](const auto& entry) { return entry.first == name; });
    if (it == out.optimizer_state.end())
      return NotFound((dir / kOptimizerFile).string() + " lacks optimizer tensor \"" + name +
                      "\" listed in " + state_path.string());
    ordered.push_back(*it);
  }
  out.optimizer_state = std::move(ordered);
  return out;
}

}  // namespace tlaloc::train
