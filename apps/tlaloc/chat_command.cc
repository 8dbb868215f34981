// `tlaloc chat`: an interactive conversation in the terminal. Each line typed is a user turn;
// the reply streams as it is decoded, the history is kept for the next turn, `/reset` starts
// over, `/exit` or Ctrl-D quits. Ctrl-C stops the reply being written, not the program. When the
// context fills, the oldest turns are dropped (generate/fit_context.h) with a notice on stderr.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cli_options.h"
#include "commands.h"
#include "request_options.h"
#include "tlaloc/generate/text_generation.h"
#include "tlaloc/pjrt/pjrt_backend.h"

namespace tlaloc::cli {

namespace {

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted.store(true); }

struct ChatArgs {
  std::string model, dtype, kv_dtype, target;
  RequestFlags request;
  std::optional<int> threads;
};

enum class ReadResult { kLine, kEnd, kInterrupted };

// Reads one line from stdin with read(2), so that Ctrl-C (EINTR, since the handler is installed
// without SA_RESTART) returns to the caller instead of being retried inside stdio.
ReadResult ReadLine(std::string* line) {
  line->clear();
  char c;
  while (true) {
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n == 1) {
      if (c == '\n') return ReadResult::kLine;
      *line += c;
    } else if (n == 0) {
      return line->empty() ? ReadResult::kEnd : ReadResult::kLine;
    } else if (errno == EINTR) {
      if (g_interrupted.exchange(false)) return ReadResult::kInterrupted;
    } else {
      return ReadResult::kEnd;
    }
  }
}

int RunChat(const ChatArgs& a) {
  auto fail = [](const std::string& msg, int code = kExitFailure) {
    std::fprintf(stderr, "tlaloc chat: %s\n", msg.c_str());
    return code;
  };
  if (Status flags = CheckRequestFlags(a.request); !flags.ok())
    return fail(flags.message(), kExitUsage);
  if (Status t = ApplyThreads(a.threads); !t.ok()) return fail(t.message(), kExitUsage);
  auto model = ResolveModelFlag(a.model);
  if (!model.ok()) return fail(model.status().message(), ExitCodeForFlagError(model.status()));
  auto choice = BackendChoiceFromFlag(a.target);
  if (!choice.ok()) return fail(choice.status().message(), kExitUsage);
  auto dtype = ParseDtypeFlag(a.dtype);
  if (!dtype.ok()) return fail(dtype.status().message(), kExitUsage);
  auto kv_dtype = ParseKvDtypeFlag(a.kv_dtype);
  if (!kv_dtype.ok()) return fail(kv_dtype.status().message(), kExitUsage);
  auto backend = MakeBackend(*choice);
  if (!backend.ok())
    return fail("target " + choice->ToString() + ": " + backend.status().message());
  std::fprintf(stderr, "tlaloc chat: loading %s\n", a.model.c_str());
  auto gen = generate::TextGenerator::Load(*model, *dtype, std::move(*backend));
  if (!gen.ok()) return fail(gen.status().message());
  if (Status s = ApplyKvDtype(*kv_dtype, (*gen)->generator().engine()); !s.ok())
    return fail(s.message(), kExitUsage);

  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a pending read returns EINTR
  sigaction(SIGINT, &sa, nullptr);

  const uint64_t base_seed = a.request.seed ? *a.request.seed : std::random_device{}();
  std::fprintf(stderr,
               "tlaloc chat: ready (seed %llu). Type a message; /reset starts over, /exit or "
               "Ctrl-D quits, Ctrl-C stops a reply.\n",
               static_cast<unsigned long long>(base_seed));
  std::vector<ChatMessage> history;
  const std::string& system = a.request.system;
  if (!system.empty()) history.push_back({"system", system, std::nullopt});
  uint64_t turn = 0;
  std::string line;
  while (true) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    const ReadResult got = ReadLine(&line);
    if (got == ReadResult::kEnd) break;
    if (got == ReadResult::kInterrupted) {
      std::fputs("\n(Ctrl-C stops a reply; /exit or Ctrl-D quits)\n", stdout);
      continue;
    }
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.resize(system.empty() ? 0 : 1);
      std::fputs("(conversation cleared)\n", stdout);
      continue;
    }
    if (line[0] == '/') {
      std::fputs("(commands: /reset, /exit)\n", stdout);
      continue;
    }
    history.push_back({"user", line, std::nullopt});
    generate::TextRequest request;
    request.messages = history;
    ApplyRequestFlags(a.request, &request);
    // A full context drops the oldest turns (kept out of the history from then on) rather than
    // ending the conversation, as llama.cpp shifts its context.
    request.drop_old_turns = true;
    request.seed = base_seed + turn++;
    ReplyPrinter printer(a.request.show_thinking);
    auto on_text = [&](generate::TextPart part, std::string_view piece) { printer(part, piece); };
    g_interrupted.store(false);
    auto r = (*gen)->Run(request, on_text, [] { return g_interrupted.load(); });
    printer.Finish();
    if (!r.ok()) {
      history.pop_back();
      std::printf("\n(%s%s)\n", r.status().message().c_str(),
                  r.status().code() == StatusCode::kInvalidArgument ? "; /reset starts over" : "");
      continue;
    }
    if (r->dropped_turns > 0) {
      const auto first = history.begin() + (system.empty() ? 0 : 1);
      history.erase(first, first + r->dropped_messages);
      std::fprintf(stderr, "(dropped %lld oldest turn%s to fit the context of %lld tokens)\n",
                   static_cast<long long>(r->dropped_turns), r->dropped_turns == 1 ? "" : "s",
                   static_cast<long long>(r->context));
    }
    if (r->finish_reason == generate::FinishReason::kCancelled) {
      std::fputs(" [stopped]", stdout);
      g_interrupted.store(false);
    }
    std::fputs("\n", stdout);
    for (const std::string& note : r->notes) std::printf("(%s)\n", note.c_str());
    if (!r->error.ok()) std::printf("(generation failed: %s)\n", r->error.message().c_str());
    history.push_back(ChatMessage{"assistant", r->content, r->reasoning});
  }
  std::fputs("\n", stdout);
  return kExitOk;
}

}  // namespace

void RegisterChatCommand(CLI::App& app) {
  auto args = std::make_shared<ChatArgs>();
  auto* cmd = app.add_subcommand("chat", "Chat with a Qwen3 checkpoint in the terminal");
  AddModelOption(cmd, &args->model);
  AddThreadsOption(cmd, &args->threads);
  AddRequestOptions(cmd, &args->request,
                    "token budget per reply (default: generation_config.json's max_new_tokens, "
                    "else up to the end token or the context)",
                    "sampling seed of the first reply (default: random, printed)");
  cmd->add_option("--dtype", args->dtype, "f32 or bf16 (default: as stored)");
  AddKvDtypeOption(cmd, &args->kv_dtype);
  AddTargetOption(cmd, &args->target);
  cmd->callback([args] { SetExitCode(RunChat(*args)); });
}

}  // namespace tlaloc::cli
