#include "request_options.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

void AddPenaltyOptions(CLI::App* cmd, PenaltyFlags* f) {
  cmd->add_option("--repeat-penalty", f->repeat_penalty,
                  "divide positive logits of tokens in the prompt or reply by it, multiply "
                  "negative ones (transformers' repetition_penalty; 1: none)");
  cmd->add_option(
      "--presence-penalty", f->presence_penalty,
      "subtract it from the logits of tokens the reply already holds (OpenAI; 0: none)");
  cmd->add_option("--frequency-penalty", f->frequency_penalty,
                  "subtract it times the count of each token in the reply (OpenAI; 0: none)");
  cmd->add_option("--min-p", f->min_p,
                  "keep tokens at least this fraction as likely as the likeliest, after the "
                  "temperature (0: all)");
  cmd->add_option("--logit-bias", f->logit_bias,
                  "ID+BIAS, ID-BIAS or ID=BIAS: add BIAS to token ID's logit (repeatable)");
}

Status CheckPenaltyFlags(const PenaltyFlags& f, std::map<int32_t, float>* bias) {
  if (f.repeat_penalty && (!std::isfinite(*f.repeat_penalty) || *f.repeat_penalty <= 0))
    return InvalidArgument("--repeat-penalty " + FlagNumber(*f.repeat_penalty) +
                           ": expected a number > 0 (1: none)");
  if (f.presence_penalty && !std::isfinite(*f.presence_penalty))
    return InvalidArgument("--presence-penalty: expected a finite number");
  if (f.frequency_penalty && !std::isfinite(*f.frequency_penalty))
    return InvalidArgument("--frequency-penalty: expected a finite number");
  if (f.min_p && (!std::isfinite(*f.min_p) || *f.min_p < 0 || *f.min_p > 1))
    return InvalidArgument("--min-p " + FlagNumber(*f.min_p) + ": expected a number in [0, 1]");
  bias->clear();
  for (const std::string& item : f.logit_bias) {
    const std::string bad = "--logit-bias " + item + ": expected ID+BIAS, ID-BIAS or ID=BIAS";
    const size_t split = item.find_first_of("+-=", 1);
    if (split == std::string::npos || split == 0 || split + 1 >= item.size())
      return InvalidArgument(bad);
    const std::string id_text = item.substr(0, split);
    // "ID=BIAS" takes the sign from BIAS; "ID+BIAS" and "ID-BIAS" from the separator.
    const std::string value_text = item[split] == '=' ? item.substr(split + 1) : item.substr(split);
    char* end = nullptr;
    errno = 0;
    const long long id = std::strtoll(id_text.c_str(), &end, 10);
    if (*end != '\0' || errno != 0 || id < 0 || id > INT32_MAX) return InvalidArgument(bad);
    end = nullptr;
    const double value = std::strtod(value_text.c_str(), &end);
    if (*end != '\0' || !std::isfinite(value)) return InvalidArgument(bad);
    (*bias)[static_cast<int32_t>(id)] = static_cast<float>(value);
  }
  return OkStatus();
}

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
  AddPenaltyOptions(cmd, &f->penalties);
  cmd->add_flag("--json-object", f->json_object,
                "constrain the reply to a JSON object (OpenAI's response_format json_object)");
  cmd->add_option("--json-schema", f->json_schema,
                  "constrain the reply to a value of the JSON schema in FILE (the subset of "
                  "docs/SERVING.md, Structured output)");
}

StatusOr<std::shared_ptr<const generate::JsonGrammar>> JsonGrammarOfFlags(const RequestFlags& f) {
  if (f.json_object && !f.json_schema.empty())
    return InvalidArgument("--json-object and --json-schema: give one of them");
  if (f.json_object) return generate::JsonGrammar::AnyObject();
  if (f.json_schema.empty()) return std::shared_ptr<const generate::JsonGrammar>();
  std::ifstream in(f.json_schema, std::ios::binary);
  if (!in) return InvalidArgument("--json-schema " + f.json_schema + ": cannot read the file");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json schema = nlohmann::json::parse(text.str(), nullptr, false);
  if (schema.is_discarded())
    return InvalidArgument("--json-schema " + f.json_schema + ": the file is not valid JSON");
  auto grammar = generate::JsonGrammar::FromSchema(schema);
  if (!grammar.ok())
    return Status(grammar.status().code(),
                  "--json-schema " + f.json_schema + ": " + grammar.status().message());
  return grammar;
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
  std::map<int32_t, float> bias;
  TL_RETURN_IF_ERROR(CheckPenaltyFlags(f.penalties, &bias));
  return JsonGrammarOfFlags(f).status();
}

void ApplyRequestFlags(const RequestFlags& f, generate::TextRequest* r) {
  if (f.no_think) r->enable_thinking = false;
  if (f.max_new_tokens) r->max_new_tokens = f.max_new_tokens;
  r->temperature = f.temperature;
  r->top_k = f.top_k;
  r->top_p = f.top_p;
  r->seed = f.seed;
  r->repetition_penalty = f.penalties.repeat_penalty;
  r->presence_penalty = f.penalties.presence_penalty;
  r->frequency_penalty = f.penalties.frequency_penalty;
  r->min_p = f.penalties.min_p;
  // Checked by CheckRequestFlags first.
  if (!CheckPenaltyFlags(f.penalties, &r->logit_bias).ok()) r->logit_bias.clear();
  r->max_context = f.ctx_size.value_or(0);
  // Checked by CheckRequestFlags first.
  if (auto grammar = JsonGrammarOfFlags(f); grammar.ok()) r->json_grammar = *grammar;
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
