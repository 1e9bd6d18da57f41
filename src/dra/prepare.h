#pragma once
// What NodePrepareResources does for one claim, apart from gRPC (docs/dra.md): read the
// claim's allocation, resolve its devices on this node's inventory, and describe what its
// containers get as a Container Device Interface (CDI) spec. Pure functions over values,
// plus the spec file's writing and removal.
//
// The claim's results from this driver are grouped by request. Each request becomes one CDI
// device "<claim uid>-<request>" holding everything its containers get: the device nodes, the
// same environment the device plugin sets for a booking (deviceplugin::containerSpec:
// NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES, and for a share the memory limit, the
// compute share and, on MPS cards, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) and the MPS pipe mount. The first device of a request
// carries the request's CDI id; the others none, so that a runtime never applies the same
// edits twice. Sharing mode, as a booking's: MIG devices -> "mig"; a consumed memory below
// the card's -> "shared"; else "exclusive" (a claim that consumed nothing holds the card).
//
// Spec files: <cdiDir>/gpu.tessera.io-claim_<uid>.json, written to a temporary file and
// renamed (a runtime never reads half a spec), removed on unprepare; both idempotent.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "deviceplugin/allocation.h"
#include "deviceplugin/inventory.h"

namespace tessera::dra {

// A claim as kubelet names it.
struct ClaimRef {
  std::string ns, uid, name;
  std::string key() const { return ns + "/" + name; }
};

struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool, device;
  std::vector<std::string> cdiIds;
  std::optional<std::string> shareId;
};

struct PreparedClaim {
  std::vector<PreparedDevice> devices;
  nlohmann::json cdiSpec;
};

struct PrepareOptions {
  std::string driver;
  std::string nodeName;  // the pool this node publishes
  deviceplugin::EnvOptions env;
};

// The CDI kind of the driver's claim devices ("gpu.tessera.io/claim").
std::string cdiKind(std::string_view driver);
std::string cdiSpecPath(std::string_view cdiDir, std::string_view driver, std::string_view uid);

// `claim`: the ResourceClaim object as the API server answered it. Errors (per claim, kubelet
// retries): a claim whose UID is not `ref.uid` (deleted and re-created), not allocated, with
// no result of this driver, allocated on another node's pool, naming a device this node does
// not publish or one that is unhealthy, or mixing MIG and whole-GPU devices in one request.
Result<PreparedClaim> prepareClaim(const nlohmann::json& claim, const ClaimRef& ref,
                                   const deviceplugin::Inventory& inventory,
                                   const PrepareOptions& options);

// Writes `spec` to `path` atomically (temporary file in the same directory, then rename),
// creating the directory. Errors name the path and the system's reason.
Result<void> writeCdiSpec(const std::string& path, const nlohmann::json& spec);
// Removes the spec; a missing file is success.
Result<void> removeCdiSpec(const std::string& path);

}  // namespace tessera::dra
