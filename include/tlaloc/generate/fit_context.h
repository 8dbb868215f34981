// Fitting a conversation into a context, as llama.cpp shifts its context when it fills: the
// oldest turns are dropped until the rendered prompt leaves room for the reply. `tlaloc chat` and
// the server's /v1/chat/completions both use this one rule (through TextRequest::drop_old_turns).
//
// The rule: the leading system message(s) are always kept. The rest is cut into turns, each a user
// message with the messages that answer it (assistant replies, tool results), so a user message
// is never separated from its reply; messages before the first user message form a turn of their
// own. The fewest oldest turns are dropped so that the prompt's tokens plus `reserve` fit in
// `context`; the last turn (the one with the last user message) is never dropped. When even that
// does not fit, every other turn is dropped and the caller decides (the prompt is then too long).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tlaloc/support/status.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"

namespace tlaloc::generate {

struct FittedConversation {
  std::vector<ChatMessage> messages;  // what is kept, in order
  std::vector<int32_t> prompt_ids;    // its render (with `options`), tokenized
  int64_t dropped_turns = 0;          // turns dropped (a user message and its replies count once)
  int64_t dropped_messages = 0;       // messages dropped: those right after the system message(s)
  bool fits = false;                  // prompt_ids.size() + reserve <= context
};

// The conversation with the fewest oldest turns dropped whose prompt plus `reserve` tokens fits
// in `context` tokens (see above). Errors are the template's.
StatusOr<FittedConversation> FitConversation(std::span<const ChatMessage> messages,
                                             const ChatTemplate& chat_template,
                                             const ChatOptions& options, const Tokenizer& tokenizer,
                                             int64_t context, int64_t reserve);

// The start of each droppable turn in `messages` (indices), after the leading system messages.
std::vector<size_t> TurnStarts(std::span<const ChatMessage> messages);

}  // namespace tlaloc::generate
