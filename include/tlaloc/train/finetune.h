// The fine-tuning loop behind `tlaloc finetune`: a Hugging Face checkpoint and a JSONL file in,
// a fine-tuned Hugging Face checkpoint (same dtype), a loss log and resumable optimizer state
// out. Also the pieces of the demonstration (`tlaloc finetune-demo`): a byte-level tokenizer, a
// small model config that uses it, and generated chat tasks with held-out questions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tlaloc/io/model_config.h"
#include "tlaloc/runtime/backend.h"
#include "tlaloc/support/status.h"

namespace tlaloc::train {

inline constexpr std::string_view kLossLogFile = "loss_log.jsonl";
// Beside the loss log: loss.svg (see loss_plot.h), rewritten every few steps during the run.

struct FinetuneOptions {
  std::filesystem::path model_dir;  // may be empty when resuming: the resume folder is used
  std::filesystem::path data_path;
  std::filesystem::path out_dir;
  // A previous out_dir (its newest complete save is used, see FindNewestSave) or one of its
  // checkpoint-N folders; empty = start fresh. A resumed run keeps the saved seed, batch,
  // seq_len, lr, warmup, weight decay, clipping and schedule; only `steps` is taken from here.
  std::filesystem::path resume_dir;
  // Resume only: true when the options already hold the save's settings with the caller's
  // overrides (the CLI merges them, naming each override); false takes them from the save.
  bool resume_settings_merged = false;
  // Total steps (a resumed run continues up to it); 0 = `epochs` passes over the data.
  int64_t steps = 0;
  int64_t epochs = 1;
  int64_t batch = 8;
  int64_t seq_len = 256;
  double lr = 1e-4;
  int64_t warmup_steps = 0;
  // Steps the learning-rate schedule (warmup, cosine decay) spans; 0 = `steps`. A run meant to
  // be resumed later sets the full length here, so the resumed steps match an unbroken run.
  int64_t schedule_steps = 0;
  double weight_decay = 0.0;
  double grad_clip_norm = 1.0;
  uint64_t seed = 0;
  // Title of out_dir/loss.svg (empty: "tlaloc finetune" and the data file's name).
  std::string plot_title;
  // Save out_dir/checkpoint-N every this many steps (0: only at the end and when stopped), so a
  // killed run loses at most this many steps; the newest `keep_last` are kept (0: all).
  int64_t save_every = 0;
  int64_t keep_last = 2;
  // Recompute each decoder layer in the backward pass (remat): only every layer's input stays
  // alive between the passes, for one more forward's work; same results. FSDP then gathers a
  // layer's weights again in the backward pass instead of keeping all of them gathered.
  bool remat = false;
  // Several devices (docs/SHARDING.md): a mesh ("data=2") and a plan (dp, fsdp, tp, dp_tp);
  // both empty: one device. The backend needs the mesh's device count.
  std::string mesh;
  std::string plan;
  // When set, the train step is written there before training: train_step.mlir (the program
  // each device runs) and, with a plan, train_step.sdy.mlir (the global program with Shardy
  // annotations that XLA partitions).
  std::filesystem::path programs_dir;
  // Polled after every step: true stops the run there, with a save (SIGINT/SIGTERM in the CLI).
  std::function<bool()> stop_requested;
};

// The settings' ranges, each error naming its flag: batch >= 1, seq_len >= 2, lr finite and > 0,
// warmup within the run, grad clip and weight decay finite and >= 0, steps >= 0 (0: epochs),
// save_every and keep_last >= 0, out_dir not the model folder (saving would overwrite it), mesh
// and plan both or neither, each valid. With `config`, seq_len must also fit its
// max_position_embeddings, the plan must fit the model and the batch, and the model must not be
// an int8 checkpoint (its s8 weights cannot be trained). RunFinetune checks these
// too; the CLI calls it first so a bad value is a usage error.
Status CheckFinetuneOptions(const FinetuneOptions& options,
                            const io::ModelConfig* config = nullptr);

struct StepRecord {
  int64_t step = 0;  // 1-based
  double loss = 0;
  int64_t trained_tokens = 0;  // labels that counted
  int64_t tokens = 0;          // batch * seq_len
  double grad_norm = 0;
  double lr = 0;
  double seconds = 0;  // wall time of this step
};

struct FinetuneResult {
  std::vector<StepRecord> steps;  // the steps run by this call
  int64_t first_step = 1;         // step number of steps[0] (after a resume: saved step + 1)
  int64_t total_steps = 0;
  double train_seconds = 0;      // the steps only (no loading, compiling or saving)
  double setup_seconds = 0;      // loading data and model, building the trainer
  double tokens_per_second = 0;  // batch * seq_len tokens per second of train_seconds
  // Why loss.svg could not be written, if it could not; the run carries on without the plot.
  std::string plot_error;
  // With a plan: each device's peak live bytes in the last step (where the backend measures
  // them) and the parameter + moment bytes each device holds.
  std::vector<int64_t> device_peak_bytes;
  int64_t device_state_bytes = 0;
  bool stopped = false;             // stop_requested ended the run before total_steps
  int64_t saved_step = 0;           // the last save's step (0: none, stopped before a step)
  std::filesystem::path saved_dir;  // out_dir/checkpoint-<saved_step>
};

// Called after every step with the step's record and the run's total step count.
using StepCallback = std::function<void(const StepRecord&, int64_t total_steps)>;

// A resumed run with no step left to train (the save is at or past the run's total) fails with
// this code, so the CLI can call it a usage error.
inline constexpr StatusCode kNothingLeftToTrain = StatusCode::kOutOfRange;

StatusOr<FinetuneResult> RunFinetune(const FinetuneOptions& options, Backend& backend,
                                     const StepCallback& on_step = {});

// --- The demonstration ---------------------------------------------------------------------

// tokenizer.json of a byte-level BPE without merges: ids 0..255 are the bytes, then
// <|endoftext|> (256), <|im_start|> (257) and <|im_end|> (258). Small enough that the LM head
// is cheap, and it renders the Qwen3 chat template like the real tokenizer.
std::string ByteTokenizerJson();

// The tiny preset's shapes (hidden 64, 2 layers) over the byte tokenizer's 259 ids.
io::ModelConfig DemoModelConfig();

struct DemoExample {
  std::string question;
  std::string answer;
};

struct DemoTask {
  std::string description;
  std::vector<DemoExample> train;
  std::vector<DemoExample> held_out;  // questions that never occur in `train`
};

// "upper": upper-case four lower-case letters; "reverse": reverse four lower-case letters; "add":
// the sum of two numbers below 50. Errors name the task when it is unknown.
StatusOr<DemoTask> MakeDemoTask(const std::string& name, int64_t train_size, int64_t held_out,
                                uint64_t seed);

// JSONL chat rows (user: question, assistant: answer), one per example.
std::string ChatJsonl(const std::vector<DemoExample>& examples);

}  // namespace tlaloc::train
