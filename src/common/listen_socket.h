#pragma once
// Socket options for a server's listening socket: one port, one server.
//
// cpp-httplib's default options turn on SO_REUSEPORT, which lets a second process bind a port
// another one already listens on; the kernel then spreads connections between them, and
// clients reach whichever answers (an empty, newly started server among them). Every listener
// of Tessera's takes these options instead: SO_REUSEADDR only, so a restart can bind while
// old connections sit in TIME_WAIT, but a port in use by a listener is an error at bind.
//
//   server.set_socket_options(tessera::exclusiveListenOptions);

namespace tessera {

void exclusiveListenOptions(int socketFd);

}  // namespace tessera
