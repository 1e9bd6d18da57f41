#pragma once
// What a drain waits for and what it releases, as interfaces so that the parts of a node
// that hold work plug into the agent without the agent knowing them: the agent's own lease
// table (requests and loads announced over the admin API), the device pool's model
// registry (its leases on loaded versions), an engine adapter's in-flight requests.
//
// Threading: implementations must be safe to call from any thread.

#include <cstddef>
#include <string>

#include "common/result.h"

namespace tessera::agent {

class WorkTracker {
 public:
  virtual ~WorkTracker() = default;
  // For messages: "leases", "devpool registry", ...
  virtual std::string name() const = 0;
  // Work items still running (requests, loads). A drain waits until every tracker says 0.
  virtual std::size_t inFlight() const = 0;
};

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual std::string name() const = 0;
  // Frees every device allocation the node holds (called once, at the end of a drain).
  virtual Result<void> releaseAll() = 0;
};

}  // namespace tessera::agent
