// Text in, text out: the request policy every front end shares (`tlaloc generate`, `tlaloc
// chat`, later the server). A request is a chat conversation or a prompt; this layer renders it
// with the checkpoint's own chat template (tokenizer/chat.h), merges the checkpoint's
// generation_config.json with the request's sampling settings, never samples ids the tokenizer has
// no text for, stops at end tokens and stop strings, splits the model's <think>...</think>
// reasoning from its reply while streaming, and keeps whatever was produced when a step fails.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/generate/generator.h"
#include "tlaloc/generate/json_constraint.h"
#include "tlaloc/io/model_config.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc::generate {

struct TextRequest {
  // A conversation (rendered with the chat template) or, when empty, `prompt` as it is.
  std::vector<ChatMessage> messages;
  std::string prompt;
  // A prompt already tokenized (the OpenAI API's "prompt": [ids]); when non-empty it is used
  // instead of `prompt`. Every id must be in the model's vocabulary.
  std::vector<int32_t> prompt_ids;
  // Prompt text only: control tokens written in it (<|im_start|>...) become their ids; otherwise
  // they stay literal text.
  bool parse_special = false;
  // Conversations only: false renders an empty think block so the model answers directly.
  std::optional<bool> enable_thinking;
  // Conversations only: the tool (function) definitions the chat template lists (a JSON array,
  // or null for none), and more template variables (OpenAI's chat_template_kwargs).
  nlohmann::ordered_json tools = nullptr;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  // Unset fields come from generation_config.json (then transformers' defaults). An unset
  // max_new_tokens with none there runs to the end token or the context (OpenAI's rule).
  std::optional<int64_t> max_new_tokens;
  std::optional<double> temperature, top_p;
  std::optional<int64_t> top_k;
  // Unset: generation_config.json's repetition_penalty, and its min_p when it samples (as
  // transformers' generate); else none. See nn::SamplingParams for what each does and the order
  // they apply in.
  std::optional<double> min_p, repetition_penalty, presence_penalty, frequency_penalty;
  std::map<int32_t, float> logit_bias;  // token id -> bias added to its logit
  std::optional<uint64_t> seed;         // unset: drawn at random (TextResult::seed says which)
  std::vector<std::string> stop;        // generation ends before the first of these in the reply
  // Structured output (response_format): the reply is a value of this grammar, then an end token
  // (null: free text). The reply's budget closes the value in time (JsonConstraint).
  std::shared_ptr<const JsonGrammar> json_grammar;
  // Positions the request may use; 0: the model's trained length, or kOpenEndedContext at most
  // when no budget is given either (its KV cache is reserved up front).
  int64_t max_context = 0;
  // Conversations only: when the prompt plus `reply_reserve` tokens does not fit the context, the
  // oldest turns are dropped (FitConversation, generate/fit_context.h) rather than the request
  // refused; PreparedRequest and TextResult say how many. reply_reserve 0: the budget
  // (max_new_tokens) when there is one, at most half the context, else a quarter of it.
  bool drop_old_turns = false;
  int64_t reply_reserve = 0;
};

// The context of a request with neither a budget nor a context size.
inline constexpr int64_t kOpenEndedContext = 4096;

// Which part of the output a streamed piece belongs to.
enum class TextPart { kReasoning, kContent };

struct TextResult {
  std::vector<int32_t> prompt_ids, generated_ids;
  std::string content;    // the reply, without the think block and stop string
  std::string reasoning;  // the text inside <think>...</think> (empty when none)
  // kStop (end token or stop string), kLength, kCancelled, kError (FinishReasonName spells it).
  FinishReason finish_reason = FinishReason::kNone;
  uint64_t seed = 0;
  GenerateTimings timings;
  std::vector<std::string> notes;  // things the user should know (budget capped, context full)
  // TextRequest::drop_old_turns: the oldest turns dropped to fit the context, and how many
  // messages they held (those right after the leading system messages).
  int64_t dropped_turns = 0, dropped_messages = 0;
  int64_t context = 0;  // positions the request could use, prompt included
  Status error;         // a failure part-way: the fields above hold what came before
};

// A request checked and rendered, ready for the engine: what TextGenerator::Run and the server's
// scheduler both start from.
struct PreparedRequest {
  std::vector<int32_t> prompt_ids;
  nn::SamplingParams sampling;
  uint64_t seed = 0;
  int64_t max_new_tokens = 0;  // already capped so that prompt + reply fit the context
  int64_t context = 0;         // positions the request may use
  std::vector<int64_t> eos_token_ids;
  std::vector<std::string> notes;
  int64_t dropped_turns = 0, dropped_messages = 0;  // as in TextResult
};

// Called with each piece of decoded text as it becomes final.
using TextCallback = std::function<void(TextPart part, std::string_view text)>;

// Routes a reply's decoded tokens: text inside <think>...</think> to reasoning, the rest to
// content (the newlines after </think> dropped); the markers are the tokenizer's <think> and
// </think> ids when it has them, else the text "<think>" opening the reply and the first
// "</think>" after it (byte-level tokenizers spell them in bytes); holds back text that may start a
// stop string and ends the content before the first stop string. Each piece goes to `on_text` once
// final and is appended to `result`'s reasoning or content.
class ReplySplitter {
 public:
  // split_reasoning false: everything is content, markers included (a raw completion).
  ReplySplitter(const Tokenizer& tok, std::optional<int32_t> think_open,
                std::optional<int32_t> think_close, const std::vector<std::string>& stops,
                const TextCallback& on_text, TextResult& result, bool split_reasoning = true);
  // False when the token could not be decoded (the error is kept in result.error).
  bool Push(int32_t id);
  // The rest at the end: bytes of an unfinished character, text held back for a stop string.
  void Finish();
  // True once a stop string was seen: nothing more is emitted.
  bool stopped() const { return stopped_; }

 private:
  static DecodeOptions DecoderOptions();
  void Route(std::string piece);
  // The markers as text: returns the part of `piece` past the think block (or all of it when the
  // reply has none), holding back what may still turn out to be a marker.
  std::string RouteTextMarkers(std::string piece, bool at_end);
  void RouteContent(std::string piece);
  void Emit(TextPart part, const std::string& text);

  StreamDecoder decoder_;
  std::optional<int32_t> think_open_, think_close_;
  const std::vector<std::string>& stops_;
  const TextCallback& on_text_;
  TextResult& result_;
  bool in_think_ = false, strip_newlines_ = false, stopped_ = false;
  std::string pending_;
  // Text markers (no think ids): whether the reply's start has been decided, and the text held
  // while it may be "<think>" or the end of the block.
  bool text_markers_ = false, markers_done_ = false;
  std::string marker_text_;
};

class TextGenerator {
 public:
  // Loads weights, tokenizer.json, generation_config.json and the chat template from a
  // checkpoint folder; `tensor_parallel` splits the weights over a `model` mesh (Engine::Create).
  // A folder without a chat template still loads: only conversations are then refused.
  static StatusOr<std::unique_ptr<TextGenerator>> Load(const std::filesystem::path& dir,
                                                       std::optional<ElementType> dtype = {},
                                                       std::shared_ptr<Backend> backend = nullptr,
                                                       std::optional<Mesh> tensor_parallel = {});
  // `chat_template`: what renders conversations, or why there is none (the error a
  // conversation then gets).
  TextGenerator(std::unique_ptr<Generator> generator, Tokenizer tokenizer,
                io::GenerationConfig generation_config,
                StatusOr<ChatTemplate> chat_template = Status(StatusCode::kNotFound,
                                                              "no chat template was given"));

  Generator& generator() { return *generator_; }
  const Tokenizer& tokenizer() const { return tokenizer_; }
  const io::GenerationConfig& generation_config() const { return generation_config_; }

  // Checks the request's values (each error names the field and what was expected), renders it
  // and generates. Errors before generation starts come back as a status; a failure during
  // generation comes back in TextResult::error with the text produced until then.
  // `cancelled` is polled after every token: true ends the request with kCancelled.
  StatusOr<TextResult> Run(const TextRequest& request, const TextCallback& on_text = {},
                           const std::function<bool()>& cancelled = {});
  // OpenAI's n: `choices` replies to one request (1..kMaxChoices) decoded together, sharing the
  // prompt's KV blocks; choice i draws from the request's seed + i (its TextResult::seed) and
  // follows its own structured-output state. Streamed pieces name their choice; the timings are
  // the whole batch's, in every result.
  using ChoiceTextCallback =
      std::function<void(size_t choice, TextPart part, std::string_view text)>;
  StatusOr<std::vector<TextResult>> RunChoices(const TextRequest& request, int64_t choices,
                                               const ChoiceTextCallback& on_text = {},
                                               const std::function<bool()>& cancelled = {});

  // Checks and renders a request without generating (errors as for Run). Thread-safe.
  StatusOr<PreparedRequest> Prepare(const TextRequest& request) const;
  // The ids that open and close a reasoning block, when the tokenizer has them.
  std::optional<int32_t> think_open() const { return think_open_; }
  std::optional<int32_t> think_close() const { return think_close_; }

  // The request's sampling settings after generation_config.json is merged in; errors name the
  // field (temperature must be a finite number >= 0, top_p in (0, 1], top_k >= 0, min_p in
  // [0, 1], repetition_penalty > 0, presence/frequency penalties finite, logit_bias ids in the
  // tokenizer's vocabulary with finite biases).
  StatusOr<nn::SamplingParams> Sampling(const TextRequest& request) const;

 private:
  std::unique_ptr<Generator> generator_;
  Tokenizer tokenizer_;
  io::GenerationConfig generation_config_;
  StatusOr<ChatTemplate> chat_template_;
  std::optional<int32_t> think_open_, think_close_;
  // The vocabulary trie of structured output, built by the first request that needs it.
  struct LazyTrie {
    std::mutex mu;
    std::shared_ptr<const TokenTrie> trie;
  };
  std::shared_ptr<LazyTrie> trie_ = std::make_shared<LazyTrie>();
};

// The longest suffix of `text` that is a proper prefix of one of `stops` (held back while
// streaming, since the next token may complete a stop string).
size_t StopPrefixHeldBack(std::string_view text, const std::vector<std::string>& stops);

}  // namespace tlaloc::generate
