// Comparison rules of StableHLO's check custom calls (see conformance.h).
#include "tlaloc/stablehlo/conformance.h"

#include <cmath>
#include <cstring>
#include <optional>

#include "tlaloc/ir/attribute.h"
#include "tlaloc/ir/op_registry.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc {

namespace {

constexpr double kAlmostEqTolerance = 0.001;
constexpr uint64_t kCloseMaxUlp = 3;

// Maps a float's bit pattern to an integer line where adjacent floats are adjacent integers.
int64_t OrderedBits(uint64_t bits, int width) {
  const uint64_t sign = uint64_t{1} << (width - 1);
  const uint64_t mag = bits & (sign - 1);
  return (bits & sign) ? -static_cast<int64_t>(mag) : static_cast<int64_t>(mag);
}

template <typename T>
uint64_t BitsOf(T v) {
  if constexpr (kIsHalfLike<T>)
    return v.bits;
  else if constexpr (sizeof(T) == 4)
    return std::bit_cast<uint32_t>(v);
  else
    return std::bit_cast<uint64_t>(v);
}

template <typename T>
bool ElementMatches(CheckKind kind, T a, T e) {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T>) {
    return a == e;
  } else {
    const double da = ToDouble(a), de = ToDouble(e);
    if (std::isnan(da) || std::isnan(de)) return std::isnan(da) && std::isnan(de);
    switch (kind) {
      case CheckKind::kEq:
        return BitsOf(a) == BitsOf(e);
      case CheckKind::kAlmostEq:
        if (std::isinf(da) || std::isinf(de)) return da == de;
        return std::fabs(da - de) <= kAlmostEqTolerance;
      case CheckKind::kClose: {
        if (std::isinf(da) || std::isinf(de)) return da == de;
        constexpr int width = kIsHalfLike<T> ? 16 : static_cast<int>(sizeof(T) * 8);
        int64_t oa = OrderedBits(BitsOf(a), width), oe = OrderedBits(BitsOf(e), width);
        uint64_t diff = oa > oe ? static_cast<uint64_t>(oa - oe) : static_cast<uint64_t>(oe - oa);
        return diff <= kCloseMaxUlp;
      }
    }
    return false;
  }
}

const char* KindName(CheckKind k) {
  switch (k) {
    case CheckKind::kEq:
      return "expect_eq";
    case CheckKind::kAlmostEq:
      return "expect_almost_eq";
    case CheckKind::kClose:
      return "expect_close";
  }
  return "?";
}

std::string IndexString(const std::vector<int64_t>& dims, int64_t flat) {
  std::vector<int64_t> idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] == 0) break;
    idx[d] = flat % dims[d];
    flat /= dims[d];
  }
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

}  // namespace

Status CompareLiterals(CheckKind kind, const Literal& actual, const Literal& expected) {
  if (!(actual.type() == expected.type()))
    return InvalidArgument(std::string(KindName(kind)) + ": result type " +
                           actual.type().ToString() + " differs from the expected " +
                           expected.type().ToString());
  const int64_t n = actual.num_elements();
  int64_t bad = -1, mismatches = 0;
  DispatchElementType(actual.element_type(), [&]<typename T>() {
    auto a = actual.span<T>();
    auto e = expected.span<T>();
    for (int64_t i = 0; i < n; ++i) {
      if (!ElementMatches<T>(kind, a[i], e[i])) {
        if (bad < 0) bad = i;
        ++mismatches;
      }
    }
  });
  if (bad < 0) return OkStatus();
  return InvalidArgument(
      std::string(KindName(kind)) + ": " + std::to_string(mismatches) + " of " + std::to_string(n) +
      " elements differ; first at " + IndexString(actual.dims(), bad) + ": got " +
      FormatDenseElement(actual, bad) + ", expected " + FormatDenseElement(expected, bad));
}

void CheckRecorder::Add(CheckResult r) {
  std::lock_guard<std::mutex> lock(mu_);
  results_.push_back(std::move(r));
}

std::vector<CheckResult> CheckRecorder::results() const {
  std::lock_guard<std::mutex> lock(mu_);
  return results_;
}

int CheckRecorder::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  int n = 0;
  for (const auto& r : results_) n += r.passed ? 0 : 1;
  return n;
}

void AddConformanceChecks(InterpreterOptions& options, std::shared_ptr<CheckRecorder> recorder) {
  const std::pair<const char*, CheckKind> targets[] = {
      {"check.expect_eq", CheckKind::kEq},
      {"check.expect_almost_eq", CheckKind::kAlmostEq},
      {"check.expect_close", CheckKind::kClose},
  };
  for (const auto& [name, kind] : targets) {
    std::string target = name;
    CheckKind k = kind;
    options.custom_calls[target] = [target, k, recorder](std::span<const Literal> operands,
                                                         std::vector<Literal>&) -> Status {
      if (operands.size() != 2)
        return InvalidArgument("@" + target + " expects 2 operands (actual, expected), got " +
                               std::to_string(operands.size()));
      Status s = CompareLiterals(k, operands[0], operands[1]);
      recorder->Add({target, s.ok(), s.ok() ? "" : s.message()});
      return OkStatus();
    };
  }
}

namespace {

std::optional<CheckKind> CheckKindOf(const Operation& op) {
  if (op.name() != "stablehlo.custom_call") return std::nullopt;
  const std::string target = GetStringAttr(op.attrs(), "call_target_name");
  if (target == "check.expect_eq") return CheckKind::kEq;
  if (target == "check.expect_almost_eq") return CheckKind::kAlmostEq;
  if (target == "check.expect_close") return CheckKind::kClose;
  return std::nullopt;
}

// The first check call in `block` or the regions nested in it, or null.
const Operation* FindNestedCheck(const Block& block) {
  for (const auto& op : block.operations()) {
    if (CheckKindOf(*op)) return op.get();
    for (const auto& region : op->regions())
      for (const auto& b : region->blocks())
        if (const Operation* found = FindNestedCheck(*b)) return found;
  }
  return nullptr;
}

}  // namespace

StatusOr<HostChecks> MoveChecksToHost(Module& module, const std::string& entry) {
  Function* fn = module.Find(entry);
  if (!fn) return InvalidArgument("no function @" + entry + " to move the checks of");
  for (const auto& f : module.functions()) {
    if (f.get() == fn) continue;
    if (FindNestedCheck(f->entry()))
      return InvalidArgument("@" + f->name() +
                             " calls a check target; only the entry function's checks can run "
                             "on the host after a PJRT run");
  }
  Block& block = fn->entry();
  HostChecks out;
  out.original_results = static_cast<int>(fn->result_types().size());
  std::vector<Value> returned = block.terminator()->operands();
  std::vector<Type> result_types = fn->result_types();
  auto& ops = block.mutable_operations();
  std::vector<std::unique_ptr<Operation>> kept;
  for (auto& op : ops) {
    for (const auto& region : op->regions())
      for (const auto& b : region->blocks())
        if (FindNestedCheck(*b))
          return InvalidArgument("a check inside the region of " + op->name() + " in @" + entry +
                                 " cannot run on the host after a PJRT run");
    std::optional<CheckKind> kind = CheckKindOf(*op);
    if (!kind) {
      kept.push_back(std::move(op));
      continue;
    }
    const std::string target = GetStringAttr(op->attrs(), "call_target_name");
    if (op->num_operands() != 2)
      return InvalidArgument("@" + target + " expects 2 operands (actual, expected), got " +
                             std::to_string(op->num_operands()));
    HostChecks::Check check{target, *kind, static_cast<int>(returned.size()),
                            static_cast<int>(returned.size()) + 1};
    for (int i = 0; i < 2; ++i) {
      returned.push_back(op->operand(i));
      result_types.push_back(op->operand(i).type());
    }
    out.checks.push_back(std::move(check));
  }
  ops = std::move(kept);
  if (out.checks.empty()) return out;
  // The terminator now returns the checked values too.
  Operation* old_return = block.terminator();
  TL_ASSIGN_OR_RETURN(const OpDef* return_def, OpRegistry::Global().Get(old_return->name()));
  auto new_return = Operation::Create(*return_def, returned, {}, old_return->attrs());
  ops.pop_back();
  block.Append(std::move(new_return));
  fn->set_result_types(std::move(result_types));
  return out;
}

std::vector<CheckResult> RunHostChecks(const HostChecks& checks, std::span<const Literal> results) {
  std::vector<CheckResult> out;
  for (const auto& c : checks.checks) {
    if (c.expected >= static_cast<int>(results.size())) {
      out.push_back({c.target, false, "the run returned no value for this check"});
      continue;
    }
    Status s = CompareLiterals(c.kind, results[c.actual], results[c.expected]);
    out.push_back({c.target, s.ok(), s.ok() ? "" : s.message()});
  }
  return out;
}

}  // namespace tlaloc
