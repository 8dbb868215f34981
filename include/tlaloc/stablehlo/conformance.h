// The check custom calls of StableHLO's self-checking test programs (@check.expect_eq,
// @check.expect_almost_eq, @check.expect_close), as interpreter custom-call handlers, and
// the comparison rules behind them.
#pragma once

#include <memory>
#include <mutex>
#include <span>
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

// A self-checking program made ready for a backend that does not know the check targets (every
// PJRT plugin but Tlaloc's): the checks are taken out of the entry function and the values they
// compare become extra results, so the same comparisons run on the host after the run.
struct HostChecks {
  struct Check {
    std::string target;  // "check.expect_eq", ...
    CheckKind kind;
    int actual = 0;  // indexes into the rewritten entry's results
    int expected = 0;
  };
  int original_results = 0;  // the entry's results before the appended ones
  std::vector<Check> checks;
};

// Rewrites `entry` of `module` in place as HostChecks describes. A check call elsewhere (in a
// function the entry calls, or inside a region) is an error naming its function, since its
// operands cannot become the entry's results; so is a check with other than 2 operands.
StatusOr<HostChecks> MoveChecksToHost(Module& module, const std::string& entry);

// Runs the moved checks over the rewritten program's `results`.
std::vector<CheckResult> RunHostChecks(const HostChecks& checks, std::span<const Literal> results);

}  // namespace tlaloc
