// The request options `generate` and `chat` share (system message, thinking, budget, sampling,
// seed, context), added, checked and applied one way so that the two commands cannot drift.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/generate/text_generation.h"
#include "tlaloc/support/status.h"

namespace tlaloc::cli {

// The sampling controls past temperature/top-k/top-p, named as llama.cpp's flags.
struct PenaltyFlags {
  std::optional<double> repeat_penalty, presence_penalty, frequency_penalty, min_p;
  std::vector<std::string> logit_bias;  // "ID+BIAS", "ID-BIAS" or "ID=BIAS", repeatable
};

// Adds --repeat-penalty, --presence-penalty, --frequency-penalty, --min-p and --logit-bias.
void AddPenaltyOptions(CLI::App* cmd, PenaltyFlags* flags);

// Each value in range and every --logit-bias well formed (InvalidArgument naming the flag);
// fills `bias` with the parsed biases.
Status CheckPenaltyFlags(const PenaltyFlags& flags, std::map<int32_t, float>* bias);

struct RequestFlags {
  std::string system;
  bool no_think = false, show_thinking = false;
  std::optional<int64_t> max_new_tokens, top_k, ctx_size;
  std::optional<double> temperature, top_p;
  std::optional<uint64_t> seed;
  PenaltyFlags penalties;
  // Structured output: --json-object (any JSON object) or --json-schema FILE (a JSON schema).
  // (`generate --json` is its output format, so the constraint's flag names the object.)
  bool json_object = false;
  std::string json_schema;
};

// Adds --system, --no-think, --show-thinking, -n, --temp, --top-k, --top-p, -s, -c,
// --json-object, --json-schema and the penalty options;
// `budget_help` and `seed_help` say what the command does without them.
void AddRequestOptions(CLI::App* cmd, RequestFlags* flags, const std::string& budget_help,
                       const std::string& seed_help);

// Each value in range, or InvalidArgument naming the flag and what was expected.
Status CheckRequestFlags(const RequestFlags& flags);

// The grammar --json-object or --json-schema asks for (null: neither); errors name the flag.
StatusOr<std::shared_ptr<const generate::JsonGrammar>> JsonGrammarOfFlags(
    const RequestFlags& flags);

// Copies the flags into a request (sampling, budget, seed, context, thinking, JSON output).
void ApplyRequestFlags(const RequestFlags& flags, generate::TextRequest* request);

// Prints a streamed reply on stdout: the content as it comes, the reasoning only when
// `show_thinking` (dimmed on a terminal, between <think> markers otherwise).
class ReplyPrinter {
 public:
  explicit ReplyPrinter(bool show_thinking);
  void operator()(generate::TextPart part, std::string_view piece);
  // Closes an open reasoning block (resets the terminal's dim attribute).
  void Finish();

 private:
  bool show_thinking_, tty_, in_reasoning_ = false;
};

}  // namespace tlaloc::cli
