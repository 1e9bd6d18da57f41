#pragma once
// `tessera serve --demo`: a built-in fleet of virtual GPUs, a few models with autoscaled
// deployments, and the node agents, inference engines and router that would report on them,
// simulated in-process from a synthetic, seeded traffic curve (a daily cycle compressed to
// minutes, plus noise). Everything goes through the control plane's own operations (the same
// ones the JSON API calls), so placement, autoscaling, drains and the dashboard are the real
// ones; only the hardware and the traffic are made up. docs/dashboard.md describes it.
//
// Threading: not thread-safe. The server calls step() under its plane mutex, right before
// ControlPlane::tick().

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>

#include "api/control_plane.h"
#include "common/clock.h"
#include "common/result.h"

namespace tessera::demo {

struct DemoOptions {
  std::uint64_t seed = 20231;
  // One "day" of traffic, on the plane's clock. The demo starts at night, so the first
  // minute brings the morning rise and with it the first scale-ups.
  Millis dayMs = 120'000;
  // Noise on every deployment's request rate: ± this fraction, redrawn every second.
  double noise = 0.1;
};

// A clock running `speed` times as fast as the steady clock, from the moment it is made
// (`--demo-speed`). Safe from any thread.
class FastClock final : public Clock {
 public:
  explicit FastClock(double speed);
  Millis nowMs() const override;

 private:
  double speed_;
  Millis startMs_;
};

// The demo's nodes, in the order they are registered.
std::span<const std::string_view> nodeNames();
// How many GPUs the demo's fleet has.
int gpuCount();

// Registers the fleet, the model profiles and the deployments in `plane`, which must hold no
// nodes yet. Errors name what was refused.
Result<void> seedFleet(api::ControlPlane& plane);

// What one step did.
struct StepReport {
  int loaded = 0;      // replicas whose weights finished loading
  int signals = 0;     // engine and router signal reports
  int heartbeats = 0;  // node heartbeats
  int refused = 0;     // reports the plane refused (a bug: the demo only reports what it knows)
};

// The virtual agents, engines and router.
class Simulation {
 public:
  explicit Simulation(DemoOptions options = {});

  // Reports what would have happened up to `nowMs` (the plane's clock): replicas whose
  // weights loaded, each replica's engine signals and each deployment's router signals under
  // the synthetic traffic, and every node's GPU telemetry. Call it before plane.tick().
  StepReport step(api::ControlPlane& plane, Millis nowMs);

  // The request rate the traffic curve gives `deployment` at `nowMs` (0 for a deployment the
  // demo did not create).
  double arrivalRatePerSec(std::string_view deployment, Millis nowMs) const;

 private:
  DemoOptions options_;
  Millis startMs_ = -1;
  std::map<std::string, std::set<std::string>, std::less<>> cached_;  // node → models
};

}  // namespace tessera::demo
