// `tlaloc serve`: the OpenAI-compatible HTTP server (serve::Server over serve::Scheduler's
// continuous batching). This file only parses flags, loads the model and handles signals:
// SIGTERM or SIGINT stops taking requests, lets running ones finish, then exits 0.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli_options.h"
#include "commands.h"
#include "request_options.h"
#include "tlaloc/generate/text_generation.h"
#include "tlaloc/runtime/open_backend.h"
#include "tlaloc/serve/scheduler.h"
#include "tlaloc/serve/server.h"

namespace tlaloc::cli {

namespace {

std::atomic<int> g_signal{0};

struct ServeArgs {
  std::string model, host = "127.0.0.1", target, dtype, kv_dtype, api_key, name;
  std::string mesh;               // model=N: tensor parallel (generate/engine.h)
  std::vector<std::string> cors;  // origins browsers may call the API from
  int port = 8080;
  int64_t max_batch = 4, max_context = 0, max_queue = 64, prefill_chunk = 256, kv_blocks = 0;
  double burst_wait_ms = 2;
  std::optional<int> threads;
  PenaltyFlags penalties;  // defaults for requests that do not set these fields
};

// The host as a URL writes it: an IPv6 address in brackets (http://[::1]:8080, RFC 3986).
std::string UrlHost(const std::string& host) {
  return host.find(':') != std::string::npos && host.front() != '[' ? "[" + host + "]" : host;
}

int RunServe(const ServeArgs& a) {
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    std::fprintf(stderr, "tlaloc serve: %s\n", msg.c_str());
    return code;
  };
  if (a.port < 0 || a.port > 65535)
    return fail("--port " + std::to_string(a.port) + ": expected 0..65535 (0: any free port)",
                kExitUsage);
  if (a.max_batch < 1 || a.max_batch > 256)
    return fail("--max-batch " + std::to_string(a.max_batch) + ": expected 1..256", kExitUsage);
  serve::SamplingDefaults defaults;
  if (Status s = CheckPenaltyFlags(a.penalties, &defaults.logit_bias); !s.ok())
    return fail(s.message(), kExitUsage);
  defaults.repetition_penalty = a.penalties.repeat_penalty;
  defaults.presence_penalty = a.penalties.presence_penalty;
  defaults.frequency_penalty = a.penalties.frequency_penalty;
  defaults.min_p = a.penalties.min_p;
  if (a.max_context < 0)
    return fail("--max-context " + std::to_string(a.max_context) +
                    ": expected > 0 (default: the model's, at most 4096)",
                kExitUsage);
  if (a.max_queue < 0)
    return fail("--max-queue " + std::to_string(a.max_queue) + ": expected >= 0", kExitUsage);
  if (a.prefill_chunk < 16)
    return fail("--prefill-chunk " + std::to_string(a.prefill_chunk) + ": expected >= 16 tokens",
                kExitUsage);
  if (!(a.burst_wait_ms >= 0 && a.burst_wait_ms <= 1000))
    return fail("--burst-wait-ms " + std::to_string(a.burst_wait_ms) + ": expected 0..1000",
                kExitUsage);
  if (a.kv_blocks < 0)
    return fail("--kv-blocks " + std::to_string(a.kv_blocks) +
                    ": expected > 0 (default: enough for --max-batch requests of --max-context)",
                kExitUsage);
  auto choice = BackendChoiceFromFlag(a.target);
  if (!choice.ok()) return fail(choice.status().message(), kExitUsage);
  auto dtype = ParseDtypeFlag(a.dtype);
  if (!dtype.ok()) return fail(dtype.status().message(), kExitUsage);
  auto kv_dtype = ParseKvDtypeFlag(a.kv_dtype);
  if (!kv_dtype.ok()) return fail(kv_dtype.status().message(), kExitUsage);
  if (Status t = ApplyThreads(a.threads); !t.ok()) return fail(t.message(), kExitUsage);
  auto dir = ResolveModelFlag(a.model);
  if (!dir.ok()) return fail(dir.status().message(), ExitCodeForFlagError(dir.status()));
  std::optional<Mesh> mesh;
  if (!a.mesh.empty()) {
    auto parsed = Mesh::Parse(a.mesh);
    if (!parsed.ok()) return fail("--mesh: " + parsed.status().message(), kExitUsage);
    mesh = std::move(*parsed);
  }
  // A mesh's devices: the interpreter, or a CPU-family plugin, gets them unless
  // TLALOC_CPU_DEVICES says otherwise (runtime/open_backend.h).
  auto backend = runtime::OpenBackend(*choice, mesh, SingleProcessWorld());
  if (!backend.ok()) return fail(backend.status().message());
  auto text = generate::TextGenerator::Load(*dir, *dtype, std::move(*backend), mesh);
  if (!text.ok()) {
    // A mesh the model does not split over (heads, KV heads, devices) is a usage error.
    const bool usage = mesh && text.status().code() == StatusCode::kInvalidArgument;
    return fail(text.status().message(), usage ? kExitUsage : kExitFailure);
  }
  if (Status s = ApplyKvDtype(*kv_dtype, (*text)->generator().engine()); !s.ok())
    return fail(s.message(), kExitUsage);

  serve::SchedulerOptions so;
  so.max_batch = a.max_batch;
  so.max_context = a.max_context;
  so.max_queue = a.max_queue;
  so.prefill_chunk = a.prefill_chunk;
  so.kv_blocks = a.kv_blocks;
  so.burst_wait_us = static_cast<int64_t>(a.burst_wait_ms * 1000);
  auto scheduler = serve::Scheduler::Start(**text, so);
  if (!scheduler.ok()) return fail(scheduler.status().message(), kExitUsage);

  serve::ServerOptions opts;
  opts.host = a.host;
  opts.port = a.port;
  opts.api_key = a.api_key;
  opts.cors_origins = a.cors;
  opts.sampling_defaults = defaults;
  // A GGUF file runs from its cached import, whose folder name carries a hash: name the file.
  opts.model_name = !a.name.empty()       ? a.name
                    : IsGgufFile(a.model) ? std::filesystem::path(a.model).stem().string()
                                          : dir->filename().string();
  if (opts.model_name.empty()) opts.model_name = "tlaloc";
  serve::Server server(**text, **scheduler, opts);
  auto port = server.Bind();
  if (!port.ok()) return fail(port.status().message());
  // The handler only records the signal (threads that OpenBLAS started before main may receive
  // it, so blocking it and waiting in one thread would not do); a watcher thread acts on it.
  g_signal.store(0);
  struct sigaction action = {};
  action.sa_handler = [](int sig) { g_signal.store(sig); };
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::atomic<bool> served{false};
  std::thread waiter([&] {
    while (g_signal.load() == 0 && !served.load())
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (served.load()) return;
    std::fprintf(stderr, "tlaloc serve: %s: finishing running requests, then exiting\n",
                 g_signal.load() == SIGINT ? "SIGINT" : "SIGTERM");
    server.Shutdown();
  });
  const serve::SchedulerOptions& used = (*scheduler)->options();
  std::fprintf(stderr,
               "tlaloc serve: listening on http://%s:%d (model %s, %s on %s, %lld slots x %lld "
               "positions, %lld %s KV blocks of %lld (%.1f MiB), queue %lld)\n",
               UrlHost(a.host).c_str(), *port, opts.model_name.c_str(),
               std::string(MlirName((*text)->generator().dtype())).c_str(),
               (*text)->generator().backend().name().c_str(),
               static_cast<long long>(used.max_batch), static_cast<long long>(used.max_context),
               static_cast<long long>(used.kv_blocks),
               std::string(MlirName((*text)->generator().engine().kv_dtype())).c_str(),
               static_cast<long long>(generate::kKvBlockSize),
               static_cast<double>(used.kv_blocks) *
                   static_cast<double>((*text)->generator().engine().block_bytes()) / (1 << 20),
               static_cast<long long>(used.max_queue));
  std::fflush(stderr);
  server.Serve();
  served.store(true);  // Serve also returns when listening failed
  waiter.join();
  std::fprintf(stderr, "tlaloc serve: stopped\n");
  return kExitOk;
}

}  // namespace

void RegisterServeCommand(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve a model over the OpenAI HTTP API (continuous batching, chat page at /)");
  AddModelOption(cmd, &args->model);
  AddThreadsOption(cmd, &args->threads);
  cmd->add_option("--host", args->host, "address to listen on");
  cmd->add_option("--port", args->port, "port to listen on (0: any free port, printed)");
  AddTargetOption(cmd, &args->target);
  cmd->add_option("--dtype", args->dtype, "f32 or bf16 (default: as stored)");
  AddKvDtypeOption(cmd, &args->kv_dtype);
  cmd->add_option("--mesh", args->mesh,
                  "model=N: the weights and KV cache split over N devices of the target "
                  "(tensor parallel; docs/SHARDING.md)");
  cmd->add_option("--max-batch", args->max_batch, "requests decoded together (KV cache slots)");
  cmd->add_option("--max-context", args->max_context,
                  "positions per request, prompt included (0: the model's, at most 4096)");
  cmd->add_option("--max-queue", args->max_queue,
                  "requests waiting for a slot before new ones get HTTP 429");
  cmd->add_option("--prefill-chunk", args->prefill_chunk,
                  "prompt tokens prefilled in one step (running requests wait at most one)");
  cmd->add_option("--burst-wait-ms", args->burst_wait_ms,
                  "an idle server waits until no request has arrived for this long (at most 4x "
                  "it) before prefilling, so that a burst prefills together (0: at once)");
  cmd->add_option("--kv-blocks", args->kv_blocks,
                  "KV cache blocks of 16 positions shared by all requests (0: --max-batch x "
                  "--max-context); requests wait for blocks");
  cmd->add_option("--api-key", args->api_key,
                  "require \"Authorization: Bearer KEY\" on /v1/ (default: $TLALOC_API_KEY)")
      ->envname("TLALOC_API_KEY");
  cmd->add_option("--name", args->name, "model id in answers and /v1/models (default: folder)");
  cmd->add_option("--cors", args->cors,
                  "ORIGIN (repeatable or comma-separated; * for any): let web pages from it "
                  "call the API (CORS; default: none)")
      ->delimiter(',');
  AddPenaltyOptions(cmd, &args->penalties);
  cmd->callback([args] { SetExitCode(RunServe(*args)); });
}

}  // namespace tlaloc::cli
