#include "agent/devpool_work.h"

namespace tessera::agent {

std::size_t RegistryWork::inFlight() const {
  std::size_t n = 0;
  for (const devpool::ModelStatus& m : registry_.list()) {
    if (m.serving) n += static_cast<std::size_t>(std::max<std::int64_t>(m.serving->leases, 0));
    if (m.loading) ++n;
    for (const devpool::VersionStatus& v : m.retiring) {
      n += static_cast<std::size_t>(std::max<std::int64_t>(v.leases, 0));
    }
  }
  return n;
}

Result<void> RegistryDeviceMemory::releaseAll() {
  std::string problems;
  for (const devpool::ModelStatus& m : registry_.list()) {
    if (m.loading) (void)registry_.cancelLoading(m.name);
    if (!m.serving) continue;
    devpool::SwitchOptions options;
    options.drainTimeoutMs = drainTimeoutMs_;
    auto unloaded = registry_.unload(m.name, options);
    if (!unloaded) {
      problems += (problems.empty() ? "" : "; ") + m.name + ": " + unloaded.error().message;
    } else if (unloaded->drainTimedOut) {
      problems += (problems.empty() ? "" : "; ") + m.name + ": " +
                  std::to_string(unloaded->leasesLeft) +
                  " lease(s) still held; its blocks go when the last one ends";
    }
  }
  if (!problems.empty())
    return fail(Error::precondition("device memory not all released: " + problems));
  return {};
}

}  // namespace tessera::agent
