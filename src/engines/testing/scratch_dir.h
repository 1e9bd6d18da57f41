#pragma once
// A fresh directory for one test (a model repository, LoRA adapter folders), removed with
// everything in it at the end. Threading: owned by one test.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace tessera::engines::testing {

class ScratchDir {
 public:
  ScratchDir() {
    // mkdtemp replaces the trailing XXXXXX with a unique suffix and creates the directory.
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tessera-engines-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `relative` (creating its folders) and returns its full path.
  std::filesystem::path write(const std::string& relative, const std::string& bytes) const {
    const auto full = path_ / relative;
    std::filesystem::create_directories(full.parent_path());
    std::ofstream(full, std::ios::binary | std::ios::trunc) << bytes;
    return full;
  }
  std::filesystem::path mkdir(const std::string& relative) const {
    std::filesystem::create_directories(path_ / relative);
    return path_ / relative;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace tessera::engines::testing
