#pragma once
// Tests: one HTTP request sent exactly as written, for what a client library would never send
// (no Content-Length on a POST, a malformed request line).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace tessera::testing {

// Sends `head` (and nothing else) on a keep-alive connection to 127.0.0.1:port and returns the
// status line's code, or -1 when no answer came within `seconds`.
inline int rawRequest(int port, const std::string& head, int seconds = 30) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  int code = -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, head.data(), head.size(), 0) == static_cast<ssize_t>(head.size())) {
    char buf[512];
    const ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
    if (n > 12) code = std::atoi(std::string(buf, static_cast<std::size_t>(n)).substr(9, 3).c_str());
  }
  ::close(fd);
  return code;
}

}  // namespace tessera::testing
