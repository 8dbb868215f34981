// The fine-tuning loop (see finetune.h): data -> packed batches -> Trainer steps -> checkpoint.
#include "tlaloc/train/finetune.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tlaloc/interp/multi_device.h"
#include "tlaloc/interp/process_world.h"
#include "tlaloc/io/checkpoint.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/load_weights.h"
#include "tlaloc/shard/plan.h"
#include "tlaloc/stablehlo/printer.h"
#include "tlaloc/support/atomic_file.h"
#include "tlaloc/support/buffer_cache.h"
#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/train/checkpoint.h"
#include "tlaloc/train/data.h"
#include "tlaloc/train/loss_plot.h"
#include "tlaloc/train/sharded_trainer.h"
#include "tlaloc/train/trainer.h"
#include "train/train_step.h"

namespace tlaloc::train {

namespace fs = std::filesystem;

namespace {

// Vocabulary size from which fine-tuning computes the LM-head loss in chunks, and the chunk.
constexpr int64_t kChunkedLossMinVocab = 16384;
constexpr int64_t kLossChunkTokens = 256;
// How many [chunk, vocab] f32 tensors the buffer cache is sized to keep for reuse.
constexpr size_t kLossChunkBuffersCached = 8;

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

Batch ToBatch(const TokenBatch& b) {
  return {Literal::FromVector<int32_t>({b.batch, b.seq_len}, b.input_ids),
          Literal::FromVector<int32_t>({b.batch, b.seq_len}, b.labels)};
}

// Steps already in a loss log this run appends to (a resume into the same folder), so loss.svg
// shows the whole run. Unreadable lines are skipped: the plot is a view, not the record.
std::vector<LossPoint> LoggedPoints(const fs::path& log_path, int64_t before_step) {
  std::vector<LossPoint> points;
  std::ifstream in(log_path);
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const int64_t step = j["step"].get<int64_t>();
    if (step >= before_step) continue;
    // A NaN loss is logged as null by nlohmann::json.
    const double loss = j.contains("loss") && j["loss"].is_number() ? j["loss"].get<double>() : NAN;
    const double lr = j.contains("lr") && j["lr"].is_number() ? j["lr"].get<double>() : 0.0;
    points.push_back({step, loss, lr});
  }
  return points;
}

// Keeps the lines of a loss log up to `last_step` (a resume continuing after it), so that the
// steps a killed run logged after its last save are not logged twice.
Status TrimLossLog(const fs::path& log_path, int64_t last_step) {
  std::ifstream in(log_path);
  if (!in) return OkStatus();
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    if (j["step"].get<int64_t>() <= last_step) kept += line + "\n";
  }
  return WriteStringAtomic(log_path, kept);
}

bool SameFolder(const fs::path& a, const fs::path& b) {
  std::error_code ec1, ec2;
  const fs::path ca = fs::weakly_canonical(a, ec1), cb = fs::weakly_canonical(b, ec2);
  return !ec1 && !ec2 && ca == cb;
}

// --programs DIR: the program each device runs and, with a plan, the global program with
// Shardy annotations (the two lowerings of one step).
Status WriteStepPrograms(const FinetuneOptions& options, const io::ModelConfig& config,
                         const TrainOptions& train_options, const Trainer& trainer) {
  std::error_code ec;
  fs::create_directories(options.programs_dir, ec);
  if (ec)
    return InvalidArgument("--programs: cannot create " + options.programs_dir.string() + ": " +
                           ec.message());
  std::shared_ptr<const Module> device;
  if (const ShardedTrainer* sharded = trainer.sharded()) {
    device = sharded->step_module();
    TL_ASSIGN_OR_RETURN(auto global, BuildAnnotatedStepProgram(config, train_options,
                                                               sharded->plan(), options.seq_len));
    TL_RETURN_IF_ERROR(
        WriteStringAtomic(options.programs_dir / "train_step.sdy.mlir", PrintModule(*global)));
  } else {
    TL_ASSIGN_OR_RETURN(device, BuildStepProgram(config, train_options, models::WeightSpecs(config),
                                                 options.batch, options.seq_len));
  }
  return WriteStringAtomic(options.programs_dir / "train_step.mlir", PrintModule(*device));
}

std::string Hex(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%a", v);
  return buf;
}

std::string FileDigest(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return in || in.eof() ? Digest(bytes) : "(unreadable)";
}

// What every rank of a multi-process run must agree on: digests of the model (config, weight
// names, shapes and contents) and data, and the settings that shape the step.
std::vector<std::pair<std::string, std::string>> RunFields(const FinetuneOptions& o,
                                                           const fs::path& model_dir,
                                                           const io::ModelConfig& config,
                                                           const std::vector<Literal>& weights,
                                                           int64_t total_steps) {
  std::string shapes, contents;
  const auto specs = models::WeightSpecs(config);
  for (size_t i = 0; i < specs.size() && i < weights.size(); ++i) {
    shapes += specs[i].name + DimsToString(weights[i].dims()) + ";";
    contents += Digest(
        std::string_view(reinterpret_cast<const char*>(weights[i].data()), weights[i].byte_size()));
  }
  return {{"model config", FileDigest(model_dir / "config.json")},
          {"weight names and shapes", Digest(shapes)},
          {"weights", Digest(contents)},
          {"mesh", o.mesh},
          {"plan", o.plan},
          {"batch", std::to_string(o.batch)},
          {"seq-len", std::to_string(o.seq_len)},
          {"steps", std::to_string(total_steps)},
          {"seed", std::to_string(o.seed)},
          {"lr", Hex(o.lr)},
          {"weight decay", Hex(o.weight_decay)},
          {"data", FileDigest(o.data_path)}};
}

}  // namespace

Status CheckFinetuneOptions(const FinetuneOptions& o, const io::ModelConfig* config) {
  auto n = [](auto v) { return std::to_string(v); };
  auto g = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };
  if (o.data_path.empty()) return InvalidArgument("no data file given (--data FILE.jsonl)");
  if (o.out_dir.empty()) return InvalidArgument("no output folder given (--out DIR)");
  if (o.model_dir.empty() && o.resume_dir.empty())
    return InvalidArgument("no model given (--model DIR, or --resume DIR)");
  if (o.steps < 0) return InvalidArgument("--steps must be >= 1, got " + n(o.steps));
  if (o.steps == 0 && o.epochs <= 0)
    return InvalidArgument("--epochs must be >= 1, got " + n(o.epochs));
  if (o.batch < 1) return InvalidArgument("--batch must be >= 1, got " + n(o.batch));
  if (o.seq_len < 2)
    return InvalidArgument("--seq-len must be >= 2 (an input token and its label), got " +
                           n(o.seq_len));
  if (config && o.seq_len > config->max_position_embeddings)
    return InvalidArgument("--seq-len " + n(o.seq_len) + " is beyond the model's " +
                           "max_position_embeddings of " + n(config->max_position_embeddings));
  if (config && config->quantization)
    return InvalidArgument(
        "the model is an int8 checkpoint (config.json quantization_config " +
        config->quantization->quant_method +
        "): fine-tuning int8 weights is not implemented; fine-tune the float checkpoint it was "
        "made from, then `tlaloc quantize` the result");
  if (!std::isfinite(o.lr) || !(o.lr > 0))
    return InvalidArgument("--lr must be a finite number > 0, got " + g(o.lr));
  if (o.warmup_steps < 0) return InvalidArgument("--warmup must be >= 0, got " + n(o.warmup_steps));
  if (o.schedule_steps < 0)
    return InvalidArgument("--schedule-steps must be >= 1, got " + n(o.schedule_steps));
  // The schedule the warmup belongs to: --schedule-steps, else the run's --steps.
  const int64_t span = o.schedule_steps > 0 ? o.schedule_steps : o.steps;
  if (span > 0 && o.warmup_steps > span)
    return InvalidArgument("--warmup " + n(o.warmup_steps) + " is longer than the run (" +
                           (o.schedule_steps > 0 ? "--schedule-steps " : "--steps ") + n(span) +
                           "); the learning rate would never reach --lr");
  if (!std::isfinite(o.weight_decay) || o.weight_decay < 0)
    return InvalidArgument("--weight-decay must be a finite number >= 0, got " + g(o.weight_decay));
  if (!std::isfinite(o.grad_clip_norm) || o.grad_clip_norm < 0)
    return InvalidArgument("--grad-clip must be a finite number >= 0 (0: no clipping), got " +
                           g(o.grad_clip_norm));
  if (o.save_every < 0)
    return InvalidArgument("--save-every must be >= 0 (0: save at the end only), got " +
                           n(o.save_every));
  if (o.mesh.empty() != o.plan.empty())
    return InvalidArgument(o.mesh.empty() ? "--plan " + o.plan + " needs a --mesh (e.g. data=2)"
                                          : "--mesh " + o.mesh + " needs a --plan (" +
                                                shard::PlanNames() + ")");
  if (!o.mesh.empty()) {
    auto mesh = Mesh::Parse(o.mesh);
    if (!mesh.ok()) return InvalidArgument("--mesh: " + mesh.status().message());
    auto kind = shard::PlanByName(o.plan);
    if (!kind.ok()) return InvalidArgument("--plan: " + kind.status().message());
    if (config) {
      auto plan = shard::ShardingPlan::Make(o.plan, *mesh, *config, o.batch);
      if (!plan.ok())
        return InvalidArgument("--mesh " + o.mesh + " --plan " + o.plan + ": " +
                               plan.status().message());
    }
  }
  if (o.keep_last < 0)
    return InvalidArgument("--keep-last must be >= 0 (0: keep all), got " + n(o.keep_last));
  if (!o.model_dir.empty() && SameFolder(o.out_dir, o.model_dir))
    return InvalidArgument("--out " + o.out_dir.string() + " is the --model folder " +
                           o.model_dir.string() +
                           ": saving would overwrite the base weights; give another --out");
  return OkStatus();
}

StatusOr<FinetuneResult> RunFinetune(const FinetuneOptions& options_in, Backend& backend,
                                     const StepCallback& on_step) {
  TL_RETURN_IF_ERROR(CheckFinetuneOptions(options_in));
  FinetuneOptions options = options_in;
  const auto setup_start = std::chrono::steady_clock::now();
  // A resume starts from the newest complete save under --resume (the folder or a checkpoint-N).
  SavePoint save_point;
  if (!options.resume_dir.empty()) {
    TL_ASSIGN_OR_RETURN(save_point, FindNewestSave(options.resume_dir));
  }
  const fs::path model_dir = options.model_dir.empty() ? save_point.dir : options.model_dir;

  TL_ASSIGN_OR_RETURN(io::ModelConfig config, models::LoadConfig(model_dir / "config.json"));
  // The checkpoint is written back in the dtype it was read in.
  TL_ASSIGN_OR_RETURN(io::Checkpoint checkpoint, io::Checkpoint::Open(model_dir));
  ElementType stored = ElementType::kF32;
  if (!checkpoint.names().empty()) stored = checkpoint.Find(checkpoint.names().front())->dtype;
  if (!IsFloat(stored)) stored = config.dtype.value_or(ElementType::kF32);

  std::optional<LoadedTrainingState> resumed;
  if (!options.resume_dir.empty()) {
    TL_ASSIGN_OR_RETURN(resumed, LoadTrainingState(save_point.dir, config));
    // The data stream and the optimizer settings continue exactly where they stopped.
    const TrainerState& saved = resumed->state;
    if (!options.resume_settings_merged) {
      options.seed = saved.seed;
      options.batch = saved.batch;
      options.seq_len = saved.seq_len;
      options.lr = saved.lr;
      options.warmup_steps = saved.warmup_steps;
      options.weight_decay = saved.weight_decay;
      options.grad_clip_norm = saved.grad_clip_norm;
    }
    // The saved schedule still holds unless the run now goes past its end.
    if (options.schedule_steps == 0 && saved.total_steps >= options.steps)
      options.schedule_steps = saved.total_steps;
  }
  TL_RETURN_IF_ERROR(CheckFinetuneOptions(options, &config));

  TL_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::FromFile((model_dir / "tokenizer.json")));
  TL_ASSIGN_OR_RETURN(const models::ModelFamily* family, models::FamilyOf(config));
  TL_ASSIGN_OR_RETURN(int32_t eot, EndOfTextId(tokenizer, family->document_end_token));
  if (eot >= config.vocab_size)
    return InvalidArgument("the tokenizer's " + std::string(family->document_end_token) + " id " +
                           std::to_string(eot) + " is outside the model's vocabulary of " +
                           std::to_string(config.vocab_size));
  // The model's chat template renders "messages" rows; a folder without one can still train on
  // "text" rows (a messages row then names the missing template).
  StatusOr<ChatTemplate> chat = ChatTemplate::FromCheckpoint(model_dir);
  if (!chat.ok() && chat.status().code() != StatusCode::kNotFound) return chat.status();
  DocumentOptions doc_options{eot};
  if (chat.ok()) doc_options.chat_template = &*chat;
  TL_ASSIGN_OR_RETURN(auto documents,
                      LoadJsonlDocuments(options.data_path, tokenizer, doc_options));
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
  if (resumed && resumed->state.step >= total_steps)
    return Status(kNothingLeftToTrain, "--resume " + options.resume_dir.string() +
                                           ": the save in " + save_point.dir.string() +
                                           " is at step " + std::to_string(resumed->state.step) +
                                           " and the run has " + std::to_string(total_steps) +
                                           " steps: nothing left to train (give a larger --steps)");
  if (options.schedule_steps == 0 && options.warmup_steps > total_steps)
    return InvalidArgument("--warmup " + std::to_string(options.warmup_steps) +
                           " is longer than the run (" + std::to_string(total_steps) +
                           " steps); the learning rate would never reach --lr");
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
  if (config.vocab_size >= kChunkedLossMinVocab) {
    train_options.loss_chunk = kLossChunkTokens;
    // Each chunk allocates and frees about eight [256, vocab] f32 tensors (logits, shifted,
    // exponentials, their gradient; 155 MB each for Qwen3) and the next chunk the same again:
    // a buffer cache that can hold them saves faulting every page back in (half the step at
    // the default 256 MiB, which holds one). TLALOC_BUFFER_CACHE_MB still decides if set.
    const size_t chunk_bytes = static_cast<size_t>(kLossChunkTokens) *
                               static_cast<size_t>(config.vocab_size) * sizeof(float);
    BufferCache::Global().RaiseCapacity(kLossChunkBuffersCached * chunk_bytes);
  }
  train_options.remat_layers = options.remat;
  train_options.document_end_id = eot;  // packed documents stay apart
  train_options.mesh = options.mesh;
  train_options.plan = options.plan;

  std::vector<Literal> weights;
  if (resumed) {
    weights = std::move(resumed->master_weights);
  } else {
    TL_ASSIGN_OR_RETURN(weights, models::LoadWeights(config, checkpoint, ElementType::kF32));
  }
  // Across processes (mpirun) every rank trains the same job or none does: refused here, before
  // the first collective, naming what differs. Only rank 0 writes files.
  ProcessWorld& world = backend.world();
  const bool writer = world.rank() == 0;
  if (world.size() > 1)
    TL_RETURN_IF_ERROR(CheckSameOnAllRanks(
        world, RunFields(options, model_dir, config, weights, total_steps), CollectiveTimeout()));
  TL_ASSIGN_OR_RETURN(auto trainer, Trainer::Create(config, std::move(weights), train_options,
                                                    backend, options.batch, options.seq_len));
  if (writer && !options.programs_dir.empty())
    TL_RETURN_IF_ERROR(WriteStepPrograms(options, config, train_options, *trainer));
  int64_t start_step = 0;
  if (resumed) {
    TL_RETURN_IF_ERROR(trainer->LoadOptimizerState(resumed->optimizer_state));
    start_step = resumed->state.step;
    packer.Skip(start_step);
  }

  std::error_code ec;
  // Resuming into the run's own folder continues its loss log from the save's step.
  const bool append_log = resumed && (SameFolder(options.out_dir, options.resume_dir) ||
                                      SameFolder(options.out_dir, save_point.dir.parent_path()));
  std::ofstream log;
  if (writer) {
    fs::create_directories(options.out_dir, ec);
    if (ec)
      return InvalidArgument("cannot create " + options.out_dir.string() + ": " + ec.message());
    // Leftovers of killed runs go; a fresh run also drops an earlier run's saves, which a later
    // --resume would otherwise take for its own.
    TL_RETURN_IF_ERROR(ClearStaleSaves(options.out_dir, model_dir, /*fresh_run=*/!resumed));
    if (append_log) TL_RETURN_IF_ERROR(TrimLossLog(options.out_dir / kLossLogFile, start_step));
    log.open(options.out_dir / kLossLogFile, append_log ? std::ios::app : std::ios::trunc);
    if (!log) return InvalidArgument("cannot write " + (options.out_dir / kLossLogFile).string());
  }

  // loss.svg: redrawn on the first step, every `plot_every` steps, at least once a second and
  // at the end, so a browser shows the run as it goes (at most ~50 + 1/s redraws of O(steps)).
  const fs::path plot_path = options.out_dir / kLossPlotFile;
  LossPlotOptions plot;
  plot.title = options.plot_title.empty()
                   ? "tlaloc finetune: " + options.data_path.filename().string()
                   : options.plot_title;
  plot.total_steps = total_steps;
  std::vector<LossPoint> points;
  if (writer && append_log) points = LoggedPoints(options.out_dir / kLossLogFile, start_step + 1);
  const int64_t plot_every = std::max<int64_t>(1, (total_steps - start_step) / 50);
  auto last_plot = std::chrono::steady_clock::now();

  FinetuneResult result;
  result.first_step = start_step + 1;
  result.total_steps = total_steps;
  result.setup_seconds = Seconds(setup_start);
  TrainerState state;
  state.seed = options.seed;
  state.batch = options.batch;
  state.seq_len = options.seq_len;
  state.lr = options.lr;
  state.warmup_steps = options.warmup_steps;
  state.total_steps = train_options.adamw.total_steps;
  state.weight_decay = options.weight_decay;
  state.grad_clip_norm = options.grad_clip_norm;
  state.source_model = resumed ? resumed->state.source_model : fs::absolute(model_dir, ec).string();
  state.data = fs::absolute(options.data_path, ec).string();
  state.out = fs::absolute(options.out_dir, ec).string();
  state.run_steps = total_steps;
  state.save_every = options.save_every;
  state.keep_last = options.keep_last;
  state.remat = options.remat;
  state.mesh = options.mesh;
  state.plan = options.plan;
  // Where a save copies the tokenizer and generation config from: the model folder, then this
  // run's newest save, since pruning (--keep-last) may remove the checkpoint-N it resumed from.
  fs::path copy_source = model_dir;
  auto save = [&](int64_t step) -> Status {
    TL_ASSIGN_OR_RETURN(std::vector<Literal> trained, trainer->Weights());
    TL_ASSIGN_OR_RETURN(auto optimizer_state, trainer->OptimizerState());
    state.step = step;
    result.saved_step = step;
    if (!writer) return OkStatus();  // the others took part in gathering the parts
    TL_ASSIGN_OR_RETURN(result.saved_dir,
                        SaveCheckpoint(options.out_dir, copy_source, config, trained, stored,
                                       optimizer_state, state, options.keep_last));
    copy_source = result.saved_dir;
    return OkStatus();
  };

  int64_t tokens = 0, last_step = start_step;
  for (int64_t step = start_step + 1; step <= total_steps; ++step) {
    // The step boundary: a stop requested during the step before takes effect here.
    if (options.stop_requested && options.stop_requested()) {
      result.stopped = true;
      break;
    }
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
    if (writer) log << line.dump() << "\n" << std::flush;
    points.push_back({step, record.loss, record.lr});
    if (writer && result.plot_error.empty() &&
        (step == start_step + 1 || step == total_steps || step % plot_every == 0 ||
         Seconds(last_plot) >= 1.0)) {
      // The plot is a view of the loss log: failing to draw it does not stop the training.
      if (Status s = WriteLossSvg(plot_path, points, plot); !s.ok())
        result.plot_error = s.message();
      last_plot = std::chrono::steady_clock::now();
    }
    if (on_step) on_step(record, total_steps);
    last_step = step;
    if (options.save_every > 0 && step % options.save_every == 0 && step != total_steps)
      TL_RETURN_IF_ERROR(save(step));
  }
  result.tokens_per_second = result.train_seconds > 0 ? tokens / result.train_seconds : 0;
  if (const ShardedTrainer* sharded = trainer->sharded()) {
    // This process's devices only: the others' peaks are measured in their processes.
    const std::vector<int64_t> peaks = sharded->last_peak_bytes();
    for (size_t d = 0; d < peaks.size(); ++d)
      if (backend.is_addressable(static_cast<int>(d))) result.device_peak_bytes.push_back(peaks[d]);
    result.device_state_bytes = sharded->state_bytes_per_device();
  }
  if (writer && result.stopped && result.plot_error.empty() && last_step > start_step)
    if (Status s = WriteLossSvg(plot_path, points, plot); !s.ok()) result.plot_error = s.message();
  // A stop right after a periodic save has nothing new to save.
  if (last_step > start_step && result.saved_step != last_step) TL_RETURN_IF_ERROR(save(last_step));
  return result;
}

}  // namespace tlaloc::train
