#pragma once
// Test helpers of the profile module: a temporary directory removed afterwards, raw file
// writes, and safetensors headers built by hand.

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace tessera::profile::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-profile-XXXXXX").string();
    // mkdtemp replaces the XXXXXX by a unique suffix and creates the directory.
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

inline void writeBytes(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string readBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i, v >>= 8) s[i] = static_cast<char>(v & 0xff);
  return s;
}

// A safetensors file: the length of `header`, `header`, then `dataBytes` zero bytes.
inline std::string safetensorsBytes(std::string_view header, std::uint64_t dataBytes) {
  return le64(header.size()) + std::string(header) + std::string(dataBytes, '\0');
}

}  // namespace tessera::profile::testing
