#pragma once
// Starts the real `tessera serve` binary (TESSERA_BINARY) for the process-level tests:
// stdout is read up to its first line ("listening on http://127.0.0.1:PORT ...") for the
// port and then drained in the background, so the server never blocks on a full pipe; stderr
// goes to /dev/null.

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tessera::testing {

struct ServeProcess {
  pid_t pid = -1;
  int port = 0;  // 0: it did not print where it listens
};

// `args` follow "serve"; `env` is added to the child's environment.
inline ServeProcess startServe(const std::vector<std::string>& args,
                               const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> argv = {TESSERA_BINARY, "serve"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int out[2];
  if (::pipe(out) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, STDERR_FILENO);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execv(TESSERA_BINARY, cargv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ServeProcess p;
  p.pid = pid;
  std::string line;
  char c = 0;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  std::thread([fd = out[0]] {
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
