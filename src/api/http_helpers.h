#pragma once
// What every Tessera HTTP server (`tessera serve`, the agent's admin API, the test servers)
// needs from cpp-httplib 0.11 beyond its defaults.

#include <thread>

namespace httplib {
class Server;
struct Request;
}  // namespace httplib

namespace tessera::api {

// RFC 9112 §6.3: a request with neither Content-Length nor Transfer-Encoding has no body
// (`curl -X POST URL`). httplib reads one until the connection closes instead, which on a
// keep-alive connection is its 5-s read timeout and then a 400. Call from the pre-routing
// handler, which runs before the body is read.
void assumeNoBodyWithoutLength(const httplib::Request& req);

// Runs the accept loop of a bound server on a new thread and returns once it runs: httplib's
// stop() does nothing before that, so a stop right after start (a SIGTERM during start-up)
// would otherwise leave the loop running and the join hanging.
std::thread listenInBackground(httplib::Server& server);

}  // namespace tessera::api
