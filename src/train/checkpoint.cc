// Fine-tuned model folders and resumable training state (see checkpoint.h).
#include "tlaloc/train/checkpoint.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tlaloc/io/safetensors.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/support/atomic_file.h"

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
    tensors.push_back({specs[i].name, ConvertElementType(weights[i], dtype)});
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
    TL_RETURN_IF_ERROR(CopyFileAtomic(source_dir / name, out / name));
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
                       ConvertElementType(master_weights[i], ElementType::kF32)});
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
            {"out", state.out},
            {"run_steps", state.run_steps},
            {"save_every", state.save_every},
            {"keep_last", state.keep_last},
            {"remat", state.remat},
            {"mesh", state.mesh},
            {"plan", state.plan},
            {"optimizer_order", json::array()}};
  for (const auto& entry : optimizer_state) j["optimizer_order"].push_back(entry.first);
  // Written last: it marks the folder's save complete.
  return WriteStringAtomic(dir / kTrainerStateFile, j.dump(2) + "\n");
}

namespace {

// N of a "checkpoint-N" folder name, or -1.
int64_t CheckpointStep(const std::string& name) {
  constexpr std::string_view kPrefix = "checkpoint-";
  if (name.rfind(kPrefix, 0) != 0 || name.size() == kPrefix.size() || name.size() > 30) return -1;
  int64_t step = 0;
  for (char c : name.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return -1;
    step = step * 10 + (c - '0');
  }
  return step;
}

// The checkpoint-N folders of `dir`, oldest first.
std::vector<std::pair<int64_t, fs::path>> CheckpointFolders(const fs::path& dir) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const int64_t step = CheckpointStep(e.path().filename().string());
    if (step >= 0 && e.is_directory(ec)) out.emplace_back(step, e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The step in dir/trainer_state.json, or -1 when there is none that reads.
int64_t SavedStep(const fs::path& dir) {
  std::ifstream in(dir / kTrainerStateFile);
  if (!in) return -1;
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return -1;
  return j["step"].get<int64_t>();
}

// Removes a folder so that it is never seen half-removed: renamed to a temporary name first
// (ClearStaleSaves removes what a kill leaves of it), then deleted.
Status RemoveAll(const fs::path& path) {
  const fs::path doomed = TemporarySibling(path);
  TL_RETURN_IF_ERROR(RenameDurably(path, doomed));
  std::error_code ec;
  fs::remove_all(doomed, ec);
  if (ec) return InvalidArgument("cannot remove " + doomed.string() + ": " + ec.message());
  return OkStatus();
}

bool IsModelWeightsFile(const std::string& name) {
  return name == "model.safetensors.index.json" ||
         (name.rfind("model", 0) == 0 && name.size() > 12 &&
          name.compare(name.size() - 12, 12, ".safetensors") == 0);
}

// Puts checkpoint's files into out_dir (see checkpoint.h): trainer_state.json out first, in last.
Status Publish(const fs::path& checkpoint, const fs::path& out_dir) {
  std::error_code ec;
  fs::remove(out_dir / kTrainerStateFile, ec);
  if (ec) return InvalidArgument("cannot remove " + (out_dir / kTrainerStateFile).string());
  TL_RETURN_IF_ERROR(SyncDirectory(out_dir));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(checkpoint, ec))
    if (e.is_regular_file(ec)) names.push_back(e.path().filename().string());
  if (ec) return InvalidArgument("cannot list " + checkpoint.string() + ": " + ec.message());
  // Weight files of an earlier save that this one has not (a sharded save before) would mix in.
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (IsModelWeightsFile(name) && std::find(names.begin(), names.end(), name) == names.end())
      fs::remove(e.path(), ec);
  }
  std::stable_partition(names.begin(), names.end(),
                        [](const std::string& n) { return n != kTrainerStateFile; });
  for (const std::string& name : names) {
    const fs::path target = out_dir / name, tmp = TemporarySibling(target);
    // A hard link costs no space or copying; a file system without links gets a copy.
    fs::create_hard_link(checkpoint / name, tmp, ec);
    if (ec) {
      TL_RETURN_IF_ERROR(CopyFileAtomic(checkpoint / name, target));
      continue;
    }
    if (Status s = RenameDurably(tmp, target); !s.ok()) {
      fs::remove(tmp, ec);
      return s;
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<fs::path> SaveCheckpoint(const fs::path& out_dir, const fs::path& source_dir,
                                  const io::ModelConfig& config, std::span<const Literal> weights,
                                  ElementType dtype, const NamedLiterals& optimizer_state,
                                  const TrainerState& state, int64_t keep_last) {
  const fs::path final_dir = out_dir / ("checkpoint-" + std::to_string(state.step));
  const fs::path staging = TemporarySibling(final_dir);
  Status status = SaveModelFolder(staging, source_dir, config, weights, dtype);
  if (status.ok()) status = SaveTrainingState(staging, config, optimizer_state, weights, state);
  if (status.ok()) status = SyncDirectory(staging);
  // The same step saved again (a stop right after a periodic save) replaces the folder.
  std::error_code ec;
  if (status.ok() && fs::exists(final_dir, ec)) status = RemoveAll(final_dir);
  if (status.ok()) status = RenameDurably(staging, final_dir);
  if (!status.ok()) {
    fs::remove_all(staging, ec);
    return status.WithContext("saving step " + std::to_string(state.step) + " into " +
                              final_dir.string());
  }
  TL_RETURN_IF_ERROR(Publish(final_dir, out_dir));
  if (keep_last > 0) {
    auto folders = CheckpointFolders(out_dir);
    for (size_t i = 0; i + static_cast<size_t>(keep_last) < folders.size(); ++i)
      if (folders[i].second != final_dir) TL_RETURN_IF_ERROR(RemoveAll(folders[i].second));
  }
  return final_dir;
}

StatusOr<SavePoint> FindNewestSave(const fs::path& dir) {
  SavePoint best{fs::path(), -1};
  for (const auto& [name_step, folder] : CheckpointFolders(dir)) {
    const int64_t step = SavedStep(folder);
    if (step >= 0 && step >= best.step) best = {folder, step};
  }
  if (const int64_t step = SavedStep(dir); step > best.step) best = {dir, step};
  if (best.step < 0)
    return NotFound("cannot resume from " + dir.string() + ": no " +
                    std::string(kTrainerStateFile) + " in it or in a checkpoint-N folder in it " +
                    "(written by tlaloc finetune)");
  return best;
}

Status ClearStaleSaves(const fs::path& out_dir, const fs::path& keep, bool fresh_run) {
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const auto& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool stale_checkpoint = fresh_run && CheckpointStep(name) >= 0 &&
                                  !(fs::exists(keep, ec) && fs::equivalent(e.path(), keep, ec));
    if (IsTemporaryName(name) || stale_checkpoint) doomed.push_back(e.path());
  }
  for (const fs::path& path : doomed) {
    if (IsTemporaryName(path.filename().string())) {
      fs::remove_all(path, ec);
      if (ec) return InvalidArgument("cannot remove " + path.string() + ": " + ec.message());
    } else {
      TL_RETURN_IF_ERROR(RemoveAll(path));
    }
  }
  if (fresh_run) {
    fs::remove(out_dir / kTrainerStateFile, ec);
    if (ec) return InvalidArgument("cannot remove " + (out_dir / kTrainerStateFile).string());
  }
  return SyncDirectory(out_dir);
}

StatusOr<TrainerState> ReadTrainerState(const fs::path& dir) {
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
  TrainerState s;
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
    s.out = j.value("out", std::string());
    s.run_steps = j.value("run_steps", int64_t{0});
    s.save_every = j.value("save_every", int64_t{-1});
    s.keep_last = j.value("keep_last", int64_t{-1});
    s.remat = j.value("remat", false);
    s.mesh = j.value("mesh", std::string());
    s.plan = j.value("plan", std::string());
    if (j.contains("optimizer_order") && j["optimizer_order"].is_array()) {
      s.optimizer_order.emplace();
      for (const json& name : j["optimizer_order"])
        s.optimizer_order->push_back(name.is_string() ? name.get<std::string>() : "");
    }
  } catch (const json::exception& e) {
    return InvalidArgument(state_path.string() + ": " + e.what() +
                           " (expected integer step, seed, batch and seq_len)");
  }
  return s;
}

StatusOr<LoadedTrainingState> LoadTrainingState(const fs::path& dir,
                                                const io::ModelConfig& config) {
  LoadedTrainingState out;
  TL_ASSIGN_OR_RETURN(out.state, ReadTrainerState(dir));
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
  if (!out.state.optimizer_order)
    return InvalidArgument((dir / kTrainerStateFile).string() +
                           ": lacks the \"optimizer_order\" name list");
  NamedLiterals ordered;
  for (const std::string& name : *out.state.optimizer_order) {
    auto it = std::find_if(out.optimizer_state.begin(), out.optimizer_state.end(),
                           [&](const auto& entry) { return entry.first == name; });
    if (it == out.optimizer_state.end())
      return NotFound((dir / kOptimizerFile).string() + " lacks optimizer tensor \"" + name +
                      "\" listed in " + (dir / kTrainerStateFile).string());
    ordered.push_back(*it);
  }
  out.optimizer_state = std::move(ordered);
  return out;
}

}  // namespace tlaloc::train
