#pragma once
// Publishes the node's pool of ResourceSlices (dra/slices.h) to the API server and keeps it
// equal to the inventory (docs/dra.md).
//
// publish(inventory) lists the driver's slices for this node (fieldSelector spec.nodeName and
// spec.driver), and when their devices differ from the inventory's, writes the new pool at a
// generation above every generation it found: each slice is created or replaced (PUT with the
// resourceVersion it read), and slices the pool no longer needs are deleted. A write that lost
// a race (409 Conflict, or 404 on a slice deleted meanwhile) starts again from a fresh list, a
// few times; other answers are errors naming the slice and the status. An unchanged inventory
// writes nothing. The slices it writes are owned by the node's Node object (read once), so
// deleting the Node deletes the pool; without a Node object they have no owner.
//
// Threading: one publish at a time (serialised inside); the client is borrowed.

#include <cstdint>
#include <mutex>
#include <string>

#include "common/result.h"
#include "deviceplugin/inventory.h"
#include "dra/slices.h"

namespace tessera::k8s {
class KubeClient;
}

namespace tessera::dra {

struct PublishResult {
  bool changed = false;         // slices were written
  std::int64_t generation = 0;  // the pool's generation as published
  int slices = 0;
  int devices = 0;
};

class SlicePublisher {
 public:
  // options.generation is ignored: the publisher keeps its own.
  SlicePublisher(k8s::KubeClient& client, SliceOptions options);
  Result<PublishResult> publish(const deviceplugin::Inventory& inventory);
  // Deletes the node's pool (the driver is being removed from the node).
  Result<void> withdraw();

 private:
  Result<PublishResult> publishOnce(const deviceplugin::Inventory& inventory, bool& conflict);
  std::string collectionPath() const;

  k8s::KubeClient& client_;
  SliceOptions options_;
  std::string nodeUid_;  // the Node's, once read: the slices' owner
  std::mutex mu_;
};

}  // namespace tessera::dra
