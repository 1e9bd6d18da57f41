// Fuzz target: every route of the control plane's HTTP server (`tessera serve`), through the
// real HttpServer on a loopback port. Structure-aware: an input is a JSON document naming the
// requests to send, so the driver's JSON-aware mutations change methods, paths, queries and
// the bodies' structure, not just bytes:
//
//   {"method": "POST", "path": "/api/v1/nodes", "body": {...}}          one request
//   {"requests": [{...}, {...}]}                                         up to 8, in order
//
// `body` is sent as JSON (`"body": "text"` sends the text as it is, malformed JSON included);
// `query` is appended after `?`; `contentType` replaces application/json; `"auth": false`
// leaves the bearer token out. Each input runs on a fresh control plane (nodes gpu-a: 2 ×
// H100-80GB on one NVLink group, gpu-b: L4; models llama-8b and llama-70b; replica chat-0;
// deployment assistant), the corpus in fuzz/corpus/http/ holds a valid request for every
// route in docs/api.md.
//
// Checks beyond "no crash, no sanitizer report":
//  - every request is answered, never with a 5xx (a 500 is a bug or a failed commit, and the
//    store here is memory);
//  - a 4xx under /api/ is the documented error object, {"error": {"code": ...}} with a code
//    from the table in docs/api.md;
//  - a refused request (4xx) leaves the node, model, replica and deployment listings as they
//    were, and, but for the calls whose all-or-nothing rollback books and releases (replica
//    placement, the extender), the state generation;
//  - a GET changes nothing;
//  - ClusterState::checkInvariants() holds after every request.
//
// TESSERA_FUZZ_TRACE=1 prints every request and its answer (to see what a corpus file reaches).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>
#include <string>
#include <string_view>

#include <httplib.h>

#include "api/control_plane.h"
#include "api/http_server.h"
#include "api/json_api.h"
#include "fuzz_support.h"
#include "http_request.h"

namespace {

using nlohmann::json;
using tessera::api::ControlPlane;
using tessera::api::HttpServer;

constexpr const char* kToken = "fuzz-token-0123456789";
constexpr std::size_t kMaxRequests = 8;

struct Server {
  Server() {
    auto p = ControlPlane::create(catalog, clock);
    if (!p) tessera::fuzz::checkFailed("create", p.error().message, __FILE__, __LINE__);
    plane = std::move(*p);
    auto must = [](bool ok, const std::string& error, const char* what) {
      if (!ok) tessera::fuzz::checkFailed(what, error, __FILE__, __LINE__);
    };
    auto node = [&](const char* body, const char* what) {
      auto r = tessera::api::json_api::registerNode(*plane, json::parse(body));
      must(r.has_value(), r ? "" : r.error().message, what);
    };
    node(R"({"name":"gpu-a","cpu":96,"hostMemory":"768Gi","labels":{"pool":"inference"},
             "gpus":[{"type":"H100-80GB","nvlinkGroup":0},{"type":"H100-80GB","nvlinkGroup":0}]})",
         "gpu-a");
    node(R"({"name":"gpu-b","cpu":32,"hostMemory":"128Gi","gpus":[{"type":"L4"}]})", "gpu-b");
    auto model = [&](const char* body, const char* what) {
      auto r = tessera::api::json_api::putModel(*plane, json::parse(body));
      must(r.has_value(), r ? "" : r.error().message, what);
    };
    model(R"({"name":"llama-8b","weights":"8Gi","kvCache":"4Gi","overhead":"2Gi","computeMilli":400})",
          "llama-8b");
    model(R"({"name":"llama-70b","weights":"120Gi","kvCache":"8Gi","gpusPerReplica":2,
              "nvlinkRequired":true,"priority":10})",
          "llama-70b");
    auto placed = tessera::api::json_api::placeReplicas(
        *plane, json::parse(R"({"replicaId":"chat-0","model":"llama-8b"})"));
    must(placed.has_value(), placed ? "" : placed.error().error.message, "chat-0");
    auto deployment = tessera::api::json_api::putDeployment(
        *plane,
        json::parse(R"({"name":"assistant","model":"llama-8b","minReplicas":1,"maxReplicas":3})"));
    must(deployment.has_value(), deployment ? "" : deployment.error().message, "assistant");

    tessera::api::ServerConfig config;
    config.port = 0;
    config.token = kToken;
    config.maxBodyBytes = 64 * 1024;
    config.threads = 2;
    http = std::make_unique<HttpServer>(*plane, config);
    auto port = http->start();
    must(port.has_value(), port ? "" : port.error().message, "start");
    client = std::make_unique<httplib::Client>("127.0.0.1", *port);
    client->set_connection_timeout(5);
    client->set_read_timeout(10);
    client->set_write_timeout(10);
  }
  ~Server() { http->stop(); }

  // What a refused call must leave alone, read under the handlers' mutex.
  std::string listings() {
    std::string out;
    http->withPlane([&](ControlPlane& p) {
      out = p.listNodes().dump() + p.listModels().dump() + p.listReplicas().dump() +
            p.listDeployments().dump();
    });
    return out;
  }
  std::uint64_t generation() {
    std::uint64_t g = 0;
    http->withPlane([&](ControlPlane& p) { g = p.state().generation(); });
    return g;
  }
  void checkInvariants(const std::string& what) {
    http->withPlane([&](ControlPlane& p) {
      auto ok = p.state().checkInvariants();
      TESSERA_FUZZ_CHECK(ok.has_value(), what + ": " + (ok ? "" : ok.error().message));
    });
  }

  tessera::model::GpuCatalog catalog = tessera::model::GpuCatalog::builtin();
  tessera::ManualClock clock{0};
  std::unique_ptr<ControlPlane> plane;
  std::unique_ptr<HttpServer> http;
  std::unique_ptr<httplib::Client> client;
};

// The codes of the error table in docs/api.md (500 `internal` is a failure here).
const std::vector<std::string>& documentedCodes() {
  static const std::vector<std::string> kCodes = {
      "invalid_argument",       "bad_request",         "unauthenticated", "not_found",
      "already_exists",         "failed_precondition", "does_not_fit",    "payload_too_large",
      "unsupported_media_type", "method_not_allowed"};
  return kCodes;
}

void send(Server& s, const json& request, std::size_t index) {
  const auto req = tessera::fuzz::readFuzzRequest(request);
  if (!req) return;
  const std::string& path = req->path;
  const std::string& method = req->method;
  httplib::Headers headers;
  if (req->auth) headers.emplace("Authorization", std::string("Bearer ") + kToken);
  const std::string what = req->describe(index);
  const std::string before = s.listings();
  const std::uint64_t generation = s.generation();
  const httplib::Result r = tessera::fuzz::sendFuzzRequest(*s.client, *req, headers, index);
  const int status = r->status;
  TESSERA_FUZZ_CHECK(status < 500, what + ": answered " + std::to_string(status) + " " + r->body);
  const bool api = path.starts_with("/api/");
  if (status >= 400 && api) {
    TESSERA_FUZZ_CHECK(tessera::fuzz::isErrorObject(r->body, documentedCodes()),
                       what + ": a " + std::to_string(status) +
                           " that is not a documented error object: " + r->body);
  }
  const bool rollsBack =
      (method == "POST" && path == "/api/v1/replicas") || path.starts_with("/scheduler/");
  if (status >= 400 || method == "GET") {
    TESSERA_FUZZ_CHECK(s.listings() == before,
                       what + ": answered " + std::to_string(status) + " but changed the listings");
    if (!rollsBack) {
      TESSERA_FUZZ_CHECK(s.generation() == generation,
                         what + ": answered " + std::to_string(status) + " but changed the books");
    }
  }
  s.checkInvariants(what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = tessera::fuzz::decodeBody(data, size);
  if (!input || !input->is_object()) return 0;
  Server s;
  if (const auto list = input->find("requests"); list != input->end() && list->is_array()) {
    for (std::size_t i = 0; i < list->size() && i < kMaxRequests; ++i) send(s, (*list)[i], i);
  } else {
    send(s, *input, 0);
  }
  return 0;
}
