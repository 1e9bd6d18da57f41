#pragma once
// Helpers of the deploy tests: files and multi-document YAML as JSON, running a command.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::deploytest {

std::filesystem::path sourceDir();
std::string readText(const std::filesystem::path& file);
// Every non-empty document, as JSON (YAML 1.2 core schema: quoted scalars stay strings).
// Fails the calling test (ADD_FAILURE) on a parse error.
std::vector<nlohmann::json> yamlDocuments(const std::string& text, const std::string& source);

struct CommandResult {
  int status = -1;
  std::string out, err;
};
CommandResult runCommand(const std::string& shellCommand);

// kubectl: $TESSERA_KUBECTL, else the first `kubectl` on $PATH; nullopt when there is none.
std::optional<std::string> findKubectl();

}  // namespace tessera::deploytest
