// Fuzz target: the control plane's request bodies (POST /api/v1/nodes, /nodes/{name}/
// heartbeat, /models, /replicas, /explain). The input is decoded as the HTTP server decodes a
// body, and the same document is handed to each operation in turn on a fresh control plane
// (nodes n1: 2 × A100-80GB, n2: T4, n3: 4 × H100 NVLink; models llama-7b and llama-70b; one
// replica placed): registerNode, heartbeat (for the node the body names, else n1), putModel,
// placeReplicas, explain, each through the codec (api/json_api.h) as a route calls it: these
// bodies go through nlohmann, then the YAML loaders of config/, then the typed operation.
//
// Checks beyond "no crash, no sanitizer report, no exception":
//  - a refused operation changes nothing: the node, model and replica listings are unchanged,
//    and (but for placeReplicas, whose all-or-nothing rollback books and releases) so is
//    the state generation;
//  - explain books nothing, also when it answers;
//  - after every accepted operation ClusterState::checkInvariants() holds;
//  - every answer and error message serialises.

#include <cstdint>
#include <memory>
#include <string>

#include "api/control_plane.h"
#include "api/json_api.h"
#include "fuzz_support.h"

namespace {

using nlohmann::json;
using tessera::api::ControlPlane;

struct Plane {
  Plane() {
    auto p = ControlPlane::create(catalog, clock);
    if (!p) tessera::fuzz::checkFailed("create", p.error().message, __FILE__, __LINE__);
    plane = std::move(*p);
    auto must = [](const tessera::Result<json>& r, const char* what) {
      if (!r) tessera::fuzz::checkFailed(what, r.error().message, __FILE__, __LINE__);
    };
    must(tessera::api::json_api::registerNode(*plane,
                                              json::parse(
                                                  R"({"name":"n1","cpu":64,"hostMemory":"512Gi",
                 "gpus":[{"type":"A100-80GB"},{"type":"A100-80GB"}]})")),
         "n1");
    must(tessera::api::json_api::registerNode(
             *plane, json::parse(
                         R"({"name":"n2","cpu":16,"hostMemory":"64Gi","gpus":[{"type":"T4"}],
                 "labels":{"pool":"edge"}})")),
         "n2");
    must(tessera::api::json_api::registerNode(*plane,
                                              json::parse(
                                                  R"({"name":"n3","cpu":96,"hostMemory":"1Ti",
                 "gpus":{"type":"H100-80GB","count":4,"nvlinkGroups":1}})")),
         "n3");
    must(tessera::api::json_api::putModel(
             *plane, json::parse(R"({"name":"llama-7b","weights":"13Gi","kvCache":"4Gi"})")),
         "llama-7b");
    must(tessera::api::json_api::putModel(
             *plane, json::parse(R"({"name":"llama-70b","weights":"131Gi","gpusPerReplica":4})")),
         "llama-70b");
    auto placed = tessera::api::json_api::placeReplicas(
        *plane, json::parse(R"({"replicaId":"chat-0","model":"llama-7b"})"));
    if (!placed) {
      tessera::fuzz::checkFailed("place chat-0", placed.error().error.message, __FILE__, __LINE__);
    }
  }
  std::string listings() const {
    return plane->listNodes().dump() + plane->listModels().dump() + plane->listReplicas().dump();
  }
  tessera::model::GpuCatalog catalog = tessera::model::GpuCatalog::builtin();
  tessera::ManualClock clock{0};
  std::unique_ptr<ControlPlane> plane;
};

void checkAccepted(const Plane& p, const json& answer, const char* op) {
  tessera::fuzz::checkSerialises(answer, op);
  auto ok = p.plane->state().checkInvariants();
  TESSERA_FUZZ_CHECK(ok.has_value(), std::string(op) + ": " + (ok ? "" : ok.error().message));
}

void checkRefused(const Plane& p, const std::string& before, std::uint64_t generation,
                  bool sameGeneration, const std::string& error, const char* op) {
  tessera::fuzz::checkSerialises(json(error), op);
  TESSERA_FUZZ_CHECK(p.listings() == before,
                     std::string(op) + " was refused (" + error + ") but changed the listings");
  if (sameGeneration) {
    TESSERA_FUZZ_CHECK(p.plane->state().generation() == generation,
                       std::string(op) + " was refused (" + error + ") but changed the books");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto body = tessera::fuzz::decodeBody(data, size);
  if (!body) return 0;
  Plane p;
  ControlPlane& cp = *p.plane;

  auto step = [&](const char* op, auto call, bool sameGenerationOnError) {
    const std::string before = p.listings();
    const std::uint64_t generation = cp.state().generation();
    auto r = call();
    if (r) {
      checkAccepted(p, *r, op);
    } else {
      checkRefused(p, before, generation, sameGenerationOnError, r.error().message, op);
    }
  };
  step(
      "registerNode", [&] { return tessera::api::json_api::registerNode(cp, *body); }, true);
  std::string node = "n1";
  if (body->is_object()) {
    if (const auto it = body->find("name"); it != body->end() && it->is_string()) {
      node = it->get<std::string>();
    }
  }
  step(
      "heartbeat", [&] { return tessera::api::json_api::heartbeat(cp, node, *body); }, true);
  step(
      "putModel", [&] { return tessera::api::json_api::putModel(cp, *body); }, true);

  {
    const std::string before = p.listings();
    const std::uint64_t generation = cp.state().generation();
    auto r = tessera::api::json_api::placeReplicas(cp, *body);
    if (r) {
      checkAccepted(p, *r, "placeReplicas");
    } else {
      tessera::fuzz::checkSerialises(r.error().detail, "placeReplicas detail");
      checkRefused(p, before, generation, false, r.error().error.message, "placeReplicas");
    }
  }
  {
    const std::string before = p.listings();
    const std::uint64_t generation = cp.state().generation();
    auto r = tessera::api::json_api::explain(cp, *body);
    if (r) {
      tessera::fuzz::checkSerialises(*r, "explain");
      TESSERA_FUZZ_CHECK(p.listings() == before && cp.state().generation() == generation,
                         "explain changed the books");
    } else {
      checkRefused(p, before, generation, true, r.error().message, "explain");
    }
  }
  return 0;
}
