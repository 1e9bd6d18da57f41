#pragma once
// `tessera serve <args>` as a child process, for the tests that run the real binary: stdout
// is a pipe, and the start-up banner is read before the constructor returns, line by line
// until a line holds `until`, `maxLines` lines were read, or stdout ends. The port comes from
// the "listening on http://127.0.0.1:PORT" line. The destructor stops the server with SIGTERM
// and waits for it. POSIX only; header-only so that each test binary passes its own binary.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/testing/spawn.h"

namespace tessera::api::testing {

class ServeProcess {
 public:
  ServeProcess(const std::string& binary, std::vector<std::string> args,
               std::string_view until = "dashboard at", int maxLines = 64) {
    std::vector<std::string> argv{binary, "serve"};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto child = tessera::testing::spawnWithStdoutPipe(argv);
    pid_ = child.pid;
    out_ = child.out;
    if (pid_ < 0) return;
    for (int line = 0; line < maxLines; ++line) {
      std::string text;
      char c = 0;
      bool newline = false;
      while (::read(out_, &c, 1) == 1) {
        if (c == '\n') {
          newline = true;
          break;
        }
        text += c;
      }
      if (!newline && text.empty()) break;  // stdout ended: the process exited
      banner_ += text + "\n";
      constexpr std::string_view kListening = "listening on http://127.0.0.1:";
      if (const auto at = text.find(kListening); at != std::string::npos) {
        port_ = std::atoi(text.c_str() + at + kListening.size());
      }
      if (!until.empty() && text.find(until) != std::string::npos) break;
    }
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  int port() const { return port_; }  // 0 when the banner did not say
  const std::string& banner() const { return banner_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int port_ = 0;
  std::string banner_;
};

}  // namespace tessera::api::testing
