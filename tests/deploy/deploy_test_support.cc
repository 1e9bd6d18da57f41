#include "deploy_test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "config/yaml_field.h"
#include "config/yaml_json.h"

namespace tessera::deploytest {

namespace fs = std::filesystem;

fs::path sourceDir() {
  return fs::path(TESSERA_SOURCE_DIR);
}

std::string readText(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << file;
    return {};
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<nlohmann::json> yamlDocuments(const std::string& text, const std::string& source) {
  std::vector<nlohmann::json> out;
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    ADD_FAILURE() << source << ": " << e.what();
    return out;
  }
  for (const YAML::Node& d : docs) {
    if (!d || d.IsNull()) continue;
    auto j = config::yamlToJson(config::Field::root(source, d));
    if (!j) {
      ADD_FAILURE() << j.error().message;
      continue;
    }
    out.push_back(std::move(*j));
  }
  return out;
}

CommandResult runCommand(const std::string& shellCommand) {
  CommandResult r;
  char errPath[] = "/tmp/tessera-deploy-test-XXXXXX";
  const int fd = ::mkstemp(errPath);
  if (fd < 0) return r;
  ::close(fd);
  const std::string full = shellCommand + " 2>" + errPath;
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) {
    ::unlink(errPath);
    return r;
  }
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = readText(errPath);
  ::unlink(errPath);
  return r;
}

std::optional<std::string> findKubectl() {
  if (const char* env = std::getenv("TESSERA_KUBECTL"); env != nullptr && *env != '\0') {
    return std::string(env);
  }
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / "kubectl";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return std::nullopt;
}

}  // namespace tessera::deploytest
