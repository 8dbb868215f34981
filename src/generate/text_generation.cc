#include "tlaloc/generate/text_generation.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string_view>
#include <utility>

#include "tlaloc/generate/fit_context.h"

namespace tlaloc::generate {

namespace {

uint64_t RandomSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

size_t StopPrefixHeldBack(std::string_view text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const std::string& s : stops) {
    const size_t max_len = std::min(text.size(), s.empty() ? 0 : s.size() - 1);
    for (size_t len = max_len; len > best; --len) {
      if (text.substr(text.size() - len) == std::string_view(s).substr(0, len)) {
        best = len;
        break;
      }
    }
  }
  return best;
}

ReplySplitter::ReplySplitter(const Tokenizer& tok, std::optional<int32_t> think_open,
                             std::optional<int32_t> think_close,
                             const std::vector<std::string>& stops, const TextCallback& on_text,
                             TextResult& result, bool split_reasoning)
    : decoder_(tok, DecoderOptions()),
      think_open_(split_reasoning ? think_open : std::nullopt),
      think_close_(split_reasoning ? think_close : std::nullopt),
      stops_(stops),
      on_text_(on_text),
      result_(result),
      text_markers_(split_reasoning && (!think_open || !think_close)) {}

DecodeOptions ReplySplitter::DecoderOptions() {
  DecodeOptions o;
  o.skip_special_tokens = true;
  o.skip_unknown_ids = true;
  return o;
}

bool ReplySplitter::Push(int32_t id) {
  if (think_open_ && id == *think_open_ && !in_think_) {
    in_think_ = true;
    return true;
  }
  if (think_close_ && id == *think_close_ && in_think_) {
    Emit(TextPart::kReasoning, decoder_.Finish());
    in_think_ = false;
    strip_newlines_ = true;  // the template puts "\n\n" between the think block and reply
    return true;
  }
  auto piece = decoder_.Push(id);
  if (!piece.ok()) {
    result_.error = piece.status();
    return false;
  }
  Route(*piece);
  return true;
}

void ReplySplitter::Finish() {
  Route(decoder_.Finish());
  if (text_markers_ && !markers_done_ && !stopped_)
    RouteContent(RouteTextMarkers("", /*at_end=*/true));
  if (!stopped_ && !pending_.empty()) Emit(TextPart::kContent, pending_);
  pending_.clear();
}

void ReplySplitter::Route(std::string piece) {
  if (piece.empty() || stopped_) return;
  if (text_markers_ && !markers_done_) {
    piece = RouteTextMarkers(std::move(piece), /*at_end=*/false);
    if (piece.empty()) return;
  }
  if (in_think_) {
    Emit(TextPart::kReasoning, piece);
    return;
  }
  RouteContent(std::move(piece));
}

std::string ReplySplitter::RouteTextMarkers(std::string piece, bool at_end) {
  static constexpr std::string_view kOpen = "<think>", kClose = "</think>";
  marker_text_ += piece;
  if (!in_think_) {
    // Before the reply's first visible text: it opens a think block only with "<think>".
    const size_t start = marker_text_.find_first_not_of(" \t\r\n");
    const std::string_view rest = start == std::string::npos
                                      ? std::string_view()
                                      : std::string_view(marker_text_).substr(start);
    const bool maybe = rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest;
    if (maybe && !at_end) return "";
    if (rest.substr(0, kOpen.size()) != kOpen) {
      markers_done_ = true;
      return std::exchange(marker_text_, "");
    }
    in_think_ = true;
    marker_text_ = std::string(rest.substr(kOpen.size()));
  }
  const size_t close = marker_text_.find(kClose);
  if (close == std::string::npos) {
    const size_t hold = at_end ? 0 : StopPrefixHeldBack(marker_text_, {std::string(kClose)});
    Emit(TextPart::kReasoning, marker_text_.substr(0, marker_text_.size() - hold));
    marker_text_.erase(0, marker_text_.size() - hold);
    return "";
  }
  Emit(TextPart::kReasoning, marker_text_.substr(0, close));
  std::string after = marker_text_.substr(close + kClose.size());
  marker_text_.clear();
  in_think_ = false;
  markers_done_ = true;
  strip_newlines_ = true;  // the template puts "\n\n" between the think block and reply
  return after;
}

void ReplySplitter::RouteContent(std::string piece) {
  if (piece.empty() || stopped_) return;
  if (strip_newlines_) {
    size_t n = piece.find_first_not_of('\n');
    piece.erase(0, n == std::string::npos ? piece.size() : n);
    if (piece.empty()) return;
    strip_newlines_ = false;
  }
  pending_ += piece;
  // A stop string can only begin inside pending_: every suffix of the emitted text that could
  // start one was held back.
  size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    if (s.empty()) continue;
    first = std::min(first, pending_.find(s));
  }
  if (first != std::string::npos) {
    Emit(TextPart::kContent, pending_.substr(0, first));
    pending_.clear();
    stopped_ = true;
    return;
  }
  const size_t hold = StopPrefixHeldBack(pending_, stops_);
  Emit(TextPart::kContent, pending_.substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
}

void ReplySplitter::Emit(TextPart part, const std::string& text) {
  if (text.empty()) return;
  (part == TextPart::kReasoning ? result_.reasoning : result_.content) += text;
  if (on_text_) on_text_(part, text);
}

StatusOr<std::unique_ptr<TextGenerator>> TextGenerator::Load(const std::filesystem::path& dir,
                                                             std::optional<ElementType> dtype,
                                                             std::shared_ptr<Backend> backend,
                                                             std::optional<Mesh> tensor_parallel) {
  TL_ASSIGN_OR_RETURN(std::unique_ptr<Generator> gen,
                      Generator::Load(dir, dtype, std::move(backend), std::move(tensor_parallel)));
  const std::filesystem::path tok_path = dir / "tokenizer.json";
  if (!std::filesystem::exists(tok_path)) return NotFound(dir.string() + " has no tokenizer.json");
  TL_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromFile(tok_path.string()));
  TL_ASSIGN_OR_RETURN(io::GenerationConfig gcfg,
                      io::LoadGenerationConfigOrDefault(dir, gen->config()));
  // A missing or unparsable template is kept as the error conversations get: prompts still work.
  StatusOr<ChatTemplate> chat = ChatTemplate::FromCheckpoint(dir);
  return std::make_unique<TextGenerator>(std::move(gen), std::move(tok), std::move(gcfg),
                                         std::move(chat));
}

TextGenerator::TextGenerator(std::unique_ptr<Generator> generator, Tokenizer tokenizer,
                             io::GenerationConfig generation_config,
                             StatusOr<ChatTemplate> chat_template)
    : generator_(std::move(generator)),
      tokenizer_(std::move(tokenizer)),
      generation_config_(std::move(generation_config)),
      chat_template_(std::move(chat_template)) {
  if (tokenizer_.vocab_size() < generator_->config().vocab_size)
    generator_->set_sample_vocab(tokenizer_.vocab_size());
  think_open_ = tokenizer_.TokenToId("<think>");
  think_close_ = tokenizer_.TokenToId("</think>");
}

StatusOr<nn::SamplingParams> TextGenerator::Sampling(const TextRequest& request) const {
  nn::SamplingParams p;
  const io::GenerationConfig& g = generation_config_;
  if (request.temperature || request.top_k || request.top_p) {
    p.temperature = request.temperature.value_or(g.do_sample ? g.temperature : 1.0);
    p.top_k = request.top_k.value_or(g.do_sample ? g.top_k : 0);
    p.top_p = request.top_p.value_or(g.do_sample ? g.top_p : 1.0);
  } else if (g.do_sample) {
    p.temperature = g.temperature;
    p.top_k = g.top_k;
    p.top_p = g.top_p;
  }
  if (!std::isfinite(p.temperature) || p.temperature < 0)
    return InvalidArgument("temperature " + std::to_string(p.temperature) +
                           ": expected a finite number >= 0 (0 is greedy)");
  if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1)
    return InvalidArgument("top_p " + std::to_string(p.top_p) + ": expected a number in (0, 1]");
  if (p.top_k < 0)
    return InvalidArgument("top_k " + std::to_string(p.top_k) + ": expected >= 0 (0 keeps all)");
  // As transformers' generate: generation_config.json's repetition_penalty always applies, its
  // min_p only when it samples (a warper).
  p.min_p = request.min_p.value_or(g.do_sample ? g.min_p.value_or(0.0) : 0.0);
  p.repetition_penalty = request.repetition_penalty.value_or(g.repetition_penalty);
  p.presence_penalty = request.presence_penalty.value_or(0.0);
  p.frequency_penalty = request.frequency_penalty.value_or(0.0);
  p.logit_bias = request.logit_bias;
  if (!std::isfinite(p.min_p) || p.min_p < 0 || p.min_p > 1)
    return InvalidArgument("min_p " + std::to_string(p.min_p) + ": expected a number in [0, 1]");
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0)
    return InvalidArgument("repetition_penalty " + std::to_string(p.repetition_penalty) +
                           ": expected a number > 0 (1 is none)");
  if (!std::isfinite(p.presence_penalty))
    return InvalidArgument("presence_penalty: expected a finite number");
  if (!std::isfinite(p.frequency_penalty))
    return InvalidArgument("frequency_penalty: expected a finite number");
  const int64_t vocab = tokenizer_.vocab_size();
  for (const auto& [id, bias] : p.logit_bias)
    if (id < 0 || id >= vocab || !std::isfinite(bias))
      return InvalidArgument("logit_bias: token id " + std::to_string(id) + " with bias " +
                             std::to_string(bias) + ": expected an id in [0, " +
                             std::to_string(vocab) + ") and a finite bias");
  return p;
}

StatusOr<PreparedRequest> TextGenerator::Prepare(const TextRequest& request) const {
  PreparedRequest prep;
  TL_ASSIGN_OR_RETURN(prep.sampling, Sampling(request));
  // The one default for every front end (generate, chat, the server, its chat page): the request's
  // budget, else generation_config.json's max_new_tokens, else up to the end token or the context,
  // as OpenAI, vLLM and llama-server do when max_tokens is absent.
  const std::optional<int64_t> budget =
      request.max_new_tokens ? request.max_new_tokens : generation_config_.max_new_tokens;
  int64_t max_new = budget.value_or(1);
  if (max_new < 1)
    return InvalidArgument("max_new_tokens " + std::to_string(max_new) + ": expected >= 1");
  if (request.max_context < 0)
    return InvalidArgument("context size " + std::to_string(request.max_context) +
                           ": expected >= 0 (0: the model's)");
  for (const std::string& s : request.stop)
    if (s.empty()) return InvalidArgument("stop: an empty stop string would end every reply");

  const int64_t trained = generator_->config().max_position_embeddings;
  GenerateOptions opts;
  opts.max_context = request.max_context;
  // With neither a budget nor a context given, the reply may run to the end of the context, whose
  // KV cache is reserved up front: a model's whole trained length (Qwen3: 40,960 positions, GBs)
  // would be reserved for every short answer. Such requests get at most kOpenEndedContext
  // positions, as `serve --max-context` and llama.cpp's n_ctx default to.
  if (opts.max_context == 0 && !budget) opts.max_context = std::min(trained, kOpenEndedContext);
  prep.context = generator_->ContextLimit(opts);

  if (!request.messages.empty()) {
    if (!chat_template_.ok()) return chat_template_.status();
    ChatOptions co;
    co.enable_thinking = request.enable_thinking;
    co.tools = request.tools;
    co.extra = request.chat_template_kwargs;
    if (request.drop_old_turns) {
      int64_t reserve = request.reply_reserve;
      if (reserve <= 0) reserve = budget ? std::min(*budget, prep.context / 2) : prep.context / 4;
      TL_ASSIGN_OR_RETURN(FittedConversation fit,
                          FitConversation(request.messages, *chat_template_, co, tokenizer_,
                                          prep.context, std::max<int64_t>(reserve, 1)));
      prep.prompt_ids = std::move(fit.prompt_ids);
      prep.dropped_turns = fit.dropped_turns;
      prep.dropped_messages = fit.dropped_messages;
    } else {
      TL_ASSIGN_OR_RETURN(std::string rendered, chat_template_->Render(request.messages, co));
      prep.prompt_ids = tokenizer_.Encode(rendered);
    }
  } else if (!request.prompt_ids.empty()) {
    const int64_t vocab = generator_->config().vocab_size;
    for (int32_t id : request.prompt_ids)
      if (id < 0 || id >= vocab)
        return InvalidArgument("prompt token id " + std::to_string(id) +
                               " is outside the vocabulary (0.." + std::to_string(vocab - 1) + ")");
    prep.prompt_ids = request.prompt_ids;
  } else {
    EncodeOptions eo;
    eo.allow_special = request.parse_special;
    prep.prompt_ids = tokenizer_.Encode(request.prompt, eo);
  }
  if (prep.prompt_ids.empty()) return InvalidArgument("the prompt encodes to no tokens");

  if (prep.context > trained)
    prep.notes.push_back("context " + std::to_string(prep.context) +
                         " is past the model's trained length of " + std::to_string(trained) +
                         " (max_position_embeddings): RoPE allows it, but quality may drop past " +
                         std::to_string(trained) + " tokens");
  const int64_t prompt_len = static_cast<int64_t>(prep.prompt_ids.size());
  if (prompt_len >= prep.context)
    return InvalidArgument(
        "the prompt has " + std::to_string(prompt_len) + " tokens and the context holds " +
        std::to_string(prep.context) +
        ": no room for a reply (shorten the prompt or raise the context)" +
        (prep.dropped_turns > 0
             ? ", even with the " + std::to_string(prep.dropped_turns) + " oldest turns dropped"
             : ""));
  if (!budget) {
    max_new = prep.context - prompt_len;
  } else if (prompt_len + max_new > prep.context) {
    prep.notes.push_back("max_new_tokens " + std::to_string(max_new) + " capped to " +
                         std::to_string(prep.context - prompt_len) + ": the context holds " +
                         std::to_string(prep.context) + " tokens and the prompt uses " +
                         std::to_string(prompt_len));
    max_new = prep.context - prompt_len;
  }
  prep.max_new_tokens = max_new;
  prep.seed = request.seed ? *request.seed : RandomSeed();
  prep.eos_token_ids = generation_config_.eos_token_ids;
  for (int64_t id : generator_->config().eos_token_ids) prep.eos_token_ids.push_back(id);
  if (request.json_grammar) {
    if (prep.eos_token_ids.empty())
      return InvalidArgument(
          "response_format: the model has no end token (generation_config.json's "
          "eos_token_id), so a JSON reply could not end");
    std::shared_ptr<const TokenTrie> trie;
    {
      std::lock_guard<std::mutex> lock(trie_->mu);
      if (!trie_->trie)
        trie_->trie = TokenTrie::FromTokenizer(
            tokenizer_, std::vector<int32_t>(prep.eos_token_ids.begin(), prep.eos_token_ids.end()));
      trie = trie_->trie;
    }
    prep.sampling.constraint =
        std::make_shared<JsonConstraint>(request.json_grammar, std::move(trie), max_new);
  }
  return prep;
}

StatusOr<TextResult> TextGenerator::Run(const TextRequest& request, const TextCallback& on_text,
                                        const std::function<bool()>& cancelled) {
  ChoiceTextCallback each;
  if (on_text)
    each = [&on_text](size_t, TextPart part, std::string_view text) { on_text(part, text); };
  TL_ASSIGN_OR_RETURN(std::vector<TextResult> results, RunChoices(request, 1, each, cancelled));
  return std::move(results[0]);
}

StatusOr<std::vector<TextResult>> TextGenerator::RunChoices(
    const TextRequest& request, int64_t choices, const ChoiceTextCallback& on_text,
    const std::function<bool()>& cancelled) {
  if (choices < 1 || choices > kMaxChoices)
    return InvalidArgument("choices: expected 1 to " + std::to_string(kMaxChoices) + ", got " +
                           std::to_string(choices));
  TL_ASSIGN_OR_RETURN(PreparedRequest prep, Prepare(request));
  const size_t n = static_cast<size_t>(choices);
  std::vector<TextResult> results(n);
  for (size_t i = 0; i < n; ++i) {
    TextResult& result = results[i];
    result.prompt_ids = prep.prompt_ids;
    result.notes = prep.notes;
    result.dropped_turns = prep.dropped_turns;
    result.dropped_messages = prep.dropped_messages;
    result.context = prep.context;
    result.seed = prep.seed + i;
  }
  const int64_t context = prep.context;
  const int64_t prompt_len = static_cast<int64_t>(prep.prompt_ids.size());
  GenerateOptions opts;
  opts.max_context = request.max_context;
  opts.max_new_tokens = prep.max_new_tokens;
  opts.sampling = prep.sampling;
  opts.seed = prep.seed;
  opts.eos_token_ids = std::move(prep.eos_token_ids);
  opts.choices = choices;
  if (n > 1) {
    for (size_t i = 0; i < n; ++i) {
      opts.row_sampling.push_back(prep.sampling);
      if (i > 0 && prep.sampling.constraint)  // each choice follows its own reply
        opts.row_sampling.back().constraint = prep.sampling.constraint->Restarted();
      opts.row_seeds.push_back(results[i].seed);
    }
  }

  // One reply splitter per choice; each holds references to its callback and result, so both
  // live in storage that does not move.
  std::vector<TextCallback> callbacks(n);
  if (on_text)
    for (size_t i = 0; i < n; ++i)
      callbacks[i] = [&on_text, i](TextPart part, std::string_view text) {
        on_text(i, part, text);
      };
  std::vector<std::unique_ptr<ReplySplitter>> streams;
  for (size_t i = 0; i < n; ++i)
    streams.push_back(std::make_unique<ReplySplitter>(tokenizer_, think_open_, think_close_,
                                                      request.stop, callbacks[i], results[i]));
  bool was_cancelled = false;
  std::vector<char> decode_failed(n, 0);
  opts.stop_requested = [&](size_t row) {
    if (cancelled && cancelled()) was_cancelled = true;
    return was_cancelled || decode_failed[row] || streams[row]->stopped();
  };
  auto on_token = [&](size_t row, int32_t id) {
    results[row].generated_ids.push_back(id);
    if (!decode_failed[row] && !streams[row]->Push(id)) decode_failed[row] = 1;
  };
  GenerateTimings timings;
  auto generated = generator_->Generate({prep.prompt_ids}, opts, on_token, &timings);
  for (size_t i = 0; i < n; ++i) {
    TextResult& result = results[i];
    streams[i]->Finish();
    result.timings = timings;
    if (!generated.ok()) {
      result.error = generated.status();
      result.finish_reason = FinishReason::kError;
    } else if (decode_failed[i]) {
      result.finish_reason = FinishReason::kError;
    } else if (was_cancelled) {
      result.finish_reason = FinishReason::kCancelled;
    } else {
      result.finish_reason = (*generated)[i].finish_reason;
    }
    if (result.finish_reason == FinishReason::kLength &&
        prompt_len + static_cast<int64_t>(result.generated_ids.size()) >= context)
      result.notes.push_back("the context of " + std::to_string(context) + " tokens is full");
  }
  return results;
}

}  // namespace tlaloc::generate
