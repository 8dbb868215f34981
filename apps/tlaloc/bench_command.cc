// `tlaloc bench -m MODEL [--dtype f32|bf16] [--kv-dtype f32|bf16] [--prompt-tokens N]
//  [--new-tokens M] [-t THREADS] [--target T] [--json] [--no-bandwidth] [--no-warmup]`: load
// time, prefill and decode speed (after an untimed warm-up request, as llama-bench times; the
// first request's prefill is reported beside them), peak resident memory, decode's share of the
// memory bandwidth and prefill's of the multiply-add peak (both probed in the same run,
// support/machine_probe.h) for a checkpoint, with a random prompt of N tokens and M greedy new
// tokens (no end token, so every run decodes exactly M tokens).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "blas_core.h"
#include "cli_options.h"
#include "commands.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/models/family.h"
#include "tlaloc/nn/int8_linear.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/runtime/target.h"
#include "tlaloc/support/machine_probe.h"
#include "tlaloc/support/thread_pool.h"

namespace tlaloc::cli {

namespace {

struct BenchArgs {
  std::string model, dtype, kv_dtype, target;
  int64_t prompt_tokens = 512, new_tokens = 128;
  std::optional<int> threads;
  uint64_t seed = 0;
  bool json = false;
  bool probes = true;  // measure the machine after the run (read bandwidth, multiply-add peak)
  bool warmup = true;  // an untimed request first, as llama-bench runs one
};

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t PeakRssBytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

// Experts one token uses in a sparse layer (0 when none is sparse).
int64_t ExpertsPerToken(const io::ModelConfig& config) {
  int64_t k = 0;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    k = std::max(k, config.FeedForwardOf(l).experts_per_token);
  return k;
}

// Bytes of weights one decode step reads: every parameter once, except the embedding table, of
// which a step reads one row (it is read whole as the LM head when tied), and stacked MoE
// experts, of which one token reads its num_experts_per_tok.
int64_t WeightBytesPerToken(const models::ModelFamily& family, const io::ModelConfig& config,
                            ElementType dtype) {
  int64_t bytes = 0;
  const int64_t top_k = ExpertsPerToken(config);
  const std::string embedding(family.embedding_weight);
  for (const auto& spec : family.weight_specs(config)) {
    if ((spec.name == embedding || spec.name == models::Int8ScaleName(embedding)) &&
        !config.tie_word_embeddings)
      continue;
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    if (!spec.stacked.empty()) n = n / spec.shape[0] * top_k;
    bytes += n * ElementSize(spec.TypeFor(dtype));  // int8 matrices: 1 byte, f16 scales 2
  }
  return bytes;
}

// Multiply-adds (x2) of a prefill of `tokens` tokens: every matrix once per token (stacked MoE
// experts: num_experts_per_tok of them; not the embedding table, a gather), the LM head once
// (logits of the last token only), and attention's two products over the causal pairs.
double PrefillFlops(const models::ModelFamily& family, const io::ModelConfig& config,
                    int64_t tokens) {
  const std::string embedding(family.embedding_weight);
  double per_token = 0;
  const double top_k = static_cast<double>(ExpertsPerToken(config));
  for (const auto& spec : family.weight_specs(config)) {
    if (spec.shape.size() < 2 || spec.name == embedding) continue;
    double n = 1;
    for (int64_t d : spec.shape) n *= static_cast<double>(d);
    if (!spec.stacked.empty()) n = n / spec.shape[0] * top_k;
    per_token += 2 * n;
  }
  const double head = 2.0 * config.vocab_size * config.hidden_size;
  const double pairs = static_cast<double>(tokens) * (tokens + 1) / 2;
  const double attention =
      4.0 * config.num_hidden_layers * config.num_attention_heads * config.head_dim * pairs;
  // An untied head is among the specs and ran per token above; count it once.
  const double head_per_token = config.tie_word_embeddings ? 0 : head;
  return (per_token - head_per_token) * tokens + head + attention;
}

int RunBench(const BenchArgs& a) {
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    std::fprintf(stderr, "tlaloc bench: %s\n", msg.c_str());
    return code;
  };
  auto usage = [&](const Status& s) { return fail(s.message(), ExitCodeForFlagError(s)); };
  auto choice = BackendChoiceFromFlag(a.target);
  if (!choice.ok()) return usage(choice.status());
  if (a.prompt_tokens < 1) return fail("--prompt-tokens must be at least 1", kExitUsage);
  if (a.new_tokens < 1) return fail("--new-tokens must be at least 1", kExitUsage);
  auto dtype = ParseDtypeFlag(a.dtype);
  if (!dtype.ok()) return usage(dtype.status());
  auto kv_dtype = ParseKvDtypeFlag(a.kv_dtype);
  if (!kv_dtype.ok()) return usage(kv_dtype.status());
  auto model = ResolveModelFlag(a.model);
  if (!model.ok()) return usage(model.status());
  if (Status s = ApplyThreads(a.threads); !s.ok()) return usage(s);
  const int threads = DefaultThreadPool().size();

  double t0 = Seconds();
  auto backend = MakeBackend(*choice);
  if (!backend.ok())
    return fail("target " + choice->ToString() + ": " + backend.status().message());
  const std::string backend_name = (*backend)->name();
  auto gen = generate::Generator::Load(model->string(), *dtype, std::move(*backend));
  if (!gen.ok()) return fail(gen.status().message());
  if (Status s = ApplyKvDtype(*kv_dtype, (*gen)->engine()); !s.ok()) return usage(s);
  const double load_s = Seconds() - t0;
  const auto& cfg = (*gen)->config();
  if (a.prompt_tokens + a.new_tokens > cfg.max_position_embeddings)
    return fail(
        "--prompt-tokens + --new-tokens = " + std::to_string(a.prompt_tokens + a.new_tokens) +
            " exceeds the model's context of " + std::to_string(cfg.max_position_embeddings),
        kExitUsage);

  // Random ids over the whole vocabulary: speed does not depend on which ids they are.
  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(cfg.vocab_size - 1));
  std::vector<int32_t> prompt(a.prompt_tokens);
  for (auto& id : prompt) id = pick(rng);

  generate::GenerateOptions opts;
  opts.max_new_tokens = a.new_tokens;
  opts.seed = a.seed;  // greedy: sampling stays at its defaults, no end token stops the run
  // The warm-up, as llama-bench's: a prompt of the same length (other ids, so nothing of it can
  // be reused) and one decode step, untimed in the figures below but reported as the first
  // request's. It pays what only a process's first request pays: first touches of the memory
  // its steps allocate (on a VM whose host backs guest memory lazily, about 30% of a cold MoE
  // prefill), oneDNN's kernel generation for each new shape.
  generate::GenerateTimings first;
  if (a.warmup) {
    std::vector<int32_t> other(a.prompt_tokens);
    for (auto& id : other) id = pick(rng);
    // The timed run's token budget (so the same KV cache and step programs serve both: another
    // cache length would leave the first cache's memory in the allocator, 86 MB more peak RSS
    // for qwen3-0.6b bf16), stopped after the prefill's token and one decode step's.
    int tokens = 0;
    opts.stop_requested = [&tokens](size_t) { return ++tokens >= 2; };
    auto warm = (*gen)->Generate({other}, opts, {}, &first);
    if (!warm.ok()) return fail("warm-up: " + warm.status().message());
    opts.stop_requested = nullptr;
  }
  generate::GenerateTimings tm;
  auto results = (*gen)->Generate({prompt}, opts, {}, &tm);
  if (!results.ok()) return fail(results.status().message());
  auto rate = [](int64_t n, double s) { return s > 0 ? n / s : 0.0; };
  const int64_t rss = PeakRssBytes();  // before the bandwidth probe's buffer
  const std::string dt(MlirName((*gen)->dtype()));
  const double decode_rate = rate(tm.decode_tokens, tm.decode_seconds);
  const double weight_bytes =
      static_cast<double>(WeightBytesPerToken((*gen)->engine().family(), cfg, (*gen)->dtype()));
  const double decode_read = weight_bytes * decode_rate;
  const double prefill_rate = rate(tm.prefill_tokens, tm.prefill_seconds);
  const double prefill_flops = PrefillFlops((*gen)->engine().family(), cfg, tm.prefill_tokens);
  const double prefill_flop_rate = tm.prefill_seconds > 0 ? prefill_flops / tm.prefill_seconds : 0;
  // The machine, measured after the run on as many pinned threads: its read bandwidth and the
  // multiply-add peak of the units prefill's products use (int8 checkpoints in the q8_0 form:
  // integer dot products; else the activations' type).
  PeakKind peak_kind = (*gen)->dtype() == ElementType::kBF16 ? PeakKind::kBf16 : PeakKind::kF32;
  if (cfg.quantization) {
    auto form = nn::CurrentInt8Form();
    if (form.ok() && *form == nn::Int8Form::kQ8_0) peak_kind = PeakKind::kInt8;
  }
  ProbeFigure bandwidth, peak;
  if (a.probes) {
    bandwidth = ProbeReadBandwidth(threads);
    peak = ProbePeakFlops(threads, peak_kind);
  }
  auto share = [](double x, const ProbeFigure& of) { return of.median > 0 ? x / of.median : 0.0; };
  if (a.json) {
    nlohmann::json j;
    j["model"] = a.model;
    j["dtype"] = dt;
    j["kv_dtype"] = MlirName((*gen)->engine().kv_dtype());
    j["target"] = backend_name;
    j["threads"] = threads;
    j["blas_core"] = BlasCoreName();
    j["load_s"] = load_s;
    j["compile_s"] = tm.compile_seconds + first.compile_seconds;
    j["warmup"] = a.warmup;
    if (a.warmup)
      j["first_prefill_tokens_per_s"] = rate(first.prefill_tokens, first.prefill_seconds);
    j["prefill_tokens"] = tm.prefill_tokens;
    j["prefill_s"] = tm.prefill_seconds;
    j["prefill_tokens_per_s"] = prefill_rate;
    j["prefill_flops"] = prefill_flops;
    j["prefill_flops_per_token"] = tm.prefill_tokens > 0 ? prefill_flops / tm.prefill_tokens : 0;
    j["prefill_flops_per_s"] = prefill_flop_rate;
    j["decode_tokens"] = tm.decode_tokens;
    j["decode_s"] = tm.decode_seconds;
    j["decode_tokens_per_s"] = decode_rate;
    j["peak_rss_bytes"] = rss;
    j["weight_bytes_per_token"] = weight_bytes;
    j["decode_weight_read_bytes_per_s"] = decode_read;
    if (a.probes) {
      j["machine_read_bytes_per_s"] = bandwidth.median;
      j["machine_read_low_high"] = {bandwidth.low, bandwidth.high};
      j["machine_read_passes"] = bandwidth.passes;
      j["machine_peak_flops_per_s"] = peak.median;
      j["machine_peak_low_high"] = {peak.low, peak.high};
      j["machine_peak_unit"] = peak.what;
      j["decode_bandwidth_share"] = share(decode_read, bandwidth);
      j["prefill_peak_share"] = share(prefill_flop_rate, peak);
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("model        %s (%s, KV cache %s, %d threads, OpenBLAS %s)\n", a.model.c_str(),
                dt.c_str(), std::string(MlirName((*gen)->engine().kv_dtype())).c_str(), threads,
                BlasCoreName().c_str());
    std::printf("load         %.3f s (compile %.3f s)\n", load_s,
                tm.compile_seconds + first.compile_seconds);
    if (a.warmup)
      std::printf("warm-up      %lld-token prompt in %.3f s: %.2f tokens/s (untimed below)\n",
                  static_cast<long long>(first.prefill_tokens), first.prefill_seconds,
                  rate(first.prefill_tokens, first.prefill_seconds));
    std::printf("prefill      %lld tokens in %.3f s: %.2f tokens/s, %.1f GFLOP/s",
                static_cast<long long>(tm.prefill_tokens), tm.prefill_seconds, prefill_rate,
                prefill_flop_rate / 1e9);
    if (a.probes)
      std::printf(", %.0f%% of the %.1f GFLOP/s peak of %s here (spread %.0f%%)",
                  100 * share(prefill_flop_rate, peak), peak.median / 1e9, peak.what.c_str(),
                  100 * peak.spread());
    std::printf("\n");
    std::printf("decode       %lld tokens in %.3f s: %.2f tokens/s\n",
                static_cast<long long>(tm.decode_tokens), tm.decode_seconds, decode_rate);
    std::printf("peak RSS     %.1f MiB\n", rss / 1048576.0);
    std::printf("weights      %.2f GB read per decoded token: %.2f GB/s while decoding",
                weight_bytes / 1e9, decode_read / 1e9);
    if (a.probes)
      std::printf(
          ", %.0f%% of the %.2f GB/s this machine reads (median of %d passes, spread %.0f%%)",
          100 * share(decode_read, bandwidth), bandwidth.median / 1e9, bandwidth.passes,
          100 * bandwidth.spread());
    std::printf("\n");
  }
  return 0;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Measure load, prefill and decode speed of a model");
  AddModelOption(cmd, &args->model);
  cmd->add_option("--dtype", args->dtype, "f32 or bf16 (default: as stored)");
  AddKvDtypeOption(cmd, &args->kv_dtype);
  cmd->add_option("--prompt-tokens", args->prompt_tokens, "random prompt length");
  cmd->add_option("--new-tokens", args->new_tokens, "greedy tokens to decode");
  AddThreadsOption(cmd, &args->threads);
  cmd->add_option("--seed", args->seed, "prompt and sampling seed");
  AddTargetOption(cmd, &args->target);
  cmd->add_flag("--json", args->json, "print one JSON object");
  cmd->add_flag("!--no-probes,!--no-bandwidth", args->probes,
                "skip measuring the machine after the run (its read bandwidth, for decode's "
                "share, and its multiply-add peak, for prefill's)");
  cmd->add_flag("!--no-warmup", args->warmup,
                "time the first request: by default an untimed request of the same prompt "
                "length and one decode step runs first, as llama-bench runs one");
  cmd->callback([args] { SetExitCode(RunBench(*args)); });
}

}  // namespace tlaloc::cli
