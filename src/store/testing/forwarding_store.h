#pragma once
// A StateStore that passes every call on to another, for tests that stand between the control
// plane and a real store to hold, refuse or watch its writes: derive, override the calls to
// watch (commitAtomically() for the control plane's writes to a SQLite store, which is
// atomic; put() and remove() for the one-object-at-a-time path), and call the base's (or
// inner()) to let a write through. `atomic` false hides the inner store's atomic path, so
// that store::writeAll writes one object at a time (as it does to the API server).

#include <cstdint>
#include <memory>
#include <string>

#include "store/state_store.h"

namespace tessera::store::testing {

class ForwardingStore : public StateStore {
 public:
  // Borrows `inner`, which must outlive this store.
  explicit ForwardingStore(StateStore& inner, bool atomic = true)
      : inner_(&inner), atomic_(atomic) {}
  // Owns `inner`.
  explicit ForwardingStore(std::unique_ptr<StateStore> inner, bool atomic = true)
      : owned_(std::move(inner)), inner_(owned_.get()), atomic_(atomic) {}

  Result<Version> put(std::string_view kind, std::string_view name, std::string_view json,
                      const Precondition& pre = {}) override {
    return inner_->put(kind, name, json, pre);
  }
  Result<void> remove(std::string_view kind, std::string_view name,
                      const Precondition& pre = {}) override {
    return inner_->remove(kind, name, pre);
  }
  Result<std::optional<Document>> get(std::string_view kind, std::string_view name) const override {
    return inner_->get(kind, name);
  }
  Result<std::vector<Document>> list(std::string_view kind) const override {
    return inner_->list(kind);
  }
  Result<Snapshot> loadAll() const override { return inner_->loadAll(); }
  std::string describe() const override { return inner_->describe(); }
  bool bookingsOnPods() const override { return inner_->bookingsOnPods(); }
  bool atomicWrites() const override { return atomic_ && inner_->atomicWrites(); }
  Result<void> commitAtomically(const WriteSet& writes) override {
    return inner_->commitAtomically(writes);
  }

 protected:
  StateStore& inner() const { return *inner_; }

 private:
  std::unique_ptr<StateStore> owned_;
  StateStore* inner_;
  bool atomic_;
};

}  // namespace tessera::store::testing
