#pragma once
// A stand-in for Triton Inference Server in --model-control-mode=explicit, over real HTTP,
// following the KServe v2 health and readiness routes and Triton's model repository
// extension: paths, bodies, status codes and the model lifecycle.
//
// The repository is a directory: <repo>/<model>/config.pbtxt and numeric version
// directories. What the stand-in reads from config.pbtxt: `backend: "..."` and a
// `version_policy` (latest { num_versions: N }, all { }, specific { versions: [...] });
// the default, as in Triton, is the latest version. A load:
//   - fails (400) for a model without a directory, or without config.pbtxt and without a
//     "config" parameter, or for an invalid body or config;
//   - marks the versions it brings up LOADING, takes `loadDelayMs` (and waits while
//     holdWork() is on), then makes them READY
//     and retires (UNAVAILABLE, "unloaded") the versions the policy no longer names, so
//     the old version serves until the new one is ready;
//   - fails a version whose directory holds a file named FAIL (its text is the reason),
//     leaving what was loaded before untouched;
//   - accepts "file:<version>/<name>" parameters (base64) as an override directory; they
//     need "config", as in Triton.
// An unload answers at once; the versions stay UNLOADING for `unloadDelayMs`.
// Messages follow Triton's where known ("failed to load '<m>', failed to poll from model
// repository"); cases this stand-in words itself are marked in fake_triton.cc.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engines/testing/fake_server.h"

namespace tessera::engines::testing {

struct FakeTritonOptions {
  std::filesystem::path repository;
  long long loadDelayMs = 0;
  long long unloadDelayMs = 0;
  // false: started without --model-control-mode=explicit; load and unload answer 503.
  bool explicitMode = true;
};

class FakeTriton final : public FakeServer {
 public:
  explicit FakeTriton(FakeTritonOptions options);
  ~FakeTriton() override;

  // READY, LOADING, UNLOADING, UNAVAILABLE, or "" when the version was never loaded.
  std::string state(const std::string& model, std::int64_t version) const;
  // Override files the last load of `model` carried, decoded ("1/model.onnx" -> bytes).
  std::map<std::string, std::string> overrideFiles(const std::string& model) const;

 private:
  struct Version {
    std::string state;
    std::string reason;
  };
  struct Model {
    std::map<std::int64_t, Version> versions;
    nlohmann::json config;  // the configuration it is served with, once loaded
    std::map<std::string, std::string> files;
    bool fromOverride = false;
  };

  void routes(httplib::Server& server) override;
  void handleIndex(const httplib::Request& req, httplib::Response& res);
  void handleLoad(const std::string& name, const httplib::Request& req, httplib::Response& res);
  void handleUnload(const std::string& name, const httplib::Request& req, httplib::Response& res);
  void handleReady(const std::string& name, std::optional<std::int64_t> version,
                   httplib::Response& res);
  void handleConfig(const std::string& name, httplib::Response& res);

  bool inRepository(const std::string& name) const;

  FakeTritonOptions options_;
  mutable std::mutex stateMu_;  // guards models_ and unloaders_; never held while pausing
  std::mutex loadMu_;           // one load or unload at a time; taken before stateMu_
  std::map<std::string, Model> models_;
  std::vector<std::thread> unloaders_;
};

}  // namespace tessera::engines::testing
