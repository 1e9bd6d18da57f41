#pragma once
// The device pool's model registry (src/devpool) seen through the agent's drain interfaces:
// its leases and loads are in-flight work, and releasing device memory unloads every model
// it holds (each drained of its leases first, up to a timeout).
//
// Threading: as the registry: safe from any thread. The registry must outlive these.

#include <string>

#include "agent/work.h"
#include "devpool/registry.h"

namespace tessera::agent {

class RegistryWork final : public WorkTracker {
 public:
  explicit RegistryWork(devpool::ModelRegistry& registry) : registry_(registry) {}
  std::string name() const override { return "device pool registry"; }
  // Leases on every version (serving and retiring) plus one per load in progress.
  std::size_t inFlight() const override;

 private:
  devpool::ModelRegistry& registry_;
};

class RegistryDeviceMemory final : public DeviceMemory {
 public:
  RegistryDeviceMemory(devpool::ModelRegistry& registry, int drainTimeoutMs)
      : registry_(registry), drainTimeoutMs_(drainTimeoutMs) {}
  std::string name() const override { return "device pool registry"; }
  // Cancels loads in progress and unloads every serving model. A model whose leases outlive
  // the timeout keeps its blocks until the last lease ends (the registry's rule); that is
  // reported as an error naming it.
  Result<void> releaseAll() override;

 private:
  devpool::ModelRegistry& registry_;
  int drainTimeoutMs_;
};

}  // namespace tessera::agent
