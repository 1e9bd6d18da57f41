#pragma once
// Test doubles for the device plugin tests: a fake kubelet serving the Registration service
// on a real unix socket, a kubelet-side DevicePlugin client, an in-memory booking source and
// a temporary plugin directory.

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "deviceplugin/bookings.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/proto/api.grpc.pb.h"
#include "deviceplugin/proto/podresources.grpc.pb.h"

namespace tessera::deviceplugin::testing {

// A directory under /tmp (unix socket paths must stay under 108 bytes), removed afterwards.
class SocketDir {
 public:
  SocketDir() {
    std::string tmpl = "/tmp/tessera-dp-XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~SocketDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Polls `done` until it holds or ~10 s pass (a generous bound for slow, loaded machines:
// the tests assert on outcomes, never on how long they took).
inline bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// kubelet's Registration service on <dir>/kubelet.sock, recording every request.
class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(const std::string& dir) : socket_(dir + "/kubelet.sock") {
    ::unlink(socket_.c_str());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeKubelet() override { stop(); }
  // Stops serving and removes kubelet.sock, as a kubelet going down leaves things.
  void stop() {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
      server_->Wait();
      server_.reset();
      ::unlink(socket_.c_str());
    }
  }
  bool serving() const { return server_ != nullptr; }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    std::lock_guard lock(mu_);
    requests_.push_back(*req);
    return grpc::Status::OK;
  }
  std::vector<v1beta1::RegisterRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  std::string socket_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  std::vector<v1beta1::RegisterRequest> requests_;
};

// Kubelet's PodResources service on `socket`, answering List with the pods the test sets
// (each container: one resource and its device IDs), as kubelet's does from its checkpoint.
class FakePodResources final : public v1::PodResourcesLister::Service {
 public:
  struct Container {
    std::string pod;  // "<namespace>/<name>"
    std::string resource;
    std::vector<std::string> deviceIds;
  };
  explicit FakePodResources(std::string socket) : socket_(std::move(socket)) {
    ::unlink(socket_.c_str());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakePodResources() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_->Wait();
    ::unlink(socket_.c_str());
  }
  void set(std::vector<Container> containers) {
    std::lock_guard lock(mu_);
    containers_ = std::move(containers);
  }
  int lists() const {
    std::lock_guard lock(mu_);
    return lists_;
  }

  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard lock(mu_);
    ++lists_;
    for (const Container& c : containers_) {
      auto* pod = out->add_pod_resources();
      const auto slash = c.pod.find('/');
      pod->set_namespace_(c.pod.substr(0, slash));
      pod->set_name(c.pod.substr(slash + 1));
      auto* container = pod->add_containers();
      container->set_name("engine");
      auto* devices = container->add_devices();
      devices->set_resource_name(c.resource);
      for (const std::string& id : c.deviceIds) devices->add_device_ids(id);
    }
    return grpc::Status::OK;
  }

 private:
  std::string socket_;
  std::unique_ptr<grpc::Server> server_;
  mutable std::mutex mu_;
  std::vector<Container> containers_;
  int lists_ = 0;
};

// What kubelet's device manager uses to talk to a plugin.
inline std::unique_ptr<v1beta1::DevicePlugin::Stub> pluginClient(const std::string& socket) {
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials()));
}

// Bookings kept in memory; confirmations mark them confirmed, as the control plane does.
class MemoryBookings final : public BookingSource {
 public:
  void add(Booking b) {
    std::lock_guard lock(mu_);
    bookings_.push_back(std::move(b));
  }
  void setUnreachable(bool unreachable) {
    std::lock_guard lock(mu_);
    unreachable_ = unreachable;
  }
  Result<std::vector<Booking>> bookings() override {
    std::lock_guard lock(mu_);
    if (unreachable_) return fail(Error::internal("control plane unreachable"));
    return bookings_;
  }
  // Confirmations fail (the control plane went away after the bookings were read).
  void setConfirmsFail(bool fail) {
    std::lock_guard lock(mu_);
    confirmsFail_ = fail;
  }
  Result<void> confirm(const Confirmation& c) override {
    std::lock_guard lock(mu_);
    if (unreachable_ || confirmsFail_) return fail(Error::internal("control plane unreachable"));
    for (Booking& b : bookings_) {
      if (b.replica == c.replica) {
        b.confirmed = true;
        confirmations_.push_back(c);
        return {};
      }
    }
    return fail(Error::notFound("replica " + c.replica + " is not placed"));
  }
  std::vector<Confirmation> confirmations() const {
    std::lock_guard lock(mu_);
    return confirmations_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Booking> bookings_;
  std::vector<Confirmation> confirmations_;
  bool unreachable_ = false;
  bool confirmsFail_ = false;
};

inline Booking booking(std::string replica, std::string mode, std::vector<std::string> gpus,
                       std::int64_t memoryMib, std::int32_t computeMilli, std::int64_t placedAtMs) {
  Booking b;
  b.replica = std::move(replica);
  b.resource = "tessera.io/gpus";
  b.mode = std::move(mode);
  b.placedAtMs = placedAtMs;
  for (std::string& g : gpus) b.gpus.push_back({std::move(g), memoryMib, computeMilli, "", -1});
  return b;
}

// Four A100-80GB: 0 and 1 share NVLink group 0 on NUMA node 0, 2 and 3 group 1 on NUMA 1.
inline Inventory fourGpus() {
  Inventory inv;
  inv.controlDeviceNodes = {"/dev/nvidiactl", "/dev/nvidia-uvm"};
  for (int i = 0; i < 4; ++i) {
    GpuDevice g;
    g.id = std::to_string(i);
    g.index = i;
    g.uuid = "GPU-0000000" + std::to_string(i) + "-aaaa-bbbb-cccc-dddddddddddd";
    g.type = "A100-80GB";
    g.memoryMib = 81920;
    g.numaNode = i / 2;
    g.nvlinkGroup = i / 2;
    g.deviceNodes = {"/dev/nvidia" + std::to_string(i)};
    inv.gpus.push_back(g);
  }
  return inv;
}

}  // namespace tessera::deviceplugin::testing
