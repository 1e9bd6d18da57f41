#pragma once
// Errors are values: every fallible call across a module boundary returns Result<T>.
// An Error names what was wrong (the field or object) so that a user can fix it.

#include <expected>
#include <string>
#include <utility>

namespace tessera {

enum class ErrorCode {
  kInvalidArgument,  // bad input from a user, a file or a peer
  kNotFound,         // a referenced object does not exist
  kAlreadyExists,    // a create collided with an existing object
  kFailedPrecondition,  // the request is valid but the state does not allow it
  kResourceExhausted,   // it does not fit
  kInternal,            // a bug or an unexpected environment failure
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;

  static Error invalid(std::string msg) { return {ErrorCode::kInvalidArgument, std::move(msg)}; }
  static Error notFound(std::string msg) { return {ErrorCode::kNotFound, std::move(msg)}; }
  static Error exists(std::string msg) { return {ErrorCode::kAlreadyExists, std::move(msg)}; }
  static Error precondition(std::string msg) {
    return {ErrorCode::kFailedPrecondition, std::move(msg)};
  }
  static Error exhausted(std::string msg) { return {ErrorCode::kResourceExhausted, std::move(msg)}; }
  static Error internal(std::string msg) { return {ErrorCode::kInternal, std::move(msg)}; }
};

template <typename T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(Error e) { return std::unexpected<Error>(std::move(e)); }

const char* errorCodeName(ErrorCode code);

// The HTTP status an error maps to on every Tessera API: 400 invalid argument, 404 not found,
// 409 already exists / failed precondition / does not fit; `internalStatus` (500, or e.g. 502
// where the failure is an upstream engine's) for internal errors.
int httpStatusFor(ErrorCode code, int internalStatus = 500);

}  // namespace tessera

// Propagates an error from an expression returning Result<...>.
#define TESSERA_RETURN_IF_ERROR(expr)                         \
  do {                                                        \
    auto tessera_status_ = (expr);                            \
    if (!tessera_status_) return ::tessera::fail(std::move(tessera_status_.error())); \
  } while (false)
