// `tlaloc generate --model DIR (--prompt TEXT | --chat TEXT | stdin) [--max-new-tokens N]
//  [--temperature T --top-k K --top-p P --seed S] [--dtype f32|bf16] [--target T] [--json]
//  [--kernels MAPPING.json [--kernels-lock FILE] [--trust-kernels]]`:
// runs a Qwen3 checkpoint on the interpreter or a PJRT plugin, streaming the text as it is
// decoded; --kernels swaps mapped layers for kernels from kernel repositories (kernelize).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli_options.h"
#include "commands.h"
#include "tlaloc/generate/generator.h"
#include "tlaloc/kernels/kernelize.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/runtime/target.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc::cli {

namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string model, prompt, chat, dtype, target;
  std::string kernels, kernels_lock;
  bool trust_kernels = false;
  std::optional<int64_t> max_new_tokens, top_k;
  std::optional<double> temperature, top_p;
  uint64_t seed = 0;
  bool json = false;
};

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Loads the kernels a mapping names for the host CPU (inference) and builds the interpreter
// backend that runs their custom calls. Only the interpreter target: a cpu kernel's handler runs
// in this process, not inside a plugin.
struct KernelSetup {
  std::optional<kernels::Kernelizer> kernelizer;
  kernels::Lockfile lock;
};

StatusOr<std::unique_ptr<Backend>> MakeKernelizedBackend(const GenerateArgs& a, double rms_eps,
                                                         KernelSetup& setup) {
  auto text = kernels::ReadFileBytes(a.kernels);
  if (!text.ok()) return text.status().WithContext("--kernels");
  auto mapping = kernels::ParseKernelMapping(*text);
  if (!mapping.ok()) return mapping.status().WithContext("--kernels " + a.kernels);
  kernels::KernelizeOptions options;
  options.loader.trust_remote_code = a.trust_kernels;
  if (!a.kernels_lock.empty()) {
    auto lock = kernels::ReadLockfile(a.kernels_lock);
    if (!lock.ok()) return lock.status().WithContext("--kernels-lock");
    setup.lock = std::move(*lock);
    options.loader.lockfile = &setup.lock;
  }
  options.layer_attributes["RMSNorm"]["eps"] = rms_eps;
  auto kernelizer = kernels::Kernelizer::Create(*mapping, options);
  if (!kernelizer.ok()) return kernelizer.status();
  for (const auto& [layer, why] : kernelizer->unresolved())
    std::fprintf(stderr, "tlaloc generate: %s keeps its decomposition: %s\n", layer.c_str(),
                 why.c_str());
  InterpreterOptions io;
  io.custom_calls = kernelizer->CustomCalls();
  setup.kernelizer = std::move(*kernelizer);
  return MakeInterpreterBackend(io);
}

int RunGenerate(const GenerateArgs& a) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "tlaloc generate: %s\n", msg.c_str());
    return 1;
  };
  auto choice = BackendChoiceFromFlag(a.target);
  if (!choice.ok()) return fail(choice.status().message());
  if (!a.prompt.empty() && !a.chat.empty()) return fail("give at most one of --prompt and --chat");
  auto dtype = ParseDtypeFlag(a.dtype);
  if (!dtype.ok()) return fail(dtype.status().message());
  const fs::path dir = a.model;
  double t0 = Seconds();
  KernelSetup kernel_setup;
  StatusOr<std::unique_ptr<Backend>> backend = std::unique_ptr<Backend>();
  if (!a.kernels.empty()) {
    if (!choice->interpreter)
      return fail("--kernels runs kernels on the interpreter only; drop --target " +
                  choice->ToString() + " or --kernels");
    auto config = io::LoadModelConfig(dir);
    if (!config.ok()) return fail(config.status().message());
    backend = MakeKernelizedBackend(a, config->rms_norm_eps, kernel_setup);
    if (!backend.ok()) return fail(backend.status().message());
  } else {
    backend = MakeBackend(*choice);
    if (!backend.ok())
      return fail("target " + choice->ToString() + ": " + backend.status().message());
  }
  const std::string backend_name = (*backend)->name();
  auto gen = generate::Generator::Load(dir, *dtype, std::move(*backend));
  if (!gen.ok()) return fail(gen.status().message());
  size_t kernel_calls = 0;
  if (kernel_setup.kernelizer) {
    (*gen)->set_program_transform(
        [&](std::shared_ptr<Module> module, const nn::LayerTrace& trace) -> Status {
          auto r = kernel_setup.kernelizer->Apply(std::move(module), trace);
          if (!r.ok()) return r.status();
          kernel_calls += r->replaced.size();
          return OkStatus();
        });
  }
  if (!fs::exists(dir / "tokenizer.json")) return fail(a.model + " has no tokenizer.json");
  auto tok = Tokenizer::FromFile((dir / "tokenizer.json").string());
  if (!tok.ok()) return fail(tok.status().message());
  auto gcfg = io::LoadGenerationConfigOrDefault(dir, (*gen)->config());
  if (!gcfg.ok()) return fail(gcfg.status().message());
  const double load_s = Seconds() - t0;

  std::string text;
  std::vector<int32_t> prompt_ids;
  if (!a.chat.empty()) {
    std::vector<ChatMessage> msgs{{"user", a.chat, std::nullopt}};
    auto rendered = RenderQwen3Chat(msgs);
    if (!rendered.ok()) return fail(rendered.status().message());
    prompt_ids = tok->Encode(*rendered);
  } else {
    text = a.prompt;
    if (text.empty()) {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      if (text.empty()) return fail("empty prompt (give --prompt, --chat or text on stdin)");
    }
    // Plain prompts are text: control tokens typed into them stay text.
    EncodeOptions eo;
    eo.allow_special = false;
    prompt_ids = tok->Encode(text, eo);
  }
  if (prompt_ids.empty()) return fail("the prompt encodes to no tokens");

  generate::GenerateOptions opts;
  opts.max_new_tokens = a.max_new_tokens.value_or(gcfg->max_new_tokens.value_or(64));
  if (a.temperature || a.top_k || a.top_p) {
    opts.sampling.temperature = a.temperature.value_or(1.0);
    opts.sampling.top_k = a.top_k.value_or(0);
    opts.sampling.top_p = a.top_p.value_or(1.0);
  } else if (gcfg->do_sample) {
    opts.sampling.temperature = gcfg->temperature;
    opts.sampling.top_k = gcfg->top_k;
    opts.sampling.top_p = gcfg->top_p;
  }
  if (opts.sampling.top_p <= 0 || opts.sampling.top_p > 1) return fail("--top-p must be in (0, 1]");
  if (opts.sampling.top_k < 0) return fail("--top-k must be >= 0");
  opts.seed = a.seed;
  opts.eos_token_ids = gcfg->eos_token_ids;
  for (int64_t id : (*gen)->config().eos_token_ids) opts.eos_token_ids.push_back(id);
  opts.pad_token_id = static_cast<int32_t>(gcfg->pad_token_id.value_or(0));

  DecodeOptions dopts;
  dopts.skip_special_tokens = true;
  StreamDecoder stream(*tok, dopts);
  Status stream_error;
  auto on_token = [&](size_t, int32_t id) {
    if (a.json || !stream_error.ok()) return;
    auto piece = stream.Push(id);
    if (!piece.ok()) {
      stream_error = piece.status();
      return;
    }
    std::fwrite(piece->data(), 1, piece->size(), stdout);
    std::fflush(stdout);
  };
  generate::GenerateTimings tm;
  auto results = (*gen)->Generate({prompt_ids}, opts, on_token, &tm);
  if (!results.ok()) return fail(results.status().message());
  if (!stream_error.ok()) return fail(stream_error.message());
  const auto& r = (*results)[0];
  auto rate = [](int64_t n, double s) { return s > 0 ? n / s : 0.0; };
  if (a.json) {
    auto out_text = tok->Decode(r.generated_ids, dopts);
    if (!out_text.ok()) return fail(out_text.status().message());
    nlohmann::json j;
    j["prompt_ids"] = prompt_ids;
    j["generated_ids"] = r.generated_ids;
    j["text"] = *out_text;
    j["finish_reason"] = r.finish_reason;
    j["target"] = backend_name;
    if (kernel_setup.kernelizer) j["kernel_calls"] = kernel_calls;
    j["timings"] = {{"load_s", load_s},
                    {"compile_s", tm.compile_seconds},
                    {"prefill_s", tm.prefill_seconds},
                    {"prefill_tokens", tm.prefill_tokens},
                    {"prefill_tokens_per_s", rate(tm.prefill_tokens, tm.prefill_seconds)},
                    {"decode_s", tm.decode_seconds},
                    {"decode_tokens", tm.decode_tokens},
                    {"decode_tokens_per_s", rate(tm.decode_tokens, tm.decode_seconds)}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::string rest = stream.Finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::printf("\n");
  }
  std::fflush(stdout);  // the text ends before the summary on stderr, even through a pipe
  std::fprintf(stderr,
               "tlaloc generate: %s on %s, load %.2f s, compile %.2f s, prefill %lld tokens at "
               "%.1f tokens/s, decode %lld tokens at %.1f tokens/s (%s)\n",
               std::string(MlirName((*gen)->dtype())).c_str(), backend_name.c_str(), load_s,
               tm.compile_seconds, static_cast<long long>(tm.prefill_tokens),
               rate(tm.prefill_tokens, tm.prefill_seconds),
               static_cast<long long>(tm.decode_tokens), rate(tm.decode_tokens, tm.decode_seconds),
               r.finish_reason.c_str());
  if (kernel_setup.kernelizer)
    std::fprintf(stderr, "tlaloc generate: %zu layer calls ran as kernels\n", kernel_calls);
  return 0;
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text with a Qwen3 checkpoint");
  cmd->add_option("--model", args->model, "Hugging Face model folder")->required();
  cmd->add_option("--prompt", args->prompt, "prompt text (default: stdin)");
  cmd->add_option("--chat", args->chat, "a user message, rendered with the Qwen3 chat template");
  cmd->add_option("--max-new-tokens", args->max_new_tokens, "token budget");
  cmd->add_option("--temperature", args->temperature, "sampling temperature (0: greedy)");
  cmd->add_option("--top-k", args->top_k, "keep the k most likely tokens (0: all)");
  cmd->add_option("--top-p", args->top_p, "nucleus sampling mass");
  cmd->add_option("--seed", args->seed, "sampling seed");
  cmd->add_option("--dtype", args->dtype, "f32 or bf16 (default: as stored)");
  AddTargetOption(cmd, &args->target);
  cmd->add_flag("--json", args->json, "print one JSON object instead of streaming text");
  cmd->add_option("--kernels", args->kernels,
                  "kernel mapping JSON (layer -> backend -> mode -> repository; docs/kernels.md): "
                  "mapped layers run as kernels (interpreter target)");
  cmd->add_option("--kernels-lock", args->kernels_lock,
                  "lockfile from `tlaloc kernels lock`: trusts and pins the locked commits");
  cmd->add_flag("--trust-kernels", args->trust_kernels,
                "load native kernel code from repositories not in a lockfile");
  cmd->callback([args] { SetExitCode(RunGenerate(*args)); });
}

}  // namespace tlaloc::cli
