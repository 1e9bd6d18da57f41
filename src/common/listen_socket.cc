#include "common/listen_socket.h"

#include <sys/socket.h>

namespace tessera {

void exclusiveListenOptions(int socketFd) {
  const int yes = 1;
  // Failing here leaves the defaults, which are exclusive too; bind reports the real problem.
  (void)::setsockopt(socketFd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

}  // namespace tessera
