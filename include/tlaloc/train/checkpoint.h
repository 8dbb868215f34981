// Fine-tuning checkpoints. The model is written as a Hugging Face folder in the source
// checkpoint's dtype (config.json, model.safetensors, generation_config.json and the tokenizer
// files copied), so `tlaloc generate` and other tools load it. Beside it, for resuming:
//   optimizer.safetensors   the Trainer's optimizer state ("step", "m.*", "v.*") plus the f32
//                           master weights as "master.<name>", so a bf16 checkpoint resumes
//                           exactly
//   trainer_state.json      step, seed, batch, seq_len and the learning-rate settings
//
// Saves of a fine-tuning run (SaveCheckpoint) never leave a half-written checkpoint:
//   OUT/checkpoint-<step>/  one complete save (all of the above). It is written as a hidden
//                           staging folder OUT/.checkpoint-<step>.tmp-PID-X/ (every file fsync'ed,
//                           trainer_state.json last) and renamed into place, so a checkpoint-N
//                           folder exists only complete. The newest `keep_last` are kept.
//   OUT/                    the newest save's files again (hard links into checkpoint-<step>), so
//                           OUT itself is a model folder for generate and export. Published by
//                           removing OUT/trainer_state.json, renaming each new file into place
//                           and renaming trainer_state.json in last: OUT/trainer_state.json marks
//                           a complete save there too. A crash mid-publish leaves OUT without it,
//                           and FindNewestSave then picks checkpoint-<step>.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/ir/literal.h"
#include "tlaloc/support/status.h"

namespace tlaloc::train {

inline constexpr std::string_view kOptimizerFile = "optimizer.safetensors";
inline constexpr std::string_view kTrainerStateFile = "trainer_state.json";

// Writes `weights` (models::WeightSpecs order, any float type) converted to `dtype` into `out`
// as a Hugging Face folder; generation_config.json and the tokenizer files
// (tokenizer.json, tokenizer_config.json, vocab.json, merges.txt, special_tokens_map.json,
// added_tokens.json, chat_template.jinja) are copied from `source_dir` where present.
Status SaveModelFolder(const std::filesystem::path& out, const std::filesystem::path& source_dir,
                       const io::ModelConfig& config, std::span<const Literal> weights,
                       ElementType dtype);

struct TrainerState {
  int64_t step = 0;
  uint64_t seed = 0;
  int64_t batch = 0;
  int64_t seq_len = 0;
  double lr = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  double weight_decay = 0;
  double grad_clip_norm = 0;
  std::string source_model;  // the folder fine-tuning started from
  std::string data;          // the JSONL file
  // The rest of the run's command line, so that `--resume DIR` alone continues it (saves of
  // older versions lack them: 0, -1 or empty, "not recorded").
  std::string out;          // the --out folder
  int64_t run_steps = 0;    // the steps the run was to reach
  int64_t save_every = -1;  // --save-every
  int64_t keep_last = -1;   // --keep-last
  bool remat = false;
  std::string mesh, plan;
  // Read back only: the optimizer tensors' names in the trainer's order (absent: unset).
  std::optional<std::vector<std::string>> optimizer_order;
};

using NamedLiterals = std::vector<std::pair<std::string, Literal>>;

// Writes optimizer.safetensors (optimizer state, then "master.<name>" for each of
// `master_weights` in WeightSpecs order of `config`) and trainer_state.json into `dir`.
Status SaveTrainingState(const std::filesystem::path& dir, const io::ModelConfig& config,
                         const NamedLiterals& optimizer_state,
                         std::span<const Literal> master_weights, const TrainerState& state);

struct LoadedTrainingState {
  TrainerState state;
  NamedLiterals optimizer_state;        // everything not named "master.*"
  std::vector<Literal> master_weights;  // WeightSpecs order
};

// Writes one save of a run into `out_dir` as described at the top: checkpoint-<state.step>/
// (model in `dtype`, tokenizer files from `source_dir`, optimizer state and f32 `weights` as the
// master weights), then the same files published into `out_dir`, then the checkpoint-N
// folders beyond the newest `keep_last` removed (0: keep all). Returns checkpoint-<step>/.
StatusOr<std::filesystem::path> SaveCheckpoint(const std::filesystem::path& out_dir,
                                               const std::filesystem::path& source_dir,
                                               const io::ModelConfig& config,
                                               std::span<const Literal> weights, ElementType dtype,
                                               const NamedLiterals& optimizer_state,
                                               const TrainerState& state, int64_t keep_last);

struct SavePoint {
  std::filesystem::path dir;  // holds trainer_state.json, optimizer.safetensors and the model
  int64_t step = 0;
};

// The newest complete save under `dir`: `dir` itself or one of its checkpoint-N folders,
// whichever holds a trainer_state.json of the highest step (a checkpoint folder on a tie).
// NotFound, naming trainer_state.json, when there is none.
StatusOr<SavePoint> FindNewestSave(const std::filesystem::path& dir);

// Removes what a fresh run must not resume from later: the checkpoint-N folders and
// trainer_state.json of an earlier run in `out_dir` (except the folder `keep`, e.g. the model
// the run starts from), and temporary files and staging folders left by killed processes.
Status ClearStaleSaves(const std::filesystem::path& out_dir, const std::filesystem::path& keep,
                       bool fresh_run);

// dir/trainer_state.json alone (the run's settings, no tensors).
StatusOr<TrainerState> ReadTrainerState(const std::filesystem::path& dir);

// Reads what SaveTrainingState wrote; errors name the missing file or tensor.
StatusOr<LoadedTrainingState> LoadTrainingState(const std::filesystem::path& dir,
                                                const io::ModelConfig& config);

}  // namespace tlaloc::train
