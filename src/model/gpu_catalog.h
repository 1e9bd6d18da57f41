#pragma once
// The built-in catalogue of data-centre GPU types plus any custom types a cluster file
// declares. Lookups are case-insensitive over names and aliases.
//
// Threading: immutable after construction; safe to share across threads.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/gpu_type.h"

namespace tessera::model {

class GpuCatalog {
 public:
  // The catalogue with every built-in type (see docs/gpu-catalogue.md).
  static GpuCatalog builtin();

  // Adds a custom type; fails if the name or an alias is taken or a figure is invalid.
  Result<void> add(GpuType type);

  // nullptr when unknown.
  const GpuType* find(std::string_view nameOrAlias) const;
  // Index stable for the catalogue's lifetime; -1 when unknown.
  int indexOf(std::string_view nameOrAlias) const;
  const GpuType& at(int index) const { return *types_[static_cast<std::size_t>(index)]; }
  int size() const { return static_cast<int>(types_.size()); }
  std::vector<std::string> names() const;
  // Fails on the first name that is neither a type nor an alias here: "unknown GPU type
  // 'H100-80G' (did you mean 'H100-80GB'?)", else the list of known names. `what` names
  // the field for the message ("gpuTypes").
  Result<void> checkKnown(const std::vector<std::string>& namesOrAliases,
                          std::string_view what) const;

 private:
  std::vector<std::shared_ptr<const GpuType>> types_;
};

// Checks a type's figures and MIG geometry for consistency (used for custom types too).
Result<void> validateGpuType(const GpuType& type);

}  // namespace tessera::model
