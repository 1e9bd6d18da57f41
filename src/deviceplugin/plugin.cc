#include "deviceplugin/plugin.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <tuple>

#include <grpcpp/grpcpp.h>

#include "common/file_identity.h"
#include "deviceplugin/pod_resources.h"
#include "deviceplugin/proto/api.grpc.pb.h"

namespace tessera::deviceplugin {
namespace {

// Identity of a file: inode and change time, so a socket removed and created again (which
// may reuse the inode number) still reads as new. Empty when the file is missing.
std::string sortedKey(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  std::string key;
  for (const std::string& id : ids) key += id + "\n";
  return key;
}

grpc::Status toStatus(const Error& e) {
  switch (e.code) {
    case ErrorCode::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, e.message};
    case ErrorCode::kNotFound:
      return {grpc::StatusCode::NOT_FOUND, e.message};
    case ErrorCode::kFailedPrecondition:
    case ErrorCode::kAlreadyExists:
      return {grpc::StatusCode::FAILED_PRECONDITION, e.message};
    case ErrorCode::kResourceExhausted:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, e.message};
    case ErrorCode::kInternal:
      return {grpc::StatusCode::UNAVAILABLE, e.message};
  }
  return {grpc::StatusCode::INTERNAL, e.message};
}

}  // namespace

// ---- the gRPC service ------------------------------------------------------------------------

class DevicePlugin::Service final : public v1beta1::DevicePlugin::Service {
 public:
  explicit Service(DevicePlugin& plugin) : plugin_(plugin) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_pre_start_required(false);
    out->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    std::unique_lock lock(plugin_.mu_);
    const std::uint64_t epoch = plugin_.serverEpoch_;
    std::uint64_t sent = 0;
    while (!plugin_.stopping_ && plugin_.serverEpoch_ == epoch && !ctx->IsCancelled()) {
      if (sent != plugin_.generation_) {
        sent = plugin_.generation_;
        const v1beta1::ListAndWatchResponse list = deviceList();
        lock.unlock();
        if (!writer->Write(list)) return grpc::Status::OK;  // kubelet went away
        lock.lock();
        continue;
      }
      // Woken by a change or a stop; the timeout notices a cancelled stream.
      plugin_.changed_.wait_for(lock, std::chrono::milliseconds(200));
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override {
    std::lock_guard alloc(plugin_.allocMu_);
    auto pending = plugin_.pendingBookings();
    const Inventory inv = plugin_.inventory();
    std::set<std::string> claimed;  // bookings answered for earlier containers of this call
    for (const auto& c : req->container_requests()) {
      const std::vector<std::string> available(c.available_deviceids().begin(),
                                               c.available_deviceids().end());
      const std::vector<std::string> must(c.must_include_deviceids().begin(),
                                          c.must_include_deviceids().end());
      const int size = c.allocation_size();
      const Booking* booking = nullptr;
      if (pending) {
        for (const Booking& b : *pending) {
          if (static_cast<int>(b.gpus.size()) == size && !claimed.contains(b.replica)) {
            booking = &b;
            break;
          }
        }
      }
      std::vector<std::string> ids;
      if (booking != nullptr) {
        std::vector<std::string> gpus;
        for (const BookedGpu& g : booking->gpus) gpus.push_back(g.gpuId);
        ids = preferSlots(inv, plugin_.config_.slotsPerGpu, available, must, size, &gpus);
        claimed.insert(booking->replica);
        // Forget an older answer for the same booking (kubelet may not have used it).
        std::erase_if(plugin_.remembered_,
                      [&](const auto& kv) { return kv.second == booking->replica; });
        plugin_.remembered_[sortedKey(ids)] = booking->replica;
      } else {
        ids = preferSlots(inv, plugin_.config_.slotsPerGpu, available, must, size);
      }
      auto* resp = out->add_container_responses();
      for (const std::string& id : ids) resp->add_deviceids(id);
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override {
    std::lock_guard alloc(plugin_.allocMu_);
    auto pending = plugin_.pendingBookings();
    if (!pending) {
      plugin_.say("allocate refused: " + pending.error().message);
      return toStatus(
          Error::internal("tessera device plugin: cannot read this node's bookings "
                          "from the control plane: " +
                          pending.error().message));
    }
    const Inventory inv = plugin_.inventory();
    std::set<std::string> taken;
    std::vector<Confirmation> confirmations;
    for (const auto& c : req->container_requests()) {
      const std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
      const Booking* booking = nullptr;
      const auto remembered = plugin_.remembered_.find(sortedKey(ids));
      if (remembered != plugin_.remembered_.end()) {
        for (const Booking& b : *pending) {
          if (b.replica == remembered->second && !taken.contains(b.replica)) booking = &b;
        }
      }
      if (booking == nullptr) {
        for (const Booking& b : *pending) {
          if (b.gpus.size() == ids.size() && !taken.contains(b.replica)) {
            booking = &b;
            break;
          }
        }
      }
      if (booking == nullptr) {
        const std::string msg =
            "tessera device plugin: no pending Tessera booking on node " +
            plugin_.config_.nodeName + " for a container asking " + std::to_string(ids.size()) +
            " " + plugin_.config_.resourceName +
            " (pods asking this resource must be scheduled through the Tessera extender, "
            "whose bind books their GPUs)";
        plugin_.say(msg);
        return {grpc::StatusCode::FAILED_PRECONDITION, msg};
      }
      auto spec = containerSpec(inv, *booking, plugin_.config_.env);
      if (!spec) {
        plugin_.say("allocate refused: " + spec.error().message);
        return toStatus(spec.error());
      }
      taken.insert(booking->replica);
      auto* resp = out->add_container_responses();
      for (const auto& [k, v] : spec->envs) (*resp->mutable_envs())[k] = v;
      for (const ContainerMount& m : spec->mounts) {
        auto* mount = resp->add_mounts();
        mount->set_container_path(m.containerPath);
        mount->set_host_path(m.hostPath);
        mount->set_read_only(m.readOnly);
      }
      for (const ContainerDevice& d : spec->devices) {
        auto* dev = resp->add_devices();
        dev->set_container_path(d.containerPath);
        dev->set_host_path(d.hostPath);
        dev->set_permissions(d.permissions);
      }
      Confirmation conf;
      conf.replica = booking->replica;
      conf.deviceIds = ids;
      for (const BookedGpu& g : booking->gpus) conf.gpuIds.push_back(g.gpuId);
      confirmations.push_back(std::move(conf));
    }
    // Every container got its answer: now the bookings are handed out. A confirmation the
    // control plane cannot take now is retried; until then the booking is not offered again.
    for (Confirmation& conf : confirmations) {
      std::erase_if(plugin_.remembered_, [&](const auto& kv) { return kv.second == conf.replica; });
      if (!plugin_.config_.podResourcesSocket.empty()) {
        plugin_.handedOut_[sortedKey(conf.deviceIds)] = {conf.replica, conf.gpuIds,
                                                         std::chrono::steady_clock::now(), ""};
      }
      plugin_.say("allocated " + conf.replica + " on GPUs " + [&] {
        std::string g;
        for (const std::string& id : conf.gpuIds) g += (g.empty() ? "" : ",") + id;
        return g;
      }());
      if (auto done = plugin_.bookings_.confirm(conf); !done) {
        if (done.error().code != ErrorCode::kNotFound &&
            done.error().code != ErrorCode::kFailedPrecondition) {
          plugin_.say("confirmation of " + conf.replica + " deferred: " + done.error().message);
          plugin_.unconfirmed_.push_back(std::move(conf));
        } else {
          plugin_.say("confirmation of " + conf.replica + " refused: " + done.error().message);
        }
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  // Under plugin_.mu_.
  v1beta1::ListAndWatchResponse deviceList() const {
    v1beta1::ListAndWatchResponse out;
    for (const GpuDevice& g : plugin_.inventory_.gpus) {
      for (int s = 0; s < plugin_.config_.slotsPerGpu; ++s) {
        auto* d = out.add_devices();
        d->set_id(slotId(g.id, s));
        d->set_health(std::string(g.healthy ? kHealthy : kUnhealthy));
        if (g.numaNode >= 0) d->mutable_topology()->add_nodes()->set_id(g.numaNode);
      }
    }
    return out;
  }

  DevicePlugin& plugin_;
};

// ---- the plugin ------------------------------------------------------------------------------

DevicePlugin::DevicePlugin(PluginConfig config, BookingSource& bookings, Inventory inventory)
    : config_(std::move(config)), bookings_(bookings), inventory_(std::move(inventory)) {
  config_.slotsPerGpu = std::max(1, config_.slotsPerGpu);
}

DevicePlugin::~DevicePlugin() {
  stop();
}

void DevicePlugin::say(const std::string& message) const {
  if (config_.log) config_.log(message);
}

std::string DevicePlugin::endpoint() const {
  std::string name = config_.resourceName;
  std::replace(name.begin(), name.end(), '/', '_');
  return "tessera-" + name + ".sock";
}

std::string DevicePlugin::socketPath() const {
  return config_.directory + "/" + endpoint();
}

Result<void> DevicePlugin::start() {
  {
    std::lock_guard lock(mu_);
    if (watcher_.joinable()) return fail(Error::precondition("device plugin already started"));
    stopping_ = false;
  }
  TESSERA_RETURN_IF_ERROR(serve());
  if (auto reg = registerWithKubelet(); !reg) say(reg.error().message + "; will retry");
  watcher_ = std::thread([this] { watch(); });
  return {};
}

void DevicePlugin::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  shutdownServer();
}

Result<void> DevicePlugin::serve() {
  const std::string path = socketPath();
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return fail(
        Error::internal("cannot remove stale socket " + path + ": " + std::strerror(errno)));
  }
  auto service = std::make_unique<Service>(*this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return fail(Error::internal("cannot serve the device plugin on " + path));
  std::lock_guard lock(mu_);
  service_ = std::move(service);
  server_ = std::move(server);
  servedId_ = fileIdentity(path);
  say("serving " + config_.resourceName + " on " + path);
  return {};
}

void DevicePlugin::shutdownServer() {
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<Service> service;
  {
    std::lock_guard lock(mu_);
    ++serverEpoch_;  // open ListAndWatch streams return
    server = std::move(server_);
    service = std::move(service_);
  }
  changed_.notify_all();
  if (server) {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server->Wait();
  }
}

Result<void> DevicePlugin::registerWithKubelet() {
  const std::string kubelet = config_.directory + "/" + std::string(kKubeletSocket);
  const std::string id = fileIdentity(kubelet);
  if (id.empty()) return fail(Error::notFound("kubelet socket " + kubelet + " not there yet"));
  auto channel = grpc::CreateChannel("unix://" + kubelet, grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version(std::string(kApiVersion));
  req.set_endpoint(endpoint());
  req.set_resource_name(config_.resourceName);
  req.mutable_options()->set_pre_start_required(false);
  req.mutable_options()->set_get_preferred_allocation_available(true);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + config_.registerTimeout);
  v1beta1::Empty empty;
  const grpc::Status status = stub->Register(&ctx, req, &empty);
  if (!status.ok()) {
    return fail(Error::internal("registration with kubelet at " + kubelet +
                                " failed: " + status.error_message()));
  }
  {
    std::lock_guard lock(mu_);
    kubeletId_ = id;
  }
  registrations_.fetch_add(1);
  say("registered " + config_.resourceName + " with kubelet");
  return {};
}

void DevicePlugin::watch() {
  const std::string kubelet = config_.directory + "/" + std::string(kKubeletSocket);
  bool podResourcesFailing = false;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, config_.watchInterval);
    if (stopping_) break;
    const bool socketGone = fileIdentity(socketPath()) != servedId_;
    const std::string kubeletNow = fileIdentity(kubelet);
    const bool kubeletNew = !kubeletNow.empty() && kubeletNow != kubeletId_;
    lock.unlock();
    if (socketGone) {
      // kubelet removes every plugin socket when it starts: serve a fresh one.
      say("plugin socket " + socketPath() + " is gone (kubelet restarted?): serving again");
      shutdownServer();
      if (auto served = serve(); !served) say(served.error().message);
    }
    if (socketGone || kubeletNew) {
      if (auto reg = registerWithKubelet(); !reg) say(reg.error().message + "; will retry");
    }
    {
      std::lock_guard alloc(allocMu_);
      retryConfirmations();
    }
    if (!config_.podResourcesSocket.empty()) {
      // Said when it starts failing and when it recovers, not every watch.
      auto checked = checkPodResources();
      if (!checked && !podResourcesFailing) {
        say(checked.error().message + "; twins that swapped GPUs are not corrected until it answers");
      } else if (checked && podResourcesFailing) {
        say("kubelet's PodResources answers again on " + config_.podResourcesSocket);
      }
      podResourcesFailing = !checked;
    }
    lock.lock();
  }
}

void DevicePlugin::setInventory(Inventory inventory) {
  {
    std::lock_guard lock(mu_);
    inventory_ = std::move(inventory);
    ++generation_;
  }
  changed_.notify_all();
}

Result<void> DevicePlugin::setGpuHealth(std::string_view gpuId, bool healthy) {
  {
    std::lock_guard lock(mu_);
    auto it = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                           [&](const GpuDevice& g) { return g.id == gpuId; });
    if (it == inventory_.gpus.end()) {
      return fail(Error::notFound("GPU " + std::string(gpuId) + " is not in the inventory"));
    }
    if (it->healthy == healthy) return {};
    it->healthy = healthy;
    ++generation_;
  }
  changed_.notify_all();
  return {};
}

Inventory DevicePlugin::inventory() const {
  std::lock_guard lock(mu_);
  return inventory_;
}

Result<void> DevicePlugin::checkPodResources() {
  // Read without the allocation lock: kubelet may call Allocate meanwhile.
  auto listed = listPodDevices(config_.podResourcesSocket);
  if (!listed) return fail(listed.error());
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard alloc(allocMu_);
  std::set<std::string> seen;
  for (const ContainerDeviceIds& c : *listed) {
    if (c.resource != config_.resourceName) continue;
    const std::string key = sortedKey(c.deviceIds);
    const auto handed = handedOut_.find(key);
    if (handed == handedOut_.end()) continue;
    seen.insert(key);
    if (handed->second.replica == c.pod) continue;
    // Twins swapped: the devices handed out as `was`'s booking run pod `c.pod`. Confirming
    // c.pod with those GPUs makes the control plane swap the two bookings' GPUs.
    const std::string was = handed->second.replica;
    if (handed->second.refusedFor == c.pod) continue;  // said once; the books stay as they are
    Confirmation conf{c.pod, c.deviceIds, handed->second.gpuIds};
    if (auto done = bookings_.confirm(conf); !done) {
      say("PodResources shows pod " + c.pod + " holding the devices handed out for " + was +
          ", but the control plane refused the correction: " + done.error().message);
      if (done.error().code != ErrorCode::kInternal) handed->second.refusedFor = c.pod;
      continue;
    }
    for (auto& [otherKey, other] : handedOut_) {
      if (otherKey != key && other.replica == c.pod) other.replica = was;
    }
    handed->second.replica = c.pod;
    ++corrections_;
    say("PodResources shows pod " + c.pod + " holding the devices handed out for " + was +
        ": the books now give each twin the GPUs it runs on");
  }
  // Devices no pod holds any more (the pod ended) are forgotten once kubelet had time to
  // list them.
  std::erase_if(handedOut_, [&](const auto& kv) {
    return !seen.contains(kv.first) && now - kv.second.at > std::chrono::minutes(1);
  });
  return {};
}

void DevicePlugin::retryConfirmations() {
  std::vector<Confirmation> again;
  for (Confirmation& c : unconfirmed_) {
    auto done = bookings_.confirm(c);
    if (!done && done.error().code == ErrorCode::kInternal) again.push_back(std::move(c));
  }
  unconfirmed_ = std::move(again);
}

Result<std::vector<Booking>> DevicePlugin::pendingBookings() {
  retryConfirmations();
  auto all = bookings_.bookings();
  if (!all) return fail(all.error());
  std::vector<Booking> out;
  for (Booking& b : *all) {
    if (b.confirmed || b.resource != config_.resourceName) continue;
    const bool handedOut =
        std::any_of(unconfirmed_.begin(), unconfirmed_.end(),
                    [&](const Confirmation& c) { return c.replica == b.replica; });
    if (!handedOut) out.push_back(std::move(b));
  }
  std::stable_sort(out.begin(), out.end(), [](const Booking& a, const Booking& b) {
    return std::tie(a.placedAtMs, a.replica) < std::tie(b.placedAtMs, b.replica);
  });
  return out;
}

}  // namespace tessera::deviceplugin
