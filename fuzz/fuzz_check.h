#pragma once
// The check every fuzz target uses: on failure it prints the condition and a message and
// aborts, so that the driver (or libFuzzer) saves the input. No dependencies, so targets of
// any module can link it alone (tessera_fuzz_check).

#include <string>

namespace tessera::fuzz {

[[noreturn]] void checkFailed(const char* condition, const std::string& what, const char* file,
                              int line);

#define TESSERA_FUZZ_CHECK(cond, what)                                            \
  do {                                                                            \
    if (!(cond)) ::tessera::fuzz::checkFailed(#cond, (what), __FILE__, __LINE__); \
  } while (0)

}  // namespace tessera::fuzz
