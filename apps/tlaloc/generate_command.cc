// `tlaloc generate`: one request through generate::TextGenerator (chat template, sampling
// settings, stop strings, reasoning split) on the interpreter or a PJRT plugin, streaming the
// reply as it is decoded; --kernels swaps mapped layers for kernels from kernel repositories.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "cli_options.h"
#include "commands.h"
#include "generate_mesh.h"
#include "request_options.h"
#include "tlaloc/generate/text_generation.h"
#include "tlaloc/kernels/kernelize.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/runtime/target.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc::cli {

namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string model, prompt, chat, dtype, kv_dtype, target;
  std::string kernels, kernels_lock;
  bool trust_kernels = false, raw = false;
  RequestFlags request;
  std::optional<int> threads;
  std::vector<std::string> stop;
  bool json = false;
  int64_t choices = 1;  // replies to the one prompt (OpenAI's n)
  std::string mesh;     // tensor-parallel generation (generate_mesh.h)
};

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

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

// Flag values checked before anything loads; each error names the flag (exit 2).
Status CheckFlags(const GenerateArgs& a) {
  if (!a.prompt.empty() && !a.chat.empty())
    return InvalidArgument("give at most one of --prompt and --chat");
  if (a.raw && !a.chat.empty())
    return InvalidArgument("--raw applies to --prompt text; --chat is rendered by the template");
  if ((!a.request.system.empty() || a.request.no_think) && a.chat.empty())
    return InvalidArgument(std::string(a.request.no_think ? "--no-think" : "--system") +
                           " needs --chat (a plain prompt has no chat template)");
  TL_RETURN_IF_ERROR(CheckRequestFlags(a.request));
  for (const std::string& s : a.stop)
    if (s.empty()) return InvalidArgument("--stop \"\": an empty stop string ends every reply");
  if (a.choices < 1 || a.choices > generate::kMaxChoices)
    return InvalidArgument("--choices " + std::to_string(a.choices) + ": expected 1 to " +
                           std::to_string(generate::kMaxChoices));
  if (!a.mesh.empty() && !a.kernels.empty())
    return InvalidArgument(
        "--kernels runs kernels on one interpreter device; drop --mesh or "
        "--kernels");
  return OkStatus();
}

// Under mpirun every rank must decode the same tokens: the same prompt (given on the command
// line, as only rank 0 has stdin) and the same draws (a seed, unless greedy).
Status CheckMultiProcessFlags(const GenerateArgs& a) {
  if (a.prompt.empty() && a.chat.empty())
    return InvalidArgument("--mesh under mpirun needs --prompt or --chat (no stdin prompt)");
  if (!a.request.seed && !(a.request.temperature && *a.request.temperature == 0))
    return InvalidArgument(
        "--mesh under mpirun needs --seed (or --temp 0): each rank would "
        "draw its own random seed");
  return OkStatus();
}

int RunGenerate(const GenerateArgs& a) {
  // Under mpirun (--mesh) every rank runs its share of the mesh's devices; only rank 0 prints,
  // and a failing rank says which it is and ends the job (no rank left waiting at a collective).
  ProcessWorld* world = &SingleProcessWorld();
  auto fail = [&world](const std::string& msg, int code = kExitFailure) {
    if (world->size() > 1) {
      std::fprintf(stderr, "tlaloc generate: rank %d of %d: %s\n", world->rank(), world->size(),
                   msg.c_str());
      std::fflush(stderr);
      world->Abort(code);
    }
    std::fprintf(stderr, "tlaloc generate: %s\n", msg.c_str());
    return code;
  };
  if (Status flags = CheckFlags(a); !flags.ok()) return fail(flags.message(), kExitUsage);
  if (!a.mesh.empty()) {
    auto current = CurrentWorld();
    if (!current.ok()) return fail(current.status().message());
    world = *current;
    if (world->size() > 1)
      if (Status flags = CheckMultiProcessFlags(a); !flags.ok())
        return fail(flags.message(), kExitUsage);
  }
  const bool printing = world->rank() == 0;
  auto choice = BackendChoiceFromFlag(a.target);
  if (!choice.ok()) return fail(choice.status().message(), kExitUsage);
  auto dtype = ParseDtypeFlag(a.dtype);
  if (!dtype.ok()) return fail(dtype.status().message(), kExitUsage);
  auto kv_dtype = ParseKvDtypeFlag(a.kv_dtype);
  if (!kv_dtype.ok()) return fail(kv_dtype.status().message(), kExitUsage);
  if (Status t = ApplyThreads(a.threads); !t.ok()) return fail(t.message(), kExitUsage);
  auto resolved = ResolveModelFlag(a.model);
  if (!resolved.ok())
    return fail(resolved.status().message(), ExitCodeForFlagError(resolved.status()));
  const fs::path dir = *resolved;
  double t0 = Seconds();
  KernelSetup kernel_setup;
  std::optional<Mesh> mesh;
  StatusOr<std::unique_ptr<Backend>> backend = std::unique_ptr<Backend>();
  if (!a.kernels.empty()) {
    if (!choice->interpreter)
      return fail("--kernels runs kernels on the interpreter only; drop --target " +
                      choice->ToString() + " or --kernels",
                  kExitUsage);
    auto config = io::LoadModelConfig(dir);
    if (!config.ok()) return fail(config.status().message());
    backend = MakeKernelizedBackend(a, config->rms_norm_eps, kernel_setup);
    if (!backend.ok()) return fail(backend.status().message());
  } else if (!a.mesh.empty()) {
    // Every rank must generate from the same model, mesh, prompt and settings.
    auto mesh_setup = PrepareMeshGenerate(
        *world, a.mesh, *choice,
        {{"model config", Digest(ReadText(dir / "config.json"))},
         {"mesh", a.mesh},
         {"dtype", a.dtype + "/" + a.kv_dtype},
         {"prompt", Digest(a.prompt + "\x1f" + a.chat + "\x1f" + a.request.system)},
         {"max new tokens", std::to_string(a.request.max_new_tokens.value_or(-1))},
         {"seed", std::to_string(a.request.seed.value_or(0))},
         {"sampling", std::to_string(a.request.temperature.value_or(-1)) + " " +
                          std::to_string(a.request.top_k.value_or(-1)) + " " +
                          std::to_string(a.request.top_p.value_or(-1))}});
    if (!mesh_setup.ok())
      return fail(
          mesh_setup.status().message(),
          mesh_setup.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure);
    mesh = std::move(mesh_setup->mesh);
    backend = std::move(mesh_setup->backend);
  } else {
    backend = MakeBackend(*choice);
    if (!backend.ok())
      return fail("target " + choice->ToString() + ": " + backend.status().message());
  }
  const std::string backend_name = (*backend)->name();
  auto gen = generate::TextGenerator::Load(dir, *dtype, std::move(*backend), mesh);
  if (!gen.ok()) {
    // A mesh the model does not split over (heads, KV heads, devices) is a usage error.
    const bool usage = mesh && gen.status().code() == StatusCode::kInvalidArgument;
    return fail(gen.status().message(), usage ? kExitUsage : kExitFailure);
  }
  if (Status s = ApplyKvDtype(*kv_dtype, (*gen)->generator().engine()); !s.ok())
    return fail(s.message(), kExitUsage);
  size_t kernel_calls = 0;
  if (kernel_setup.kernelizer) {
    (*gen)->generator().set_program_transform(
        [&](std::shared_ptr<Module> module, const nn::LayerTrace& trace) -> Status {
          auto r = kernel_setup.kernelizer->Apply(std::move(module), trace);
          if (!r.ok()) return r.status();
          kernel_calls += r->replaced.size();
          return OkStatus();
        });
  }
  const double load_s = Seconds() - t0;

  generate::TextRequest request;
  if (!a.chat.empty()) {
    if (!a.request.system.empty())
      request.messages.push_back({"system", a.request.system, std::nullopt});
    request.messages.push_back({"user", a.chat, std::nullopt});
  } else {
    request.prompt = a.prompt;
    if (request.prompt.empty()) {
      // On a terminal the wait would look like a hang: say what it waits for.
      if (isatty(STDIN_FILENO))
        std::fprintf(stderr,
                     "tlaloc generate: reading the prompt from stdin (end it with Ctrl-D; or "
                     "give --prompt TEXT or --chat TEXT)\n");
      request.prompt.assign(std::istreambuf_iterator<char>(std::cin),
                            std::istreambuf_iterator<char>());
      if (request.prompt.empty())
        return fail("empty prompt (give --prompt, --chat or text on stdin)", kExitUsage);
    }
    request.parse_special = a.raw;
  }
  ApplyRequestFlags(a.request, &request);
  request.stop = a.stop;

  // One choice streams as it is decoded; several are printed one after another once all are done
  // (their tokens arrive interleaved).
  const bool streaming = !a.json && printing && a.choices == 1;
  ReplyPrinter printer(a.request.show_thinking);
  generate::TextGenerator::ChoiceTextCallback on_text;
  if (streaming)
    on_text = [&](size_t, generate::TextPart part, std::string_view piece) {
      printer(part, piece);
    };
  auto ran = (*gen)->RunChoices(request, a.choices, on_text);
  if (!ran.ok())
    return fail(ran.status().message(),
                ran.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure);
  const std::vector<generate::TextResult>& results = *ran;
  const generate::TextResult& r = results[0];
  const generate::GenerateTimings& tm = r.timings;
  Status error;  // the first choice's failure, if any
  for (const generate::TextResult& c : results)
    if (error.ok() && !c.error.ok()) error = c.error;
  if (!printing) return error.ok() ? kExitOk : kExitFailure;
  auto rate = [](int64_t n, double s) { return s > 0 ? n / s : 0.0; };
  auto choice_json = [](const generate::TextResult& c, nlohmann::json& j) {
    j["generated_ids"] = c.generated_ids;
    j["text"] = c.content;
    j["reasoning_content"] = c.reasoning;
    j["finish_reason"] = generate::FinishReasonName(c.finish_reason);
    j["seed"] = c.seed;
    if (!c.error.ok()) j["error"] = c.error.message();
  };
  if (a.json) {
    nlohmann::json j;
    j["prompt_ids"] = r.prompt_ids;
    if (a.choices == 1) {
      choice_json(r, j);
    } else {
      j["choices"] = nlohmann::json::array();
      for (size_t i = 0; i < results.size(); ++i) {
        nlohmann::json c;
        c["index"] = i;
        choice_json(results[i], c);
        j["choices"].push_back(std::move(c));
      }
    }
    j["target"] = backend_name;
    if (mesh) j["mesh"] = mesh->ToString();
    if (!r.notes.empty()) j["notes"] = r.notes;
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
  } else if (streaming) {
    printer.Finish();
    std::printf("\n");
  } else {
    for (size_t i = 0; i < results.size(); ++i) {
      std::printf("%s--- choice %zu (seed %llu, %s) ---\n", i ? "\n" : "", i,
                  static_cast<unsigned long long>(results[i].seed),
                  std::string(generate::FinishReasonName(results[i].finish_reason)).c_str());
      ReplyPrinter choice_printer(a.request.show_thinking);
      if (!results[i].reasoning.empty())
        choice_printer(generate::TextPart::kReasoning, results[i].reasoning);
      choice_printer(generate::TextPart::kContent, results[i].content);
      choice_printer.Finish();
      std::printf("\n");
    }
  }
  std::fflush(stdout);  // the text ends before the summary on stderr, even through a pipe
  for (const std::string& note : r.notes)
    std::fprintf(stderr, "tlaloc generate: %s\n", note.c_str());
  if (!error.ok()) return fail("generation stopped: " + error.message());
  // One choice: its finish reason and seed; several: how many and their seeds.
  std::string outcome =
      std::string(generate::FinishReasonName(r.finish_reason)) + ", seed " + std::to_string(r.seed);
  if (results.size() > 1)
    outcome = std::to_string(results.size()) + " choices, seeds " + std::to_string(r.seed) +
              " to " + std::to_string(results.back().seed);
  std::fprintf(stderr,
               "tlaloc generate: %s on %s, load %.2f s, compile %.2f s, prefill %lld tokens at "
               "%.1f tokens/s, decode %lld tokens at %.1f tokens/s (%s)%s\n",
               std::string(MlirName((*gen)->generator().dtype())).c_str(), backend_name.c_str(),
               load_s, tm.compile_seconds, static_cast<long long>(tm.prefill_tokens),
               rate(tm.prefill_tokens, tm.prefill_seconds),
               static_cast<long long>(tm.decode_tokens), rate(tm.decode_tokens, tm.decode_seconds),
               outcome.c_str(),
               mesh ? (", tensor parallel over mesh " + mesh->ToString()).c_str() : "");
  if (kernel_setup.kernelizer)
    std::fprintf(stderr, "tlaloc generate: %zu layer calls ran as kernels\n", kernel_calls);
  return kExitOk;
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate text with a Qwen3 checkpoint");
  AddModelOption(cmd, &args->model);
  AddThreadsOption(cmd, &args->threads);
  cmd->add_option("-p,--prompt", args->prompt, "prompt text (default: stdin)");
  cmd->add_option("--chat", args->chat, "a user message, rendered with the Qwen3 chat template");
  AddRequestOptions(cmd, &args->request,
                    "token budget (default: generation_config.json's max_new_tokens, else up to "
                    "the end token or the context; capped to the context)",
                    "sampling seed (default: random, printed)");
  cmd->add_flag("--raw", args->raw,
                "the prompt is model input as is: control tokens written in it (<|im_start|>) "
                "become their ids");
  cmd->add_option("--stop", args->stop, "stop before this text (repeatable)");
  cmd->add_option("--choices", args->choices,
                  "replies to the prompt, decoded together sharing its KV cache (OpenAI's n); "
                  "choice i samples with seed + i (default: 1)");
  cmd->add_option("--dtype", args->dtype, "f32 or bf16 (default: as stored)");
  AddKvDtypeOption(cmd, &args->kv_dtype);
  AddTargetOption(cmd, &args->target);
  cmd->add_flag("--json", args->json,
                "print one JSON object (text, reasoning_content, ids, finish_reason, seed, "
                "timings) instead of streaming text");
  cmd->add_option("--kernels", args->kernels,
                  "kernel mapping JSON (layer -> backend -> mode -> repository; docs/kernels.md): "
                  "mapped layers run as kernels (interpreter target)");
  cmd->add_option("--kernels-lock", args->kernels_lock,
                  "lockfile from `tlaloc kernels lock`: trusts and pins the locked commits");
  cmd->add_flag("--trust-kernels", args->trust_kernels,
                "load native kernel code from repositories not in a lockfile");
  cmd->add_option("--mesh", args->mesh,
                  "model=N: the weights and KV cache split over N devices of the target "
                  "(tensor parallel; docs/SHARDING.md)");
  cmd->callback([args] { SetExitCode(RunGenerate(*args)); });
}

}  // namespace tlaloc::cli
