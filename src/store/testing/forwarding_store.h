#pragma once
// A StateStore that passes every call on to another, for tests that stand between the control
// plane and a real store to hold, refuse or watch its commits: derive, override commit(), and
// call the base's (or inner()) to let a commit through.

#include <cstdint>
#include <memory>
#include <string>

#include "store/state_store.h"

namespace tessera::store::testing {

class ForwardingStore : public StateStore {
 public:
  // Borrows `inner`, which must outlive this store.
  explicit ForwardingStore(StateStore& inner) : inner_(&inner) {}
  // Owns `inner`.
  explicit ForwardingStore(std::unique_ptr<StateStore> inner)
      : owned_(std::move(inner)), inner_(owned_.get()) {}

  Result<CommitResult> commit(const Batch& batch) override { return inner_->commit(batch); }
  Result<Snapshot> loadAll() const override { return inner_->loadAll(); }
  Result<std::int64_t> compactEventsBefore(std::int64_t seq) override {
    return inner_->compactEventsBefore(seq);
  }
  std::string describe() const override { return inner_->describe(); }
  bool bookingsOnPods() const override { return inner_->bookingsOnPods(); }

 protected:
  StateStore& inner() const { return *inner_; }

 private:
  std::unique_ptr<StateStore> owned_;
  StateStore* inner_;
};

}  // namespace tessera::store::testing
