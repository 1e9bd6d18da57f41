#pragma once
// Writing a command's --out-dir files: the folder is created if missing, every file is
// checked after writing, and the paths written are collected for the summary line.

#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "common/result.h"

namespace tessera::cli {

class OutDir {
 public:
  static Result<OutDir> create(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(Error::invalid("--out-dir " + dir + ": " + ec.message()));
    return OutDir(dir);
  }

  Result<void> write(const std::string& name, const std::function<void(std::ostream&)>& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream f(path);
    if (!f) return fail(Error::invalid(path + ": cannot write"));
    body(f);
    if (!f) return fail(Error::invalid(path + ": write failed"));
    written_.push_back(path);
    return {};
  }

  const std::vector<std::string>& written() const { return written_; }

 private:
  explicit OutDir(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  std::vector<std::string> written_;
};

}  // namespace tessera::cli
