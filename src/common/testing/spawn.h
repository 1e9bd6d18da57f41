#pragma once
// Starts a child process for the tests that run the real binaries, with its stdout on a pipe
// whose read end the caller gets. posix_spawn, never fork() followed by code: a test process
// has threads (a loopback server, a drain thread), and a fork()ed child of a threaded
// process may only make async-signal-safe calls until it execs. malloc, setenv and
// std::string are not: a child that forked while another thread held the allocator's lock
// waits for it forever, before it ever prints its first line.
// POSIX only; header-only.

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

extern char** environ;

namespace tessera::testing {

struct Spawned {
  pid_t pid = -1;  // -1: it did not start
  int out = -1;    // the read end of the child's stdout
};

// argv[0] is the program's path. `env` is set on top of this process's environment;
// stderr goes to `stderrPath` (appended to), or stays this process's when that is empty.
inline Spawned spawnWithStdoutPipe(const std::vector<std::string>& argv,
                                   const std::vector<std::pair<std::string, std::string>>& env = {},
                                   const std::string& stderrPath = "") {
  // Everything the child needs is built here, in the parent.
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string var = *e;
    bool overridden = false;
    for (const auto& [k, v] : env) overridden = overridden || var.rfind(k + "=", 0) == 0;
    if (!overridden) vars.push_back(var);
  }
  for (const auto& [k, v] : env) vars.push_back(k + "=" + v);
  std::vector<char*> cenv;
  for (std::string& v : vars) cenv.push_back(v.data());
  cenv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);  // dup2 clears CLOEXEC
  if (!stderrPath.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderrPath.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return {};
  }
  return {pid, fds[0]};
}

}  // namespace tessera::testing
