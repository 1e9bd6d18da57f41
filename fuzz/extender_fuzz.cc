// Fuzz target: the kube-scheduler extender's argument decoding and answers (filter,
// prioritize, preempt, bind), on the small cluster of fuzz_support.h. Every input is decoded
// as the HTTP server decodes a body and handed to all four verbs in turn, on a fresh cluster
// (so a saved input replays exactly).
//
// Checks beyond "no crash, no sanitizer report, no exception":
//  - filter, prioritize and preempt never change the books (state generation unchanged);
//  - a refused bind (an error, or an answer with a non-empty Error) changes nothing (the
//    state digest is unchanged: a booking rolled back leaves the books as they were);
//  - after an accepted bind the pod's replica is booked on the named node and
//    ClusterState::checkInvariants() holds;
//  - with NodeNames, filter answers a subset of them; prioritize scores every candidate once,
//    in order, from 0 to 10; every answer serialises.

#include <cstdint>
#include <set>
#include <string>

#include "fuzz_support.h"

namespace {

using nlohmann::json;
using tessera::fuzz::checkSerialises;
using tessera::fuzz::SmallCluster;
using tessera::fuzz::stateDigest;

std::string errorOf(const tessera::Result<json>& r) {
  return r ? std::string() : r.error().message;
}

void checkReadOnly(const SmallCluster& c, std::uint64_t generation, const char* verb) {
  TESSERA_FUZZ_CHECK(c.state.generation() == generation, std::string(verb) + " changed the books");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto args = tessera::fuzz::decodeBody(data, size);
  if (!args) return 0;
  SmallCluster c;
  const json* names = tessera::k8s::fieldIgnoringCase(*args, "NodeNames");

  std::uint64_t generation = c.state.generation();
  auto filtered = c.extender->filter(*args);
  checkReadOnly(c, generation, "filter");
  if (filtered) {
    checkSerialises(*filtered, "filter");
    const json& out = *filtered;
    TESSERA_FUZZ_CHECK(out.contains("FailedNodes") && out["FailedNodes"].is_object(), out.dump());
    if (names != nullptr && names->is_array()) {
      std::set<std::string> asked;
      for (const json& n : *names) asked.insert(n.get<std::string>());
      TESSERA_FUZZ_CHECK(out["NodeNames"].is_array(), out.dump());
      for (const json& n : out["NodeNames"]) {
        TESSERA_FUZZ_CHECK(asked.contains(n.get<std::string>()),
                           "filter answered a node it was not asked about: " + n.dump());
      }
    }
  } else {
    checkSerialises(json(errorOf(filtered)), "filter error");
  }

  auto prioritized = c.extender->prioritize(*args);
  checkReadOnly(c, generation, "prioritize");
  if (prioritized) {
    checkSerialises(*prioritized, "prioritize");
    TESSERA_FUZZ_CHECK(prioritized->is_array(), prioritized->dump());
    for (const json& hs : *prioritized) {
      const auto score = hs.at("Score").get<std::int64_t>();
      TESSERA_FUZZ_CHECK(score >= 0 && score <= 10, hs.dump());
    }
    if (names != nullptr && names->is_array()) {
      TESSERA_FUZZ_CHECK(prioritized->size() == names->size(), prioritized->dump());
      for (std::size_t i = 0; i < names->size(); ++i) {
        TESSERA_FUZZ_CHECK((*prioritized)[i].at("Host") == (*names)[i], prioritized->dump());
      }
    }
  } else {
    checkSerialises(json(errorOf(prioritized)), "prioritize error");
  }

  auto preempted = c.extender->preempt(*args);
  checkReadOnly(c, generation, "preempt");
  if (preempted) {
    checkSerialises(*preempted, "preempt");
  } else {
    checkSerialises(json(errorOf(preempted)), "preempt error");
  }

  const std::string before = stateDigest(c.state);
  auto bound = c.extender->bind(*args);
  const bool refused = !bound || !(*bound)["Error"].get<std::string>().empty();
  if (bound) checkSerialises(*bound, "bind");
  if (refused) {
    TESSERA_FUZZ_CHECK(
        stateDigest(c.state) == before,
        "a refused bind changed the books: " + (bound ? bound->dump() : errorOf(bound)));
  } else {
    const json* node = tessera::k8s::fieldIgnoringCase(*args, "Node");
    TESSERA_FUZZ_CHECK(node != nullptr && node->is_string(), "bind accepted without a node");
  }
  auto invariants = c.state.checkInvariants();
  TESSERA_FUZZ_CHECK(invariants.has_value(), invariants ? "" : invariants.error().message);
  return 0;
}
