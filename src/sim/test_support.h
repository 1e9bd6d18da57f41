#pragma once
// Shared by the sim tests: where the public traces are (../shared, from the
// TESSERA_SHARED_DIR compile definition) and a temporary-file helper.

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tessera::sim::testing {

inline std::string sharedDir() {
  return TESSERA_SHARED_DIR;
}
inline std::string traceDir() {
  return sharedDir() + "/data/alibaba-gpu-2023";
}
inline std::string referenceDir() {
  return sharedDir() + "/data/fgd-simulator-reference";
}
inline std::string expectedDir() {
  return sharedDir() + "/data/fgd-simulator-expected-results";
}

inline bool haveSharedData() {
  return std::filesystem::exists(traceDir() + "/openb_pod_list_default.csv") &&
         std::filesystem::exists(referenceDir() + "/arrival_order/openb_pod_list_default.csv") &&
         std::filesystem::exists(expectedDir() + "/analysis_allo_discrete.csv");
}

#define TESSERA_SKIP_WITHOUT_SHARED_DATA()                                                    \
  do {                                                                                        \
    if (!::tessera::sim::testing::haveSharedData()) {                                         \
      GTEST_SKIP() << "the public traces are not at " << ::tessera::sim::testing::sharedDir() \
                   << "/data (configure with -DTESSERA_SHARED_DIR=... to run this test)";     \
    }                                                                                         \
  } while (false)

// A file under the test's temporary directory with `text` in it.
inline std::string writeTempFile(const std::string& name, const std::string& text) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera-sim-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / std::filesystem::path(name).parent_path());
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

}  // namespace tessera::sim::testing
