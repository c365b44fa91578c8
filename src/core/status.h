// Status and Result<T>: how every fallible kite API reports failure.
// An error carries a message a user can act on ("tensor 'model.norm.weight' missing in
// /m/model.safetensors"), never a bare code. Ops on already-validated data do not return
// Status; loaders, parsers and request validation do.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kite {

enum class ErrorCode {
  kInvalidArgument,  // the caller's input is wrong (bad flag, malformed JSON, bad shape)
  kNotFound,         // a file, tensor or model that should exist does not
  kCorrupt,          // a file exists but its bytes are not what its format promises
  kUnsupported,      // a valid input kite does not handle (unknown model_type, dtype)
  kResourceExhausted,
  kInternal,
};

class Status {
 public:
  Status() = default;  // OK
  Status(ErrorCode code, std::string message) : error_(Error{code, std::move(message)}) {}

  bool ok() const { return !error_.has_value(); }
  ErrorCode code() const { return error_->code; }
  const std::string& message() const { return error_->message; }

  // Prefixes context so the outermost caller can say where the failure happened.
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    return Status(error_->code, context + ": " + error_->message);
  }

 private:
  struct Error {
    ErrorCode code;
    std::string message;
  };
  std::optional<Error> error_;
};

inline Status ok_status() { return Status(); }
inline Status invalid_argument(std::string m) {
  return {ErrorCode::kInvalidArgument, std::move(m)};
}
inline Status not_found(std::string m) { return {ErrorCode::kNotFound, std::move(m)}; }
inline Status corrupt(std::string m) { return {ErrorCode::kCorrupt, std::move(m)}; }
inline Status unsupported(std::string m) { return {ErrorCode::kUnsupported, std::move(m)}; }
inline Status internal_error(std::string m) { return {ErrorCode::kInternal, std::move(m)}; }

// Result<T> holds either a value or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace kite

#define KITE_CONCAT_INNER(a, b) a##b
#define KITE_CONCAT(a, b) KITE_CONCAT_INNER(a, b)

// Returns early with the error if `expr` (a Status) is not OK.
#define KITE_RETURN_IF_ERROR(expr)       \
  do {                                   \
    ::kite::Status kite_st_ = (expr);    \
    if (!kite_st_.ok()) return kite_st_; \
  } while (0)

// `KITE_ASSIGN_OR_RETURN(auto x, make_x());` unwraps a Result or returns its error.
#define KITE_ASSIGN_OR_RETURN(lhs, expr) \
  KITE_ASSIGN_OR_RETURN_IMPL(KITE_CONCAT(kite_res_, __LINE__), lhs, expr)
#define KITE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
