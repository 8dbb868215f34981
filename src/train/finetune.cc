// The fine-tuning loop (see finetune.h): data -> packed batches -> Trainer steps -> checkpoint.
#include "tlaloc/train/finetune.h"

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tlaloc/generate/generator.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/train/checkpoint.h"
#include "tlaloc/train/data.h"
#include "tlaloc/train/trainer.h"

namespace tlaloc::train {

namespace fs = std::filesystem;

namespace {

// Vocabulary size from which fine-tuning computes the LM-head loss in chunks, and the chunk.
constexpr int64_t kChunkedLossMinVocab = 16384;
constexpr int64_t kLossChunkTokens = 256;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

Batch ToBatch(const TokenBatch& b) {
  return {Literal::FromVector<int32_t>({b.batch, b.seq_len}, b.input_ids),
          Literal::FromVector<int32_t>({b.batch, b.seq_len}, b.labels)};
}

Status CheckOptions(const FinetuneOptions& o) {
  if (o.data_path.empty()) return InvalidArgument("no data file given (--data FILE.jsonl)");
  if (o.out_dir.empty()) return InvalidArgument("no output folder given (--out DIR)");
  if (o.model_dir.empty() && o.resume_dir.empty())
    return InvalidArgument("no model given (--model DIR, or --resume DIR)");
  if (o.steps < 0) return InvalidArgument("--steps must be >= 0, got " + std::to_string(o.steps));
  if (o.steps == 0 && o.epochs <= 0)
    return InvalidArgument("--epochs must be >= 1, got " + std::to_string(o.epochs));
  if (!(o.lr > 0)) return InvalidArgument("--lr must be > 0");
  if (o.warmup_steps < 0) return InvalidArgument("--warmup must be >= 0");
  if (o.weight_decay < 0) return InvalidArgument("--weight-decay must be >= 0");
  return OkStatus();
}

}  // namespace

StatusOr<FinetuneResult> RunFinetune(const FinetuneOptions& options_in, Backend& backend,
                                     const StepCallback& on_step) {
  TL_RETURN_IF_ERROR(CheckOptions(options_in));
  FinetuneOptions options = options_in;
  const auto setup_start = std::chrono::steady_clock::now();
  const fs::path model_dir = options.model_dir.empty() ? options.resume_dir : options.model_dir;

  TL_ASSIGN_OR_RETURN(io::ModelConfig config, io::LoadModelConfig(model_dir / "config.json"));
  // The checkpoint is written back in the dtype it was read in.
  TL_ASSIGN_OR_RETURN(io::Checkpoint checkpoint, io::Checkpoint::Open(model_dir));
  ElementType stored = ElementType::kF32;
  if (!checkpoint.names().empty()) stored = checkpoint.Find(checkpoint.names().front())->dtype;
  if (!IsFloat(stored)) stored = config.dtype.value_or(ElementType::kF32);

  std::optional<LoadedTrainingState> resumed;
  if (!options.resume_dir.empty()) {
    TL_ASSIGN_OR_RETURN(resumed, LoadTrainingState(options.resume_dir, config));
    // The data stream and the optimizer settings continue exactly where they stopped.
    const TrainerState& saved = resumed->state;
    options.seed = saved.seed;
    options.batch = saved.batch;
    options.seq_len = saved.seq_len;
    options.lr = saved.lr;
    options.warmup_steps = saved.warmup_steps;
    options.weight_decay = saved.weight_decay;
    options.grad_clip_norm = saved.grad_clip_norm;
    // The saved schedule still holds unless the run now goes past its end.
    if (options.schedule_steps == 0 && saved.total_steps >= options.steps)
      options.schedule_steps = saved.total_steps;
  }

  TL_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::FromFile((model_dir / "tokenizer.json")));
  TL_ASSIGN_OR_RETURN(int32_t eot, EndOfTextId(tokenizer));
  if (eot >= config.vocab_size)
    return InvalidArgument("the tokenizer's <|endoftext|> id " + std::to_string(eot) +
                           " is outside the model's vocabulary of " +
                           std::to_string(config.vocab_size));
  TL_ASSIGN_OR_RETURN(auto documents,
                      LoadJsonlDocuments(options.data_path, tokenizer, DocumentOptions{eot}));
  for (const Document& d : documents)
    for (int32_t id : d.ids)
      if (id >= config.vocab_size)
        return InvalidArgument("token id " + std::to_string(id) + " of " +
                               options.data_path.string() + " is outside the model's vocabulary (" +
                               std::to_string(config.vocab_size) + ")");
  TL_ASSIGN_OR_RETURN(Packer packer, Packer::Create(std::move(documents), options.batch,
                                                    options.seq_len, options.seed, eot));

  const int64_t total_steps =
      options.steps > 0 ? options.steps : options.epochs * packer.batches_per_epoch();
  TrainOptions train_options;
  train_options.adamw.lr = options.lr;
  train_options.adamw.weight_decay = options.weight_decay;
  train_options.adamw.grad_clip_norm = options.grad_clip_norm;
  train_options.adamw.warmup_steps = options.warmup_steps;
  // A run stopped early and resumed later keeps the schedule of the whole run.
  train_options.adamw.total_steps =
      options.schedule_steps > 0 ? options.schedule_steps : total_steps;
  train_options.adamw.min_lr_ratio = 0.1;
  // With a real vocabulary (Qwen3: 151,936) the [tokens, vocab] logits are the step's largest
  // tensor (1.2 GB at 8 x 256 tokens); the chunked loss never holds more than 256 rows of them.
  if (config.vocab_size >= kChunkedLossMinVocab) train_options.loss_chunk = kLossChunkTokens;

  std::vector<Literal> weights;
  if (resumed) {
    weights = std::move(resumed->master_weights);
  } else {
    TL_ASSIGN_OR_RETURN(weights, generate::LoadWeights(config, checkpoint, ElementType::kF32));
  }
  TL_ASSIGN_OR_RETURN(auto trainer, Trainer::Create(config, std::move(weights), train_options,
                                                    backend, options.batch, options.seq_len));
  int64_t start_step = 0;
  if (resumed) {
    TL_RETURN_IF_ERROR(trainer->LoadOptimizerState(resumed->optimizer_state));
    start_step = resumed->state.step;
    packer.Skip(start_step);
  }

  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec) return InvalidArgument("cannot create " + options.out_dir.string() + ": " + ec.message());
  const bool append_log = resumed && fs::equivalent(options.out_dir, options.resume_dir, ec) && !ec;
  std::ofstream log(options.out_dir / kLossLogFile, append_log ? std::ios::app : std::ios::trunc);
  if (!log) return InvalidArgument("cannot write " + (options.out_dir / kLossLogFile).string());

  FinetuneResult result;
  result.first_step = start_step + 1;
  result.total_steps = total_steps;
  result.setup_seconds = Seconds(setup_start);
  int64_t tokens = 0;
  for (int64_t step = start_step + 1; step <= total_steps; ++step) {
    TokenBatch token_batch = packer.Next();
    const auto step_start = std::chrono::steady_clock::now();
    StatusOr<StepStats> stats = trainer->Step(ToBatch(token_batch));
    if (!stats.ok()) return stats.status().WithContext("step " + std::to_string(step));
    StepRecord record{step,
                      stats->loss,
                      stats->tokens,
                      token_batch.batch * token_batch.seq_len,
                      stats->grad_norm,
                      stats->lr,
                      Seconds(step_start)};
    result.train_seconds += record.seconds;
    tokens += record.tokens;
    result.steps.push_back(record);
    nlohmann::json line = {{"step", step},
                           {"loss", record.loss},
                           {"trained_tokens", record.trained_tokens},
                           {"grad_norm", record.grad_norm},
                           {"lr", record.lr},
                           {"seconds", record.seconds},
                           {"epoch", packer.epoch()}};
    log << line.dump() << "\n" << std::flush;
    if (on_step) on_step(record, total_steps);
  }
  result.tokens_per_second = result.train_seconds > 0 ? tokens / result.train_seconds : 0;

  TL_ASSIGN_OR_RETURN(std::vector<Literal> trained, trainer->Weights());
  TL_RETURN_IF_ERROR(SaveModelFolder(options.out_dir, model_dir, config, trained, stored));
  TL_ASSIGN_OR_RETURN(auto optimizer_state, trainer->OptimizerState());
  TrainerState state;
  state.step = total_steps;
  state.seed = options.seed;
  state.batch = options.batch;
  state.seq_len = options.seq_len;
  state.lr = options.lr;
  state.warmup_steps = options.warmup_steps;
  state.total_steps = train_options.adamw.total_steps;
  state.weight_decay = options.weight_decay;
  state.grad_clip_norm = options.grad_clip_norm;
  state.source_model = fs::absolute(model_dir, ec).string();
  state.data = fs::absolute(options.data_path, ec).string();
  TL_RETURN_IF_ERROR(SaveTrainingState(options.out_dir, config, optimizer_state, trained, state));
  return result;
}

}  // namespace tlaloc::train
