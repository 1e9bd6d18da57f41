#pragma once
// What every tessera subcommand shares: the output format and the exit-code contract
// (docs/cli.md): 0 success, 1 an internal failure, 2 bad input (flags, files, values).

#include <ostream>
#include <string_view>

#include "common/result.h"

namespace tessera::cli {

enum class OutputFormat { kTable, kJson };

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitUsage = 2;

// Bad input of any kind is the user's to fix (2); only internal errors are ours (1).
inline int exitCodeFor(const Error& error) {
  return error.code == ErrorCode::kInternal ? kExitInternal : kExitUsage;
}

// Writes "tessera <command>: <message>" to `err` and returns the matching exit code.
inline int reportError(std::ostream& err, std::string_view command, const Error& error) {
  err << "tessera " << command << ": " << error.message << '\n';
  return exitCodeFor(error);
}

}  // namespace tessera::cli
