// The sequence state machine: its next engine rows and how a drawn token ends it.
#include "tlaloc/generate/sequence.h"

#include <algorithm>

namespace tlaloc::generate {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kNone:
      return "";
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "";
}

PrefillRow Sequence::NextChunk(int64_t chunk) const {
  // The next chunk continues the sequence where the last one (or the shared prefix) ended.
  const int64_t rest = prompt_len() - fed_;
  const int64_t n = chunk > 0 ? std::min(rest, chunk) : rest;
  PrefillRow row;
  row.slot = slot_;
  row.start = fed_;
  row.prompt.assign(spec_.prompt.begin() + fed_, spec_.prompt.begin() + fed_ + n);
  row.sampling = spec_.sampling;
  return row;
}

DecodeRow Sequence::NextDecode() const {
  DecodeRow row;
  row.slot = slot_;
  row.token = generated_.back();
  row.position = static_cast<int32_t>(prompt_len() + static_cast<int64_t>(generated_.size()) - 1);
  row.sampling = spec_.sampling;
  // The draw counter: the prefill drew with step 0, the k-th decode step draws with step k.
  row.step = static_cast<uint32_t>(generated_.size());
  return row;
}

FinishReason Sequence::Accept(int32_t token, FinishReason verdict) {
  if (verdict == FinishReason::kError || verdict == FinishReason::kCancelled) return verdict;
  const auto& eos = spec_.eos_token_ids;
  if (verdict == FinishReason::kStop || std::find(eos.begin(), eos.end(), token) != eos.end())
    return FinishReason::kStop;
  // The sequence holds `context` positions, prompt included (the last token is never fed back).
  const int64_t n = static_cast<int64_t>(generated_.size());
  if (verdict == FinishReason::kLength || n >= spec_.max_new_tokens ||
      prompt_len() + n >= spec_.context)
    return FinishReason::kLength;
  return FinishReason::kNone;
}

}  // namespace tlaloc::generate
