#pragma once
// Several documents written as one change, above the per-object port (store/state_store.h):
// the control plane's operations that change more than one document (a drain's cordon and its
// replicas, a deployment and its replicas, a forced node removal) build a WriteSet and hand it
// to writeAll().
//
// writeAll() gives the caller one answer for the whole set:
//  - an adapter with atomicWrites() (SQLite) gets the set as one transaction: all or nothing;
//  - any other (the Kubernetes API server, which has no transaction across objects) gets the
//    writes one object at a time, in the order they were added. When one fails, the ones
//    before it are undone in reverse order: each object is put back as it was before the set
//    (its content read just before it was written), with a precondition on the version the
//    set's own write gave it, so that an undo never overwrites another writer's later change.
//    The error is the failed write's (its code: a conflict stays kFailedPrecondition), and it
//    names every write that could not be undone (the store then holds part of the change,
//    until the next load or write of those objects).
// A set that names a (kind, name) twice, or whose kinds, names or JSON are malformed, is
// refused with kInvalidArgument before anything is written.
//
// Threading: a WriteSet is a value; writeAll() calls the port only (adapters serialise their
// own calls), and another writer may interleave between the writes of the per-object path.

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.h"
#include "store/state_store.h"

namespace tessera::store {

class WriteSet {
 public:
  struct Write {
    enum class Op { kPut, kRemove };
    Op op = Op::kPut;
    std::string kind;
    std::string name;
    std::string json;  // kPut only
    Precondition pre;

    bool operator==(const Write&) const = default;
  };

  WriteSet& put(std::string kind, std::string name, std::string json, Precondition pre = {});
  WriteSet& remove(std::string kind, std::string name, Precondition pre = {});

  bool empty() const { return writes_.empty(); }
  std::size_t size() const { return writes_.size(); }
  const std::vector<Write>& writes() const { return writes_; }

 private:
  std::vector<Write> writes_;
};

// Writes `writes` through `store` (see above). An empty set writes nothing and succeeds.
Result<void> writeAll(StateStore& store, const WriteSet& writes);

// Whether an error of writeAll() says that writes before the failed one could not be undone:
// the store holds part of the change (the message names those writes).
bool leftPartlyWritten(const Error& e);

}  // namespace tessera::store
