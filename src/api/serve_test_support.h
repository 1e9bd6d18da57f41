#pragma once
// Starts the real `tessera serve` binary (TESSERA_BINARY) for the process-level tests:
// stdout is read up to its first line ("listening on http://127.0.0.1:PORT ...") for the
// port and then drained in the background, so the server never blocks on a full pipe; stderr
// goes to `stderrPath` (appended to, so a restarted replica's log follows its predecessor's),
// or to /dev/null when that is empty.

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/testing/spawn.h"

namespace tessera::testing {

struct ServeProcess {
  pid_t pid = -1;
  int port = 0;  // 0: it did not print where it listens
};

// `args` follow "serve"; `env` is added to the child's environment.
inline ServeProcess startServe(const std::vector<std::string>& args,
                               const std::vector<std::pair<std::string, std::string>>& env = {},
                               const std::string& stderrPath = "") {
  std::vector<std::string> argv = {TESSERA_BINARY, "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  const Spawned child =
      spawnWithStdoutPipe(argv, env, stderrPath.empty() ? "/dev/null" : stderrPath);
  if (child.pid < 0) return {};
  const int fd = child.out;
  ServeProcess p;
  p.pid = child.pid;
  std::string line;
  char c = 0;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  std::thread([fd] {
    char buf[512];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
    ::close(fd);
  }).detach();
  const auto at = line.find("127.0.0.1:");
  if (at != std::string::npos) p.port = std::atoi(line.c_str() + at + 10);
  return p;
}

}  // namespace tessera::testing
