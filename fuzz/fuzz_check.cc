#include "fuzz_check.h"

#include <cstdio>
#include <cstdlib>

namespace tessera::fuzz {

void checkFailed(const char* condition, const std::string& what, const char* file, int line) {
  std::fprintf(stderr, "\n==fuzz== invariant violated at %s:%d: %s\n==fuzz== %s\n", file, line,
               condition, what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera::fuzz
