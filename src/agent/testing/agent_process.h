#pragma once
// `tessera agent run --config FILE` as a child process, for the tests that run the real
// binary: its stdout is a pipe, and the first line (which names the admin address) is read
// before the constructor returns. The destructor kills a child that was not waited for.
// POSIX only; header-only so that each test binary passes its own path to the binary.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "common/testing/spawn.h"

namespace tessera::agent::testing {

class AgentProcess {
 public:
  AgentProcess(const std::string& binary, const std::string& config) {
    const auto child =
        tessera::testing::spawnWithStdoutPipe({binary, "agent", "run", "--config", config});
    pid_ = child.pid;
    out_ = child.out;
    if (pid_ < 0) return;
    char c = 0;
    while (::read(out_, &c, 1) == 1 && c != '\n') firstLine_ += c;
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;
  ~AgentProcess() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  const std::string& firstLine() const { return firstLine_; }
  // host:port from "admin on http://host:port", or "" when the line does not say.
  std::string adminAddress() const {
    const auto at = firstLine_.find("admin on http://");
    return at == std::string::npos ? "" : firstLine_.substr(at + 16);
  }
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // Waits for the exit and returns the exit code (-1 when killed); the rest of stdout goes to
  // `rest`.
  int wait(std::string& rest) {
    char c = 0;
    while (::read(out_, &c, 1) == 1) rest += c;
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  int wait() {
    std::string rest;
    return wait(rest);
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string firstLine_;
};

}  // namespace tessera::agent::testing
