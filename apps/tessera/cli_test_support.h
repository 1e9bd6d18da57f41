#pragma once
// The CLI tests' fixture: runs the built `tessera` binary through the shell in a scratch
// directory and captures its exit code, stdout and stderr.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Outcome {
  int exitCode = -1;
  std::string out;
  std::string err;
};

// The run exited with `code`; otherwise its output, for the failure message.
inline ::testing::AssertionResult exitedWith(const Outcome& run, int code) {
  if (run.exitCode == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "exit code " << run.exitCode << ", expected " << code << "\nstdout:\n"
         << run.out << "\nstderr:\n"
         << run.err;
}

std::string quoted(const std::string& text) {
  std::string q = "'";
  for (char c : text) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tessera_cli_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  // `args` is passed through the shell; quote paths with quoted().
  Outcome tessera(const std::string& args) {
    const fs::path errPath = dir_ / "stderr.txt";
    const std::string command =
        quoted(TESSERA_BINARY) + " " + args + " 2>" + quoted(errPath.string()) + " </dev/null";
    Outcome run;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen failed for: " << command;
      return run;
    }
    char buffer[4096];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.out.append(buffer, n);
    const int status = ::pclose(pipe);
    run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.err = readAll(errPath);
    return run;
  }

  static std::string example(const std::string& name) {
    return quoted(std::string(TESSERA_SOURCE_DIR) + "/examples/" + name);
  }
  static std::string examplesArgs() {
    return "place --cluster " + example("cluster.yaml") + " --requests " +
           example("requests.yaml") + " --profile " + example("profile.yaml");
  }

  fs::path dir_;
};
}  // namespace
