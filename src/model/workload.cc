#include "model/workload.h"

namespace tessera::model {

const char* sharingModeName(SharingMode mode) {
  switch (mode) {
    case SharingMode::kExclusive:
      return "exclusive";
    case SharingMode::kShared:
      return "shared";
    case SharingMode::kMig:
      return "mig";
  }
  // Only reachable through a cast of an out-of-range integer.
  return "unknown";
}

}  // namespace tessera::model
