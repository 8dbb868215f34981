// `tlaloc finetune`: fine-tune a Hugging Face Qwen3 checkpoint on a JSONL file, with a progress
// bar on stderr, a loss log and a checkpoint in the input's form. `tlaloc finetune-demo`: the
// whole cycle on a generated task, with held-out accuracy before and after.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_options.h"
#include "commands.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/interp/multi_device.h"
#include "tlaloc/interp/process_world.h"
#include "tlaloc/ir/sharding.h"
#include "tlaloc/models/family.h"
#include "tlaloc/models/init.h"
#include "tlaloc/runtime/open_backend.h"
#include "tlaloc/runtime/target.h"
#include "tlaloc/support/atomic_file.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/train/checkpoint.h"
#include "tlaloc/train/finetune.h"
#include "tlaloc/train/loss_plot.h"

namespace tlaloc::cli {

namespace {

namespace fs = std::filesystem;

std::string Duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%ldh%02ldm", s / 3600, (s / 60) % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof(buf), "%ldm%02lds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof(buf), "%lds", s);
  }
  return buf;
}

// Step, loss, tokens/s and ETA on stderr: redrawn in place on a terminal,
// otherwise one line every `every` steps (and the last) so logs stay readable.
class ProgressBar {
 public:
  explicit ProgressBar(int64_t every) : tty_(isatty(STDERR_FILENO) != 0), every_(every) {}

  void Update(const train::StepRecord &r, int64_t total) {
    seconds_ += r.seconds;
    tokens_ += r.tokens;
    ++done_;
    const bool last = r.step == total;
    if (!tty_ && r.step % every_ != 0 && !last && done_ != 1) return;
    const double rate = seconds_ > 0 ? tokens_ / seconds_ : 0;
    const double eta = done_ > 0 ? seconds_ / done_ * static_cast<double>(total - r.step) : 0;
    constexpr int kWidth = 24;
    const int filled = total > 0 ? static_cast<int>(kWidth * r.step / total) : kWidth;
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "%sstep %lld/%lld [%s] loss %.4f | lr %.2e | %.0f tok/s | ETA %s%s",
                 tty_ ? "\r" : "", static_cast<long long>(r.step), static_cast<long long>(total),
                 bar.c_str(), r.loss, r.lr, rate, Duration(eta).c_str(),
                 tty_ ? (last ? "\n" : "  ") : "\n");
    std::fflush(stderr);
  }

 private:
  bool tty_;
  int64_t every_;
  int64_t done_ = 0, tokens_ = 0;
  double seconds_ = 0;
};

StatusOr<std::shared_ptr<Backend>> BackendFor(const std::string &target) {
  TL_ASSIGN_OR_RETURN(BackendChoice choice, BackendChoiceFromFlag(target));
  TL_ASSIGN_OR_RETURN(auto backend,
                      runtime::OpenBackend(choice, std::nullopt, SingleProcessWorld()));
  return std::shared_ptr<Backend>(std::move(backend));
}

// The processes of this run: a world of one, or mpirun's ranks.
ProcessWorld *g_world = &SingleProcessWorld();

// The mesh's devices (runtime/open_backend.h): the interpreter, or a CPU-family plugin, gets
// them unless TLALOC_CPU_DEVICES says otherwise; under mpirun each rank its share of the
// interpreter's.
StatusOr<std::shared_ptr<Backend>> FinetuneBackend(const std::string &target,
                                                   const std::string &mesh_text) {
  TL_ASSIGN_OR_RETURN(BackendChoice choice, BackendChoiceFromFlag(target));
  const int ranks = g_world->size();
  if (ranks > 1 && choice.interpreter && mesh_text.empty())
    return InvalidArgument("a run across " + std::to_string(ranks) + " processes (mpirun -np " +
                           std::to_string(ranks) + ") needs --mesh and --plan (e.g. --mesh data=" +
                           std::to_string(ranks) + " --plan dp)");
  std::optional<Mesh> mesh;
  if (!mesh_text.empty()) {
    TL_ASSIGN_OR_RETURN(mesh, Mesh::Parse(mesh_text));
  }
  TL_ASSIGN_OR_RETURN(auto backend, runtime::OpenBackend(choice, mesh, *g_world));
  return std::shared_ptr<Backend>(std::move(backend));
}

// Every rank reports its own failure, named; then the whole job ends (MPI_Abort), so no rank
// waits at a collective for one that gave up.
int Fail(const char *command, const std::string &message, int code = kExitFailure) {
  if (g_world->size() > 1) {
    std::fprintf(stderr, "tlaloc %s: rank %d of %d: %s\n", command, g_world->rank(),
                 g_world->size(), message.c_str());
    std::fflush(stderr);
    g_world->Abort(code);
  }
  std::fprintf(stderr, "tlaloc %s: %s\n", command, message.c_str());
  return code;
}

// SIGINT/SIGTERM during finetune: the signal's number, so the run stops at the next step
// boundary with a save instead of losing the steps since the start.
volatile std::sig_atomic_t g_stop_signal = 0;

extern "C" void OnStopSignal(int sig) {
  g_stop_signal = sig;
  static const char kMessage[] =
      "\ntlaloc finetune: stopping after this step and saving (signal again to quit at once)\n";
  // write(2) is async-signal-safe; stdio is not.
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
}

// SA_RESETHAND: a second signal takes the default action, which is safe because every save is
// atomic (the newest complete save stays).
void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

struct FinetuneArgs {
  train::FinetuneOptions options;
  std::string target;
  int64_t print_every = 0;
  bool overwrite = false;  // --overwrite: replace what an earlier run left in --out
};

int RunFinetuneCommand(const FinetuneArgs &a) {
  auto world = CurrentWorld();
  if (!world.ok()) return Fail("finetune", world.status().message());
  g_world = *world;
  // Only rank 0 speaks (and writes); the others report failures only.
  const bool quiet = g_world->rank() != 0;
  auto backend = FinetuneBackend(a.target, a.options.mesh);
  if (!backend.ok()) return Fail("finetune", backend.status().message());
  if (!a.options.mesh.empty()) {
    auto mesh = Mesh::Parse(a.options.mesh);  // CheckFinetuneFlags parsed it
    if (mesh.ok() && mesh->num_devices() > (*backend)->num_devices())
      return Fail("finetune",
                  "--mesh " + a.options.mesh + " needs " + std::to_string(mesh->num_devices()) +
                      " devices; " + (*backend)->name() + " has " +
                      std::to_string((*backend)->num_devices()) + " (TLALOC_CPU_DEVICES)",
                  kExitUsage);
  }
  if (!quiet && !a.options.resume_dir.empty()) {
    auto save = train::FindNewestSave(a.options.resume_dir);
    // The batch and sequence length are the save's, not the flags' defaults.
    std::fprintf(stderr, "tlaloc finetune: %s on %s, resuming %s at step %lld\n",
                 a.options.data_path.c_str(), (*backend)->name().c_str(),
                 save.ok() ? save->dir.c_str() : a.options.resume_dir.c_str(),
                 static_cast<long long>(save.ok() ? save->step : 0));
  } else if (!quiet) {
    std::fprintf(
        stderr, "tlaloc finetune: %s on %s, batch %lld x %lld tokens%s\n",
        a.options.data_path.c_str(), (*backend)->name().c_str(),
        static_cast<long long>(a.options.batch), static_cast<long long>(a.options.seq_len),
        a.options.plan.empty()
            ? ""
            : (", plan " + a.options.plan + " over mesh " + a.options.mesh +
               (g_world->size() > 1 ? " across " + std::to_string(g_world->size()) + " processes"
                                    : ""))
                  .c_str());
  }
  std::unique_ptr<ProgressBar> bar;
  auto on_step = [&](const train::StepRecord &r, int64_t total) {
    if (quiet) return;
    if (!bar)
      bar = std::make_unique<ProgressBar>(a.print_every > 0 ? a.print_every
                                                            : std::max<int64_t>(1, total / 20));
    bar->Update(r, total);
  };
  train::FinetuneOptions options = a.options;
  // Across processes a signal ends the job at once (mpirun forwards it to every rank; ranks
  // stopping at different step boundaries would leave the others at a collective), so the
  // newest complete save is what remains.
  if (g_world->size() == 1) {
    options.stop_requested = [] { return g_stop_signal != 0; };
    InstallStopHandlers();
  }
  auto result = train::RunFinetune(options, **backend, on_step);
  if (!result.ok())
    return Fail("finetune", result.status().message(),
                result.status().code() == train::kNothingLeftToTrain ? kExitUsage : kExitFailure);
  if (result->stopped) {
    // The shell's convention for a death by signal: 128 + its number (130 SIGINT, 143 SIGTERM).
    const int sig = g_stop_signal;
    const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
    if (result->saved_step == 0) {
      std::fprintf(stderr, "tlaloc finetune: stopped by %s before the first step; nothing saved\n",
                   name);
    } else {
      const std::string out = a.options.out_dir.string();
      std::fprintf(stderr,
                   "tlaloc finetune: stopped by %s after step %lld of %lld; saved %s (and %s)\n"
                   "resume with: tlaloc finetune --resume %s\n",
                   name, static_cast<long long>(result->saved_step),
                   static_cast<long long>(result->total_steps), result->saved_dir.c_str(),
                   out.c_str(), out.c_str());
    }
    return 128 + sig;
  }
  if (quiet) return kExitOk;
  if (!result->device_peak_bytes.empty()) {
    std::string peaks;
    for (int64_t b : result->device_peak_bytes)
      peaks += (peaks.empty() ? "" : ", ") + std::to_string(b);
    std::fprintf(stderr,
                 "tlaloc finetune: per device: %lld bytes of parameters and moments; peak live "
                 "bytes in the last step: %s\n",
                 static_cast<long long>(result->device_state_bytes), peaks.c_str());
  }
  if (!result->plot_error.empty())
    std::fprintf(stderr, "tlaloc finetune: warning: no loss plot: %s\n",
                 result->plot_error.c_str());
  std::fprintf(
      stderr,
      "tlaloc finetune: %zu steps in %s (%.0f tokens/s; setup %.1fs); "
      "wrote %s (loss log %s, plot %s)\n",
      result->steps.size(), Duration(result->train_seconds).c_str(), result->tokens_per_second,
      result->setup_seconds, a.options.out_dir.c_str(), std::string(train::kLossLogFile).c_str(),
      result->plot_error.empty() ? (a.options.out_dir / train::kLossPlotFile).c_str() : "none");
  return kExitOk;
}

// True when `a` and `b` name the same folder (either may not exist).
bool SameFolder(const fs::path &a, const fs::path &b) {
  std::error_code ec1, ec2;
  return fs::weakly_canonical(a, ec1) == fs::weakly_canonical(b, ec2) && !ec1 && !ec2;
}

// A run writes its checkpoints, loss log and trainer state into --out, replacing an earlier run's:
// a non-empty --out is refused (as quantize refuses one) unless --overwrite says so or the run is
// a --resume of what is there (--resume OUT or one of OUT's checkpoint-N folders).
Status CheckOutFolder(const train::FinetuneOptions &o, bool overwrite) {
  std::error_code ec;
  if (overwrite || !fs::exists(o.out_dir, ec)) return OkStatus();
  if (!fs::is_directory(o.out_dir, ec))
    return InvalidArgument("--out " + o.out_dir.string() + " exists and is not a folder");
  if (fs::is_empty(o.out_dir, ec)) return OkStatus();
  if (!o.resume_dir.empty()) {
    const fs::path resume = fs::weakly_canonical(o.resume_dir, ec);
    if (SameFolder(resume, o.out_dir) || SameFolder(resume.parent_path(), o.out_dir))
      return OkStatus();
  }
  return InvalidArgument("--out " + o.out_dir.string() +
                         " is not empty (an earlier run's checkpoints, loss log or trainer state "
                         "would be replaced): choose another folder, continue that run with "
                         "--resume " +
                         o.out_dir.string() + ", or give --overwrite");
}

std::string Shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}
std::string Shown(int64_t v) { return std::to_string(v); }
std::string Shown(uint64_t v) { return std::to_string(v); }
std::string Shown(bool v) { return v ? "on" : "off"; }
std::string Shown(const std::string &v) { return v.empty() ? "none" : v; }

// `--resume DIR` continues the run its newest save records: every recorded setting (data, out,
// steps, batch, seq-len, lr, warmup, weight decay, clipping, seed, --save-every, --keep-last,
// --remat, mesh and plan) unless given here; each given one that differs is named in a notice,
// and other data than the run's is warned about. Nothing saved there is one clear error.
Status MergeResumeSettings(FinetuneArgs &a, const std::function<bool(const char *)> &given) {
  train::FinetuneOptions &o = a.options;
  auto save = train::FindNewestSave(o.resume_dir);
  if (!save.ok())
    return NotFound("--resume " + o.resume_dir.string() + ": nothing saved there to resume (no " +
                    std::string(train::kTrainerStateFile) +
                    " in it or in a checkpoint-N folder of it); start a run with --model DIR");
  TL_ASSIGN_OR_RETURN(train::TrainerState saved, train::ReadTrainerState(save->dir));
  const bool recorded = saved.run_steps > 0;  // saves before the run's flags were recorded
  std::vector<std::string> overrides;
  auto take = [&](const char *flag, auto &value, const auto &stored, bool known) {
    if (!known) return;
    if (!given(flag)) {
      value = stored;
    } else if (value != stored) {
      overrides.push_back(std::string(flag) + " " + Shown(value) + " (the run's: " + Shown(stored) +
                          ")");
    }
  };
  take("--seed", o.seed, saved.seed, true);
  take("--batch", o.batch, saved.batch, true);
  take("--seq-len", o.seq_len, saved.seq_len, true);
  take("--lr", o.lr, saved.lr, true);
  take("--warmup", o.warmup_steps, saved.warmup_steps, true);
  take("--weight-decay", o.weight_decay, saved.weight_decay, true);
  take("--grad-clip", o.grad_clip_norm, saved.grad_clip_norm, true);
  take("--save-every", o.save_every, saved.save_every, saved.save_every >= 0);
  take("--keep-last", o.keep_last, saved.keep_last, saved.keep_last >= 0);
  take("--remat", o.remat, saved.remat, recorded);
  take("--mesh", o.mesh, saved.mesh, recorded);
  take("--plan", o.plan, saved.plan, recorded);
  if (!given("--epochs")) take("--steps", o.steps, saved.run_steps, recorded);
  if (!given("--data")) {
    if (saved.data.empty())
      return InvalidArgument("--resume " + o.resume_dir.string() +
                             ": the save does not record its data file: give --data");
    o.data_path = saved.data;
  } else if (!saved.data.empty() && !SameFolder(o.data_path, saved.data)) {
    std::fprintf(stderr,
                 "tlaloc finetune: warning: --data %s is not the data this run trained on (%s); "
                 "the resumed steps read other documents than an unbroken run would\n",
                 o.data_path.c_str(), saved.data.c_str());
  }
  if (!given("--out")) {
    if (!saved.out.empty()) {
      o.out_dir = saved.out;
    } else {
      // An older save: the run's folder is DIR, or the folder holding DIR's checkpoint-N.
      const fs::path dir = fs::weakly_canonical(o.resume_dir);
      o.out_dir = dir.filename().string().rfind("checkpoint-", 0) == 0 ? dir.parent_path() : dir;
    }
  }
  o.resume_settings_merged = true;
  std::string list;
  for (const std::string &item : overrides) list += (list.empty() ? "" : ", ") + item;
  if (!list.empty())
    std::fprintf(stderr, "tlaloc finetune: resuming with settings other than the run's: %s\n",
                 list.c_str());
  return OkStatus();
}

// Usage errors found before anything loads: each flag's range, then --seq-len against the
// model's max_position_embeddings when its config.json reads (one that does not is left to
// the run, which reports it as a failure). `given` says which flags were on the command line.
Status CheckFinetuneFlags(const FinetuneArgs &a, const std::function<bool(const char *)> &given) {
  const train::FinetuneOptions &o = a.options;
  // 0 is the option's "not given" value (run --epochs passes), so a given 0 is refused here.
  if (given("--steps") && o.steps < 1)
    return InvalidArgument("--steps must be >= 1, got " + std::to_string(o.steps));
  if (given("--epochs") && o.epochs < 1)
    return InvalidArgument("--epochs must be >= 1, got " + std::to_string(o.epochs));
  if (given("--schedule-steps") && o.schedule_steps < 1)
    return InvalidArgument("--schedule-steps must be >= 1, got " +
                           std::to_string(o.schedule_steps));
  if (a.print_every < 0)
    return InvalidArgument("--print-every must be >= 0, got " + std::to_string(a.print_every));
  TL_RETURN_IF_ERROR(train::CheckFinetuneOptions(o));
  TL_RETURN_IF_ERROR(CheckOutFolder(o, a.overwrite));
  if (!o.resume_dir.empty()) {
    // The saved seq_len fitted when it was saved; what is left to train is checked here when
    // --steps says it (with --epochs the run finds out once the data is loaded).
    auto save = train::FindNewestSave(o.resume_dir);
    if (save.ok() && o.steps > 0 && save->step >= o.steps)
      return InvalidArgument("--resume " + o.resume_dir.string() + ": the save in " +
                             save->dir.string() + " is at step " + std::to_string(save->step) +
                             ", not before --steps " + std::to_string(o.steps) +
                             ": nothing left to train (give a larger --steps)");
    return OkStatus();
  }
  auto config = io::LoadModelConfig(o.model_dir / "config.json");
  if (config.ok()) TL_RETURN_IF_ERROR(train::CheckFinetuneOptions(o, &*config));
  return OkStatus();
}

// --- finetune-demo ---------------------------------------------------------------------------

struct DemoArgs {
  std::string out = "out/finetune-demo";
  std::string task = "upper";
  std::string target;
  int64_t train_size = 4000;
  int64_t held_out = 40;
  int64_t steps = 1000;
  int64_t batch = 8;
  int64_t seq_len = 100;
  double lr = 5e-3;  // 2e-2 learned or not depending on BLAS rounding; 5e-3 learns under either
  uint64_t seed = 0;
};

// The fine-tuning settings of the demo's run (paths relative to its --out folder).
train::FinetuneOptions DemoFinetuneOptions(const DemoArgs &a) {
  const fs::path out = a.out;
  train::FinetuneOptions options;
  options.model_dir = out / "base";
  options.data_path = out / "train.jsonl";
  options.out_dir = out / "tuned";
  options.steps = a.steps;
  options.batch = a.batch;
  options.seq_len = a.seq_len;
  options.lr = a.lr;
  options.warmup_steps = std::min<int64_t>(20, a.steps / 10);
  options.weight_decay = 0.0;
  options.seed = a.seed;
  options.plot_title = "tlaloc finetune-demo: task \"" + a.task + "\"";
  return options;
}

// Usage errors of finetune-demo's flags, before any file is written.
Status CheckDemoFlags(const DemoArgs &a) {
  if (a.steps < 1) return InvalidArgument("--steps must be >= 1, got " + std::to_string(a.steps));
  if (a.train_size < 1)
    return InvalidArgument("--train-size must be >= 1, got " + std::to_string(a.train_size));
  if (a.held_out < 1)
    return InvalidArgument("--held-out must be >= 1, got " + std::to_string(a.held_out));
  const io::ModelConfig config = train::DemoModelConfig();
  TL_RETURN_IF_ERROR(train::CheckFinetuneOptions(DemoFinetuneOptions(a), &config));
  // An unknown --task, or more held-out questions than the task has.
  return train::MakeDemoTask(a.task, a.train_size, a.held_out, a.seed).status();
}

struct Score {
  int64_t right = 0;                   // answers exactly right
  int64_t chars_right = 0, chars = 0;  // answer characters right in their place
};

// Greedy answers to the held-out questions, scored against the expected ones.
StatusOr<Score> Evaluate(const fs::path &model, std::shared_ptr<Backend> backend,
                         const std::vector<train::DemoExample> &questions, int64_t show) {
  TL_ASSIGN_OR_RETURN(auto generator,
                      generate::Generator::Load(model, ElementType::kF32, std::move(backend)));
  TL_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::FromFile((model / "tokenizer.json")));
  TL_ASSIGN_OR_RETURN(ChatTemplate chat_template, ChatTemplate::FromCheckpoint(model));
  std::vector<std::vector<int32_t>> prompts;
  for (const auto &q : questions) {
    std::vector<ChatMessage> messages{{"user", q.question, std::nullopt}};
    ChatOptions chat;
    chat.enable_thinking = false;  // the prompt ends with the empty think block training saw
    TL_ASSIGN_OR_RETURN(std::string text, chat_template.Render(messages, chat));
    prompts.push_back(tokenizer.Encode(text));
  }
  generate::GenerateOptions options;
  options.max_new_tokens = 8;
  options.eos_token_ids = generator->config().eos_token_ids;
  TL_ASSIGN_OR_RETURN(auto results, generator->Generate(prompts, options));
  DecodeOptions decode;
  decode.skip_special_tokens = true;
  Score score;
  for (size_t i = 0; i < questions.size(); ++i) {
    TL_ASSIGN_OR_RETURN(std::string answer,
                        tokenizer.DecodeBytes(results[i].generated_ids, decode));
    const std::string &expected = questions[i].answer;
    const bool ok = answer == expected;
    score.right += ok ? 1 : 0;
    score.chars += static_cast<int64_t>(expected.size());
    for (size_t c = 0; c < expected.size() && c < answer.size(); ++c)
      score.chars_right += answer[c] == expected[c] ? 1 : 0;
    if (static_cast<int64_t>(i) < show) {
      std::string shown;
      // Random weights emit arbitrary bytes; show those escaped rather than as mojibake.
      for (unsigned char c : answer) {
        char hex[8];
        std::snprintf(hex, sizeof(hex), "\\x%02x", c);
        shown += (c >= 0x20 && c < 0x7f) ? std::string(1, static_cast<char>(c)) : std::string(hex);
      }
      std::fprintf(stderr, "    %-8s -> %-12s %s\n", questions[i].question.c_str(),
                   ("\"" + shown + "\"").c_str(), ok ? "right" : "wrong");
    }
  }
  return score;
}

Status WriteText(const fs::path &path, const std::string &text) {
  return WriteStringAtomic(path, text);
}

int RunDemo(const DemoArgs &a) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto backend = BackendFor(a.target);
  if (!backend.ok()) return Fail("finetune-demo", backend.status().message());
  const fs::path out = a.out, base = out / "base", tuned = out / "tuned";
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Fail("finetune-demo", "cannot create " + out.string() + ": " + ec.message());

  auto task = train::MakeDemoTask(a.task, a.train_size, a.held_out, a.seed);
  if (!task.ok()) return Fail("finetune-demo", task.status().message());
  Status s = WriteText(out / "tokenizer.json", train::ByteTokenizerJson());
  if (s.ok()) s = WriteText(out / "train.jsonl", train::ChatJsonl(task->train));
  if (s.ok()) s = WriteText(out / "held_out.jsonl", train::ChatJsonl(task->held_out));
  models::InitOptions init;
  init.seed = a.seed;
  init.tokenizer_json = out / "tokenizer.json";
  const io::ModelConfig config = train::DemoModelConfig();
  if (s.ok()) s = models::WriteRandomCheckpoint(config, base, init);
  if (!s.ok()) return Fail("finetune-demo", s.message());
  std::fprintf(stderr,
               "finetune-demo: task \"%s\": %zu training conversations, %zu "
               "held-out questions\n"
               "  model: random Qwen3 (%lld parameters: hidden %lld, %lld "
               "layers, byte-level "
               "vocabulary of %lld) in %s, backend %s\n",
               task->description.c_str(), task->train.size(), task->held_out.size(),
               static_cast<long long>(models::ParameterCount(config)),
               static_cast<long long>(config.hidden_size),
               static_cast<long long>(config.num_hidden_layers),
               static_cast<long long>(config.vocab_size), base.c_str(), (*backend)->name().c_str());

  std::fprintf(stderr, "before fine-tuning, greedy answers to held-out questions:\n");
  auto before = Evaluate(base, *backend, task->held_out, 4);
  if (!before.ok()) return Fail("finetune-demo", before.status().message());

  const train::FinetuneOptions options = DemoFinetuneOptions(a);
  std::fprintf(stderr, "fine-tuning %lld steps of %lld x %lld tokens, lr %g:\n",
               static_cast<long long>(a.steps), static_cast<long long>(a.batch),
               static_cast<long long>(a.seq_len), a.lr);
  ProgressBar bar(std::max<int64_t>(1, a.steps / 15));
  auto result = train::RunFinetune(
      options, **backend, [&](const train::StepRecord &r, int64_t total) { bar.Update(r, total); });
  if (!result.ok()) return Fail("finetune-demo", result.status().message());

  std::fprintf(stderr, "after fine-tuning:\n");
  auto after = Evaluate(tuned, *backend, task->held_out, 4);
  if (!after.ok()) return Fail("finetune-demo", after.status().message());
  const double first = result->steps.front().loss, last = result->steps.back().loss;
  auto percent = [](const Score &s) { return s.chars > 0 ? 100.0 * s.chars_right / s.chars : 0; };
  std::printf(
      "held-out answers exactly right: before %lld/%zu, after %lld/%zu; characters right: "
      "before %.0f%%, after %.0f%%\n(loss %.3f -> %.3f; %zu steps in %s, %.0f tokens/s; total "
      "%s)\n",
      static_cast<long long>(before->right), task->held_out.size(),
      static_cast<long long>(after->right), task->held_out.size(), percent(*before),
      percent(*after), first, last, result->steps.size(), Duration(result->train_seconds).c_str(),
      result->tokens_per_second, Duration(elapsed()).c_str());
  // loss.svg again, now with the held-out scores the run was for.
  train::LossPlotOptions plot;
  plot.title = options.plot_title;
  plot.total_steps = a.steps;
  char note[160];
  std::snprintf(note, sizeof(note),
                "held-out answers exactly right: before %lld/%zu, after %lld/%zu "
                "(characters right: %.0f%% -> %.0f%%)",
                static_cast<long long>(before->right), task->held_out.size(),
                static_cast<long long>(after->right), task->held_out.size(), percent(*before),
                percent(*after));
  plot.notes.push_back(note);
  std::vector<train::LossPoint> points;
  for (const train::StepRecord &r : result->steps) points.push_back({r.step, r.loss, r.lr});
  const fs::path plot_path = tuned / train::kLossPlotFile;
  if (Status p = train::WriteLossSvg(plot_path, points, plot); !p.ok())
    std::fprintf(stderr, "finetune-demo: warning: no loss plot: %s\n", p.message().c_str());
  std::printf(
      "fine-tuned checkpoint: %s (try: tlaloc generate --model %s "
      "--chat \"%s\"); loss plot: %s\n",
      tuned.c_str(), tuned.c_str(), task->held_out.front().question.c_str(), plot_path.c_str());
  return kExitOk;
}

}  // namespace

void RegisterFinetuneCommand(CLI::App &app) {
  auto a = std::make_shared<FinetuneArgs>();
  auto *cmd = app.add_subcommand("finetune", "Fine-tune a Qwen3 checkpoint on a JSONL file");
  auto &o = a->options;
  cmd->add_option("-m,--model", o.model_dir, "Hugging Face checkpoint folder to start from");
  cmd->add_option("--data", o.data_path,
                  "JSONL rows of {\"text\"} or chat {\"messages\"} (resume: the run's)");
  cmd->add_option("--out", o.out_dir,
                  "output folder (checkpoint, loss log, optimizer state; resume: the run's)");
  cmd->add_option("--steps", o.steps, "total optimizer steps (default: --epochs passes)");
  cmd->add_option("--epochs", o.epochs, "passes over the data when --steps is not given");
  // A resumed run takes these from its save unless given (MergeResumeSettings).
  cmd->add_option("--batch", o.batch, "sequences per step")->capture_default_str();
  cmd->add_option("--seq-len", o.seq_len, "tokens per sequence")->capture_default_str();
  cmd->add_option("--lr", o.lr, "peak learning rate")->capture_default_str();
  cmd->add_option("--warmup", o.warmup_steps, "linear warmup steps")->capture_default_str();
  cmd->add_option("--schedule-steps", o.schedule_steps,
                  "steps the cosine schedule spans (default: --steps)");
  cmd->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay")
      ->capture_default_str();
  cmd->add_option("--grad-clip", o.grad_clip_norm, "clip gradients to this global norm (0: off)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "data shuffling seed")->capture_default_str();
  AddTargetOption(cmd, &a->target);
  cmd->add_option("--resume", o.resume_dir,
                  "continue from the newest save in a previous --out folder (or a checkpoint-N)");
  cmd->add_flag("--overwrite", a->overwrite,
                "replace what an earlier run left in a non-empty --out (refused otherwise)");
  cmd->add_option("--print-every", a->print_every,
                  "progress line every N steps when stderr is not a terminal");
  cmd->add_option("--save-every", o.save_every,
                  "also save OUT/checkpoint-N every N steps (a kill loses at most N steps)");
  cmd->add_option("--keep-last", o.keep_last, "checkpoint-N folders kept (0: all)")
      ->capture_default_str();
  cmd->add_flag("--remat", o.remat,
                "recompute each layer in the backward pass: less memory, one more forward's work");
  cmd->add_option("--mesh", o.mesh,
                  "device mesh, e.g. data=2 or data=2,model=2 (the interpreter gets its size in "
                  "devices unless TLALOC_CPU_DEVICES is set)");
  cmd->add_option("--plan", o.plan, "sharding plan over --mesh: dp, fsdp, tp or dp_tp");
  cmd->add_option("--programs", o.programs_dir,
                  "write the train step here: train_step.mlir (per device) and, with --plan, "
                  "train_step.sdy.mlir (global, Shardy-annotated)");
  cmd->callback([a, cmd] {
    auto given = [cmd](const char *flag) { return cmd->get_option(flag)->count() > 0; };
    Status merged = OkStatus();
    if (!a->options.resume_dir.empty()) {
      merged = MergeResumeSettings(*a, given);
    } else if (!given("--data") || !given("--out")) {
      merged = InvalidArgument(std::string(given("--data") ? "--out" : "--data") +
                               " is required (or --resume DIR, which continues a run)");
    }
    if (!merged.ok()) {
      SetExitCode(Fail("finetune", merged.message(), kExitUsage));
      return;
    }
    if (Status s = CheckFinetuneFlags(*a, given); !s.ok()) {
      SetExitCode(Fail("finetune", s.message(), kExitUsage));
      return;
    }
    SetExitCode(RunFinetuneCommand(*a));
  });

  auto d = std::make_shared<DemoArgs>();
  auto *demo = app.add_subcommand("finetune-demo",
                                  "Create a tiny model, fine-tune it on a "
                                  "generated task, score held-out answers");
  demo->add_option("--out", d->out, "working folder")->capture_default_str();
  demo->add_option("--task", d->task, "upper, reverse or add")->capture_default_str();
  demo->add_option("--steps", d->steps, "optimizer steps")->capture_default_str();
  demo->add_option("--train-size", d->train_size, "training conversations")->capture_default_str();
  demo->add_option("--held-out", d->held_out, "held-out questions")->capture_default_str();
  demo->add_option("--batch", d->batch, "sequences per step")->capture_default_str();
  demo->add_option("--seq-len", d->seq_len, "tokens per sequence")->capture_default_str();
  demo->add_option("--lr", d->lr, "peak learning rate")->capture_default_str();
  demo->add_option("--seed", d->seed, "model, task and shuffling seed")->capture_default_str();
  AddTargetOption(demo, &d->target);
  demo->callback([d] {
    if (Status s = CheckDemoFlags(*d); !s.ok()) {
      SetExitCode(Fail("finetune-demo", s.message(), kExitUsage));
      return;
    }
    SetExitCode(RunDemo(*d));
  });
}

}  // namespace tlaloc::cli
