#pragma once
// Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity) as they appear in a
// pod's `resources`: "500m", "2", "1.5", "4Gi", "512Mi", "1G", "1e3", "100k".
//
// Suffixes: binary Ki Mi Gi Ti Pi Ei (powers of 1024), decimal m (1e-3), k M G T P E (powers
// of 1000), or a decimal exponent e/E followed by an integer. No sign other than an optional
// leading '+'; negative quantities are refused (a pod cannot request less than nothing).

#include <cstdint>
#include <string_view>

#include "common/result.h"

namespace tessera::k8s {

// The quantity's value in base units (e.g. cores, bytes, a count).
Result<double> parseQuantity(std::string_view text);

// CPU in thousandths of a core, rounded up ("250m" → 250, "1.5" → 1500).
Result<std::int64_t> cpuMilli(std::string_view text);
// Bytes as MiB, rounded up ("4Gi" → 4096, "1G" → 954).
Result<std::int64_t> bytesToMib(std::string_view text);
// A whole number (extended resources are integral): "3" → 3; "1.5" and "500m" are errors.
Result<std::int64_t> wholeNumber(std::string_view text);

}  // namespace tessera::k8s
