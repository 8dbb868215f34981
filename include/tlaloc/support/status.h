// Status and StatusOr: the project's one error channel. Kept small and local instead of pulling
// in Abseil for two types; messages name the thing, the position and what was expected.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tlaloc {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kUnimplemented,
  kFailedPrecondition,
  kOutOfRange,
  kInternal,
  kResourceExhausted,
  kDataLoss,
  kUnavailable,
  kPermissionDenied,
  kAborted,
  kDeadlineExceeded,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message" (or "OK").
  std::string ToString() const;
  // Returns a copy whose message is "context: message".
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status OkStatus() { return Status(); }
Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status Unimplemented(std::string message);
Status FailedPrecondition(std::string message);
Status OutOfRange(std::string message);
Status Internal(std::string message);
Status ResourceExhausted(std::string message);
Status DataLoss(std::string message);

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "StatusOr built from an OK status");
    if (status_.ok()) status_ = Internal("StatusOr constructed from OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tlaloc

#define TL_CONCAT_INNER_(a, b) a##b
#define TL_CONCAT_(a, b) TL_CONCAT_INNER_(a, b)

#define TL_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::tlaloc::Status tl_status_ = (expr);         \
    if (!tl_status_.ok()) return tl_status_;      \
  } while (0)

#define TL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define TL_ASSIGN_OR_RETURN(lhs, expr) \
  TL_ASSIGN_OR_RETURN_IMPL_(TL_CONCAT_(tl_statusor_, __LINE__), lhs, expr)
