#include "model/gpu_type.h"

#include "model/internal/names.h"

namespace tessera::model {

const MigProfile* GpuType::findMigProfile(const std::string& profileName) const {
  for (const MigProfile& profile : migProfiles) {
    if (internal::equalsIgnoreCase(profile.name, profileName)) return &profile;
  }
  return nullptr;
}

}  // namespace tessera::model
