// `tessera serve` as a user starts it: refusals with exit code 2 and a message naming the
// problem, and a clean exit 0 on SIGTERM.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int exitCode = -1;
  std::string err;
};

// Runs `tessera serve <args>` to completion (it must exit by itself: bad input).
Outcome serve(const std::string& args) {
  const fs::path errFile =
      fs::temp_directory_path() / ("tessera_serve_err_" + std::to_string(::getpid()));
  const std::string command = std::string(TESSERA_BINARY) + " serve " + args + " >/dev/null 2>" +
                              errFile.string() + " </dev/null";
  const int status = std::system(command.c_str());
  Outcome out;
  out.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(errFile);
  out.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  fs::remove(errFile);
  return out;
}

TEST(ServeCli, RefusesBadSetupsWithExitTwoAndAReason) {
  const fs::path dir =
      fs::temp_directory_path() / ("tessera_serve_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path notDb = dir / "not.db";
  std::ofstream(notDb) << "this is not a database";
  const fs::path shortToken = dir / "token";
  std::ofstream(shortToken) << "abc\n";
  struct Case {
    std::string args;
    std::string mention;
  };
  for (const Case& c : {
           Case{"--listen nowhere --store :memory:", "HOST:PORT"},
           Case{"--listen 127.0.0.1:99999 --store :memory:", "port"},
           Case{"--listen 0.0.0.0:0 --store :memory:", "without a token"},
           Case{"--listen 127.0.0.1:0 --store " + notDb.string(), "not a Tessera database"},
           Case{"--listen 127.0.0.1:0 --store :memory: --token-file " + shortToken.string(),
                "shorter than 16"},
           Case{"--listen 127.0.0.1:0 --store :memory: --tls-cert " + notDb.string(),
                "certificate"},
       }) {
    const Outcome o = serve(c.args);
    EXPECT_EQ(o.exitCode, 2) << c.args << "\n" << o.err;
    EXPECT_NE(o.err.find(c.mention), std::string::npos) << c.args << "\n" << o.err;
  }
  // The store file that was refused is left as it was.
  std::ifstream in(notDb);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "this is not a database");
  fs::remove_all(dir);
}

TEST(ServeCli, ExitsZeroOnSigterm) {
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    ::execl(TESSERA_BINARY, TESSERA_BINARY, "serve", "--listen", "127.0.0.1:0", "--store",
            ":memory:", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char c = 0;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  EXPECT_NE(line.find("listening on http://127.0.0.1:"), std::string::npos) << line;
  ::kill(pid, SIGTERM);
  std::string rest;
  while (::read(out[0], &c, 1) == 1) rest += c;
  ::close(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(rest.find("shutting down"), std::string::npos) << rest;
}

}  // namespace
