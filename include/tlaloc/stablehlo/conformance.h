// The check custom calls of StableHLO's self-checking test programs (@check.expect_eq,
// @check.expect_almost_eq, @check.expect_close), as interpreter custom-call handlers, and
// the comparison rules behind them.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/literal.h"

namespace tlaloc {

enum class CheckKind { kEq, kAlmostEq, kClose };

// Compares `actual` with `expected` under a check's rule; OK when it passes, otherwise an
// error naming the first mismatching element (index, both values).
//   kEq: every element identical (floats bitwise, any NaN matches any NaN);
//   kAlmostEq: |a - e| <= 0.001 (NaN matches NaN, infinities must be equal);
//   kClose: within 3 ULP of the element type (NaN matches NaN; a finite value never matches a
//   non-finite one); integers and booleans exactly.
Status CompareLiterals(CheckKind kind, const Literal& actual, const Literal& expected);

struct CheckResult {
  std::string target;  // "check.expect_eq", ...
  bool passed = false;
  std::string message;  // the first mismatch when failed
};

// Collects the outcome of every check a run performs (thread-safe).
class CheckRecorder {
 public:
  void Add(CheckResult r);
  std::vector<CheckResult> results() const;
  int failed() const;

 private:
  mutable std::mutex mu_;
  std::vector<CheckResult> results_;
};

// Registers the three check targets in `options`. Each check records its result in `recorder`
// and lets the program go on (so every check of a program is reported); a check called with
// the wrong number of operands is an error.
void AddConformanceChecks(InterpreterOptions& options, std::shared_ptr<CheckRecorder> recorder);

}  // namespace tlaloc
