// A per-row restriction of the next token (structured output): the engine asks it which ids may
// come next before each draw and adds a large negative bias to the others in that row's
// logit_bias input, so other rows of the batch are untouched.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "tlaloc/support/status.h"

namespace tlaloc::nn {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets mask[id] to 1 for the ids that may come next and to 0 for the others (mask covers the
  // model's vocabulary; ids the constraint does not know are 0).
  virtual void AllowedMask(std::span<uint8_t> mask) = 0;
  // Advances past a drawn token; an error when the mask did not allow it.
  virtual Status Accept(int32_t token) = 0;
  // Tokens accepted so far (the engine catches the constraint up with a sequence's history).
  virtual int64_t accepted() const = 0;
  // True when the output so far is complete (an end token may come).
  virtual bool Complete() const = 0;
  // The same rules from the start, for another sequence of the same request (n > 1): a
  // constraint holds one sequence's progress, so choices must not share one.
  virtual std::shared_ptr<TokenConstraint> Restarted() const = 0;
};

// The bias the engine gives ids a constraint refuses: far below any logit, yet finite so that
// penalties and temperature never turn it into inf or NaN.
inline constexpr float kRefusedTokenBias = -1e9f;

}  // namespace tlaloc::nn
