// Dropping the oldest turns of a conversation to fit a context (see fit_context.h).
#include "tlaloc/generate/fit_context.h"

namespace tlaloc::generate {

std::vector<size_t> TurnStarts(std::span<const ChatMessage> messages) {
  size_t i = 0;
  while (i < messages.size() && messages[i].role == "system") ++i;
  std::vector<size_t> starts;
  for (; i < messages.size(); ++i)
    if (starts.empty() || messages[i].role == "user") starts.push_back(i);
  return starts;
}

StatusOr<FittedConversation> FitConversation(std::span<const ChatMessage> messages,
                                             const ChatTemplate& chat_template,
                                             const ChatOptions& options, const Tokenizer& tokenizer,
                                             int64_t context, int64_t reserve) {
  const std::vector<size_t> starts = TurnStarts(messages);
  const size_t system_end = starts.empty() ? messages.size() : starts.front();
  FittedConversation fit;
  // Drops 0, 1, ... turns; the last turn always stays. Each try is one render, and a chat rarely
  // has more than a few dozen turns, so no search is needed.
  const size_t droppable = starts.empty() ? 0 : starts.size() - 1;
  for (size_t drop = 0; drop <= droppable; ++drop) {
    const size_t keep_from = drop == 0 ? system_end : starts[drop];
    std::vector<ChatMessage> kept(messages.begin(), messages.begin() + system_end);
    kept.insert(kept.end(), messages.begin() + keep_from, messages.end());
    TL_ASSIGN_OR_RETURN(std::string rendered, chat_template.Render(kept, options));
    fit.messages = std::move(kept);
    fit.prompt_ids = tokenizer.Encode(rendered);
    fit.dropped_turns = static_cast<int64_t>(drop);
    fit.dropped_messages = static_cast<int64_t>(keep_from - system_end);
    fit.fits = static_cast<int64_t>(fit.prompt_ids.size()) + reserve <= context;
    if (fit.fits) break;
  }
  return fit;
}

}  // namespace tlaloc::generate
