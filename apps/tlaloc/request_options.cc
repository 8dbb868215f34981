#include "request_options.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <sstream>

namespace tlaloc::cli {

namespace {

// A flag's number as the user would read it back ("nan", "-1", "0.5").
std::string FlagNumber(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

}  // namespace

void AddRequestOptions(CLI::App* cmd, RequestFlags* f, const std::string& budget_help,
                       const std::string& seed_help) {
  cmd->add_option("--system", f->system, "a system message that starts the conversation");
  cmd->add_flag("--no-think", f->no_think,
                "an empty think block in the chat template, so the model answers without "
                "reasoning");
  cmd->add_flag("--show-thinking", f->show_thinking,
                "print the model's <think> reasoning (dimmed on a terminal); hidden by default");
  cmd->add_option("-n,--max-new-tokens", f->max_new_tokens, budget_help);
  cmd->add_option("--temp,--temperature", f->temperature,
                  "sampling temperature, 0 is greedy (default: generation_config.json, else "
                  "greedy)");
  cmd->add_option("--top-k", f->top_k, "keep the k most likely tokens (0: all)");
  cmd->add_option("--top-p", f->top_p, "nucleus sampling mass, in (0, 1]");
  cmd->add_option("-s,--seed", f->seed, seed_help);
  cmd->add_option("-c,--ctx-size", f->ctx_size,
                  "context size in tokens, prompt included (default: max_position_embeddings; a "
                  "larger one is honoured with a warning that quality may drop past it)");
}

Status CheckRequestFlags(const RequestFlags& f) {
  if (f.temperature && (!std::isfinite(*f.temperature) || *f.temperature < 0))
    return InvalidArgument("--temperature " + FlagNumber(*f.temperature) +
                           ": expected a finite number >= 0 (0 is greedy)");
  if (f.top_p && (!std::isfinite(*f.top_p) || *f.top_p <= 0 || *f.top_p > 1))
    return InvalidArgument("--top-p " + FlagNumber(*f.top_p) + ": expected a number in (0, 1]");
  if (f.top_k && *f.top_k < 0)
    return InvalidArgument("--top-k " + std::to_string(*f.top_k) + ": expected >= 0 (0: all)");
  if (f.max_new_tokens && *f.max_new_tokens < 1)
    return InvalidArgument("--max-new-tokens " + std::to_string(*f.max_new_tokens) +
                           ": expected >= 1");
  if (f.ctx_size && *f.ctx_size < 2)
    return InvalidArgument("--ctx-size " + std::to_string(*f.ctx_size) + ": expected >= 2");
  return OkStatus();
}

void ApplyRequestFlags(const RequestFlags& f, generate::TextRequest* r) {
  if (f.no_think) r->enable_thinking = false;
  if (f.max_new_tokens) r->max_new_tokens = f.max_new_tokens;
  r->temperature = f.temperature;
  r->top_k = f.top_k;
  r->top_p = f.top_p;
  r->seed = f.seed;
  r->max_context = f.ctx_size.value_or(0);
}

ReplyPrinter::ReplyPrinter(bool show_thinking)
    : show_thinking_(show_thinking), tty_(isatty(fileno(stdout)) != 0) {}

void ReplyPrinter::operator()(generate::TextPart part, std::string_view piece) {
  if (part == generate::TextPart::kReasoning) {
    if (!show_thinking_) return;
    if (!in_reasoning_) std::fputs(tty_ ? "\x1b[2m" : "<think>\n", stdout);
    in_reasoning_ = true;
  } else {
    Finish();
  }
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);
}

void ReplyPrinter::Finish() {
  if (!in_reasoning_) return;
  std::fputs(tty_ ? "\x1b[0m\n\n" : "\n</think>\n\n", stdout);
  in_reasoning_ = false;
}

}  // namespace tlaloc::cli
