#pragma once
// Shared pieces of the fuzz targets (fuzz/*_fuzz.cc): the server's own body decoder, the check
// that aborts with a message (fuzz_check.h; the driver or libFuzzer then saves the input), and the small
// cluster the extender and control-plane targets work on.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "fuzz_check.h"
#include "k8s/extender.h"
#include "model/gpu_catalog.h"
#include "sched/cluster_state.h"
#include "sched/engine.h"

namespace tessera::fuzz {

// The bytes as the HTTP server decodes a request body (api::parseJsonBody: no exceptions,
// nesting bounded); nullopt when the server would answer 400 before any handler runs.
std::optional<nlohmann::json> decodeBody(const std::uint8_t* data, std::size_t size);

// Every string the server would send back must serialise (nlohmann throws on invalid UTF-8).
void checkSerialises(const nlohmann::json& answer, std::string_view what);

// The extender's test cluster (src/k8s/extender_test.cc, plus MIG and NVLink nodes): nodes
// gpu-a (2 × A100-80GB), gpu-b (an A100 mostly held by a priority -5 replica), gpu-t4, gpu-c
// (tainted for training), gpu-d (an A100 with a small replica), gpu-h (4 × H100 NVLink),
// gpu-mig (an A100-40GB in MIG mode); the model "llama-7b" is known; the binder fails for
// pods whose name contains "fail-bind".
struct SmallCluster {
  SmallCluster();
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock{0};
  sched::ClusterState state{catalog, clock};
  std::unique_ptr<sched::PlacementEngine> engine;
  std::unique_ptr<k8s::Extender> extender;
  static std::optional<model::ModelProfile> lookup(std::string_view name);
};

// A path (or, with alsoPlain "=&,", a query) an HTTP client can put on a request line: bytes
// outside the unreserved set, '%' and `alsoPlain` are percent-encoded, so names with spaces,
// NULs or UTF-8 reach the server's handlers decoded.
std::string encodeUrlPath(std::string_view raw, std::string_view alsoPlain = "/");

// Whether an answer's body is {"error": {"code": "<string>", ...}}; with `codes` non-empty,
// the code must be one of them.
bool isErrorObject(std::string_view body, const std::vector<std::string>& codes = {});

// A digest of everything the books hold that a refused operation must leave alone: every
// live GPU (charges, bookings, replicas) and every live replica with its placement.
std::string stateDigest(const sched::ClusterState& state);

}  // namespace tessera::fuzz
