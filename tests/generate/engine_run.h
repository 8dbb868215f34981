// What the tensor-parallel engine tests share: one prompt prefilled in chunks and then decoded
// in one slot of an Engine, keeping every step's ids and logits, and how far two logit rows
// are apart.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "tlaloc/generate/engine.h"

namespace tlaloc::generate {

struct EngineRun {
  std::vector<int32_t> tokens;
  std::vector<Literal> logits;  // one [1, V] per token
};

// The prompt prefilled in chunks of `chunk` tokens, then `steps` decode steps, in `slot`
// (released at the end, so the next run starts afresh).
inline StatusOr<EngineRun> RunOneSlot(Engine& e, const std::vector<int32_t>& prompt, int64_t chunk,
                                      const RowSampling& sampling, int64_t steps,
                                      int64_t slot = 0) {
  TL_RETURN_IF_ERROR(e.Reserve(2, 64));
  EngineRun run;
  EngineStep step;
  for (size_t start = 0; start < prompt.size(); start += chunk) {
    PrefillRow row;
    row.slot = slot;
    row.start = static_cast<int64_t>(start);
    row.prompt.assign(prompt.begin() + start,
                      prompt.begin() + std::min(prompt.size(), start + chunk));
    row.sampling = sampling;
    TL_ASSIGN_OR_RETURN(step, e.Prefill(std::span<const PrefillRow>(&row, 1)));
  }
  run.tokens.push_back(step.tokens[0]);
  run.logits.push_back(std::move(step.logits));
  for (int64_t s = 1; s <= steps; ++s) {
    DecodeRow row;
    row.slot = slot;
    row.token = run.tokens.back();
    row.position = static_cast<int32_t>(prompt.size() + s - 1);
    row.sampling = sampling;
    row.step = static_cast<uint32_t>(s);
    TL_ASSIGN_OR_RETURN(step, e.Decode(std::span<const DecodeRow>(&row, 1)));
    run.tokens.push_back(step.tokens[0]);
    run.logits.push_back(std::move(step.logits));
  }
  e.Release(slot);
  return run;
}

// max |a - b| / max |a| over two f32 logit rows.
inline double MaxRelativeDifference(const Literal& a, const Literal& b) {
  auto x = a.span<float>(), y = b.span<float>();
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(x[i]) - y[i]));
    scale = std::max(scale, std::abs(static_cast<double>(x[i])));
  }
  return diff / scale;
}

}  // namespace tlaloc::generate
