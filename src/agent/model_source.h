#pragma once
// Where the node model cache gets weights from. A model is a set of files (a folder of
// safetensors shards and configs, or one file) under the model's name.
//
//  - DirectorySource: <root>/<model>/ (every regular file below it) or <root>/<model> (one
//    file). A local disk or a mounted volume (NFS, a CSI volume, a hostPath).
//  - HttpSource: <url>/<model>/manifest.json lists the files,
//    {"files": [{"path": "model-00001.safetensors", "bytes": 4976698672}, ...]}, and each is
//    fetched from <url>/<model>/<path>.
//
// Threading: fetch() may be called from several threads at once on one source.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace tessera::agent {

struct SourceFile {
  std::string path;  // relative to the model, '/'-separated, never ".." or absolute
  std::int64_t bytes = 0;
};

class ModelSource {
 public:
  virtual ~ModelSource() = default;
  virtual std::string name() const = 0;
  // The model's files; NotFound when this source does not hold the model.
  virtual Result<std::vector<SourceFile>> list(const std::string& model) = 0;
  // Writes the file's bytes to the open file descriptor `fd`; returns how many were written.
  virtual Result<std::int64_t> fetch(const std::string& model, const SourceFile& file, int fd) = 0;
};

std::unique_ptr<ModelSource> makeDirectorySource(std::string name, std::string root);

struct HttpSourceOptions {
  std::string token;  // sent as a bearer token when not empty
  std::optional<std::string> caFile;
  int timeoutSeconds = 30;
};
Result<std::unique_ptr<ModelSource>> makeHttpSource(std::string name, std::string url,
                                                    HttpSourceOptions options = {});

// A model name is one path component a person would write: letters, digits, '.', '_', '-',
// ':', '@' and '/' (as in "meta-llama/Llama-3-8B"), no empty parts, no "." or "..".
Result<void> checkModelName(const std::string& model);
// A relative file path inside a model (no "..", not absolute, no empty parts).
Result<void> checkRelativePath(const std::string& path);

}  // namespace tessera::agent
