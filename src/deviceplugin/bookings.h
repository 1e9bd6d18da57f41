#pragma once
// The node's pending bookings: pods the control plane booked on this node (through the
// extender's bind) whose container has not been given its GPUs yet, and the confirmation the
// plugin sends once it has. docs/device-plugin.md explains the hand-off.
//
// Wire format (docs/api.md):
//   GET  /api/v1/nodes/{node}/allocations
//        -> {"node": "...", "allocations": [{"replica", "resource", "mode", "placedAtMs",
//            "confirmed", "devices", "gpus": [{"id", "reservedMib", "computeMilli",
//            "migProfile", "migStart"}]}]}
//   POST /api/v1/nodes/{node}/allocations  {"replica", "devices", "gpus"}

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"

namespace tessera::deviceplugin {

struct BookedGpu {
  std::string gpuId;           // the node's GPU id
  std::int64_t memoryMib = 0;  // reserved on this GPU (the whole card when exclusive)
  std::int32_t computeMilli = 0;
  std::string migProfile;  // MIG only
  int migStart = -1;       // MIG only
};

struct Booking {
  std::string replica;   // "<namespace>/<name>" for a pod
  std::string resource;  // the extended resource the pod asked for, e.g. "tessera.io/gpus"
  std::string mode;      // "exclusive", "shared" or "mig"
  std::int64_t placedAtMs = 0;
  bool confirmed = false;
  std::vector<BookedGpu> gpus;
};

struct Confirmation {
  std::string replica;
  std::vector<std::string> deviceIds;  // the slot IDs kubelet allocated
  std::vector<std::string> gpuIds;     // the GPUs the container was given
};

// Where bookings come from and confirmations go.
// Threading: implementations must allow calls from several threads.
class BookingSource {
 public:
  virtual ~BookingSource() = default;
  // Every booking on this node, confirmed or not.
  virtual Result<std::vector<Booking>> bookings() = 0;
  virtual Result<void> confirm(const Confirmation& confirmation) = 0;
};

// Reads the answer of GET /api/v1/nodes/{node}/allocations; errors name the field.
Result<std::vector<Booking>> parseBookings(const nlohmann::json& body);

struct ControlPlaneBookingsConfig {
  std::string url = "http://127.0.0.1:8080";  // the control plane's base URL
  std::string node;                           // this node's name as registered
  std::string token;                          // bearer token; empty: none
  int timeoutMs = 2000;
  std::string caFile;  // https://: trust this CA (PEM) instead of the system's; empty: system
};

// The control plane's HTTP API as a BookingSource.
std::unique_ptr<BookingSource> controlPlaneBookings(ControlPlaneBookingsConfig config);

}  // namespace tessera::deviceplugin
