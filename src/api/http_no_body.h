#pragma once
// RFC 9112 §6.3: a request with neither Content-Length nor Transfer-Encoding has no body
// (`curl -X POST URL`). cpp-httplib 0.11 reads one until the connection closes instead, which
// on a keep-alive connection is its 5-s read timeout and then a 400. Every Tessera server
// (`tessera serve`, the agent's admin API) calls this from its pre-routing handler, which runs
// before the body is read.

namespace httplib {
struct Request;
}

namespace tessera::api {

void assumeNoBodyWithoutLength(const httplib::Request& req);

}  // namespace tessera::api
