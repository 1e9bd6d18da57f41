#include "dra/driver.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <grpcpp/grpcpp.h>

#include "common/file_identity.h"
#include "dra/proto/dra.grpc.pb.h"
#include "dra/proto/dra_health.grpc.pb.h"
#include "dra/proto/dra_health_v1alpha1.grpc.pb.h"
#include "dra/proto/pluginregistration.grpc.pb.h"
#include "k8s/kube_client.h"

namespace tessera::dra {
namespace {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace regpb = ::pluginregistration;
namespace fs = std::filesystem;
using json = nlohmann::json;

class ApiServerClaims final : public ClaimSource {
 public:
  explicit ApiServerClaims(k8s::KubeClient& client) : client_(client) {}
  Result<std::optional<json>> claim(const std::string& ns, const std::string& name) override {
    auto r = client_.request(
        "GET", "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name);
    if (!r) return fail(r.error());
    if (r->status == 404) return std::optional<json>();
    if (r->status != 200) {
      return fail(Error::internal("reading resourceclaim " + ns + "/" + name + ": HTTP " +
                                  std::to_string(r->status) + ": " + r->body.substr(0, 300)));
    }
    json body = json::parse(r->body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return fail(Error::invalid("resourceclaim " + ns + "/" + name + ": the answer is not JSON"));
    }
    return std::optional<json>(std::move(body));
  }

 private:
  k8s::KubeClient& client_;
};

Result<void> ensureDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(Error::internal("cannot create " + dir + ": " + ec.message()));
  return {};
}

Result<std::unique_ptr<grpc::Server>> serveOn(const std::string& path,
                                              std::initializer_list<grpc::Service*> services) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return fail(
        Error::internal("cannot remove stale socket " + path + ": " + std::strerror(errno)));
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return fail(Error::internal("cannot serve gRPC on " + path));
  return server;
}

}  // namespace

std::unique_ptr<ClaimSource> apiServerClaims(k8s::KubeClient& client) {
  return std::make_unique<ApiServerClaims>(client);
}

namespace {

std::int64_t unixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One answer of the health stream, for either package's messages (their fields and enum
// numbers are the same: HEALTHY = 1, UNHEALTHY = 2).
template <class Response>
Response healthAnswer(const std::vector<DeviceHealth>& devices, const std::string& pool,
                      std::int64_t observedAtSec, std::int64_t timeoutSec) {
  Response out;
  for (const DeviceHealth& h : devices) {
    auto* d = out.add_devices();
    d->mutable_device()->set_pool_name(pool);
    d->mutable_device()->set_device_name(h.device);
    using Status = std::remove_cvref_t<decltype(d->health())>;
    d->set_health(static_cast<Status>(h.healthy ? 1 : 2));
    d->set_last_updated_time(observedAtSec);
    d->set_health_check_timeout_seconds(timeoutSec);
    if (!h.message.empty()) d->set_message(h.message.substr(0, 1024));
  }
  return out;
}

}  // namespace

class Driver::Services {
 public:
  explicit Services(Driver& d)
      : registration(d), plugin(d), health(d, closing), healthV1alpha1(d, closing) {}

  // The health stream of either package: the devices at once, then on every change and at
  // least every healthResendInterval, until kubelet cancels or the servers close.
  template <class Response>
  static void streamHealth(Driver& d, const std::atomic<bool>& closing, grpc::ServerContext& ctx,
                           grpc::ServerWriter<Response>& writer) {
    using Clock = std::chrono::steady_clock;
    const auto resend = std::max(d.config_.healthResendInterval, std::chrono::milliseconds(1));
    const std::int64_t timeoutSec = d.config_.healthTimeout.count();
    d.healthStreams_.fetch_add(1);
    std::optional<std::vector<DeviceHealth>> sent;
    std::uint64_t seen = 0;  // the inventory version `sent` was built from
    Clock::time_point sentAt;
    std::unique_lock lock(d.mu_);
    while (!d.stopping_ && !closing.load() && !ctx.IsCancelled()) {
      const Clock::time_point t = Clock::now();
      const bool due = !sent || t - sentAt >= resend;
      if (!due && d.inventoryVersion_ == seen) {
        // Nothing new: only a change, a stop or the renewal wakes the stream; the short bound
        // notices a cancelled one.
        d.healthWake_.wait_until(
            lock, std::min(sentAt + resend, Clock::now() + std::chrono::milliseconds(200)));
        continue;
      }
      seen = d.inventoryVersion_;
      std::vector<DeviceHealth> now = deviceHealth(d.inventory_);
      if (due || now != *sent) {
        const Response answer =
            healthAnswer<Response>(now, d.config_.nodeName, d.observedAtSec_, timeoutSec);
        lock.unlock();
        const bool written = writer.Write(answer);
        lock.lock();
        if (!written) break;
        sent = std::move(now);
        sentAt = t;
      }
    }
    lock.unlock();
    d.healthStreams_.fetch_sub(1);
  }

  template <class Base, class Request, class Response>
  class Health final : public Base {
   public:
    Health(Driver& d, const std::atomic<bool>& closing) : d_(d), closing_(closing) {}
    grpc::Status NodeWatchResources(grpc::ServerContext* ctx, const Request*,
                                    grpc::ServerWriter<Response>* writer) override {
      streamHealth(d_, closing_, *ctx, *writer);
      return grpc::Status::OK;
    }

   private:
    Driver& d_;
    const std::atomic<bool>& closing_;
  };

  class Registration final : public regpb::Registration::Service {
   public:
    explicit Registration(Driver& d) : d_(d) {}
    grpc::Status GetInfo(grpc::ServerContext*, const regpb::InfoRequest*,
                         regpb::PluginInfo* out) override {
      out->set_type(std::string(kPluginType));
      out->set_name(d_.config_.driver);
      out->set_endpoint(d_.pluginSocket());
      out->add_supported_versions(std::string(kDraService));
      out->add_supported_versions(std::string(kHealthServiceV1alpha1));
      out->add_supported_versions(std::string(kHealthService));
      return grpc::Status::OK;
    }
    grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const regpb::RegistrationStatus* in,
                                          regpb::RegistrationStatusResponse*) override {
      if (in->plugin_registered()) {
        d_.registrations_.fetch_add(1);
        d_.say("registered with kubelet as " + d_.config_.driver);
      } else {
        {
          std::lock_guard lock(d_.mu_);
          d_.lastRegistrationError_ = in->error();
        }
        d_.say("kubelet refused the registration: " + in->error());
      }
      return grpc::Status::OK;
    }

   private:
    Driver& d_;
  };

  class Plugin final : public drapb::DRAPlugin::Service {
   public:
    explicit Plugin(Driver& d) : d_(d) {}
    grpc::Status NodePrepareResources(grpc::ServerContext*,
                                      const drapb::NodePrepareResourcesRequest* in,
                                      drapb::NodePrepareResourcesResponse* out) override {
      for (const drapb::Claim& c : in->claims()) {
        drapb::NodePrepareResourceResponse& answer = (*out->mutable_claims())[c.uid()];
        auto prepared = d_.prepare({c.namespace_(), c.uid(), c.name()});
        if (!prepared) {
          answer.set_error(prepared.error().message);
          d_.say("prepare " + c.namespace_() + "/" + c.name() + ": " + prepared.error().message);
          continue;
        }
        for (const PreparedDevice& pd : prepared->devices) {
          drapb::Device* dev = answer.add_devices();
          for (const std::string& r : pd.requests) dev->add_request_names(r);
          dev->set_pool_name(pd.pool);
          dev->set_device_name(pd.device);
          for (const std::string& id : pd.cdiIds) dev->add_cdi_device_ids(id);
          if (pd.shareId) dev->set_share_id(*pd.shareId);
        }
      }
      return grpc::Status::OK;
    }
    grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                        const drapb::NodeUnprepareResourcesRequest* in,
                                        drapb::NodeUnprepareResourcesResponse* out) override {
      for (const drapb::Claim& c : in->claims()) {
        drapb::NodeUnprepareResourceResponse& answer = (*out->mutable_claims())[c.uid()];
        if (auto ok = d_.unprepare({c.namespace_(), c.uid(), c.name()}); !ok) {
          answer.set_error(ok.error().message);
        }
      }
      return grpc::Status::OK;
    }

   private:
    Driver& d_;
  };

  std::atomic<bool> closing{false};  // set before the servers shut down: streams end
  Registration registration;
  Plugin plugin;
  Health<::v1::DRAResourceHealth::Service, ::v1::NodeWatchResourcesRequest,
         ::v1::NodeWatchResourcesResponse>
      health;
  Health<::v1alpha1::DRAResourceHealth::Service, ::v1alpha1::NodeWatchResourcesRequest,
         ::v1alpha1::NodeWatchResourcesResponse>
      healthV1alpha1;
};

Driver::Driver(DriverConfig config, ClaimSource& claims, deviceplugin::Inventory inventory)
    : config_(std::move(config)),
      claims_(claims),
      inventory_(std::move(inventory)),
      observedAtSec_(unixSeconds()) {}

Driver::~Driver() {
  stop();
}

std::string Driver::registrationSocket() const {
  return (fs::path(config_.registryDir) / (config_.driver + "-reg.sock")).string();
}

std::string Driver::pluginSocket() const {
  return (fs::path(config_.pluginDir) / config_.driver / "dra.sock").string();
}

std::string Driver::lastRegistrationError() const {
  std::lock_guard lock(mu_);
  return lastRegistrationError_;
}

void Driver::setInventory(deviceplugin::Inventory inventory) {
  {
    std::lock_guard lock(mu_);
    inventory_ = std::move(inventory);
    observedAtSec_ = unixSeconds();
    ++inventoryVersion_;
  }
  healthWake_.notify_all();
}

deviceplugin::Inventory Driver::inventory() const {
  std::lock_guard lock(mu_);
  return inventory_;
}

void Driver::say(const std::string& message) const {
  if (config_.log) config_.log("dra: " + message);
}

Result<PreparedClaim> Driver::prepare(const ClaimRef& ref) {
  auto claim = claims_.claim(ref.ns, ref.name);
  if (!claim) return fail(claim.error());
  if (!*claim) return fail(Error::notFound("resourceclaim " + ref.key() + " not found"));
  PrepareOptions o;
  o.driver = config_.driver;
  o.nodeName = config_.nodeName;
  o.env = config_.env;
  Result<PreparedClaim> prepared = fail(Error::internal("not prepared"));
  try {
    prepared = prepareClaim(**claim, ref, inventory(), o);
  } catch (const nlohmann::json::exception& e) {
    // A field of an unexpected type in what the API server answered: this claim's error.
    return fail(Error::invalid("resourceclaim " + ref.key() + " is malformed: " + e.what()));
  }
  if (!prepared) return fail(prepared.error());
  TESSERA_RETURN_IF_ERROR(
      writeCdiSpec(cdiSpecPath(config_.cdiDir, config_.driver, ref.uid), prepared->cdiSpec));
  return prepared;
}

Result<void> Driver::unprepare(const ClaimRef& ref) {
  return removeCdiSpec(cdiSpecPath(config_.cdiDir, config_.driver, ref.uid));
}

Result<void> Driver::serve() {
  TESSERA_RETURN_IF_ERROR(ensureDir(config_.registryDir));
  TESSERA_RETURN_IF_ERROR(ensureDir((fs::path(config_.pluginDir) / config_.driver).string()));
  auto services = std::make_unique<Services>(*this);
  // The endpoint first: kubelet connects to it as soon as registration succeeds.
  auto plugin =
      serveOn(pluginSocket(), {&services->plugin, &services->health, &services->healthV1alpha1});
  if (!plugin) return fail(plugin.error());
  auto registration = serveOn(registrationSocket(), {&services->registration});
  if (!registration) {
    (*plugin)->Shutdown();
    return fail(registration.error());
  }
  std::lock_guard lock(mu_);
  services_ = std::move(services);
  pluginServer_ = std::move(*plugin);
  registrationServer_ = std::move(*registration);
  pluginId_ = fileIdentity(pluginSocket());
  registrationId_ = fileIdentity(registrationSocket());
  serves_.fetch_add(1);
  say("serving " + config_.driver + " on " + pluginSocket() + ", registration on " +
      registrationSocket());
  return {};
}

void Driver::shutdownServers() {
  std::unique_ptr<grpc::Server> a, b;
  std::unique_ptr<Services> services;
  {
    std::lock_guard lock(mu_);
    a = std::move(registrationServer_);
    b = std::move(pluginServer_);
    services = std::move(services_);
  }
  if (services) services->closing = true;
  healthWake_.notify_all();
  for (grpc::Server* s : {a.get(), b.get()}) {
    if (s == nullptr) continue;
    s->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    s->Wait();
  }
}

Result<void> Driver::start() {
  {
    std::lock_guard lock(mu_);
    if (watcher_.joinable()) return {};
    stopping_ = false;
  }
  TESSERA_RETURN_IF_ERROR(serve());
  watcher_ = std::thread([this] { watch(); });
  return {};
}

void Driver::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  healthWake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  shutdownServers();
  // The registry socket goes with the driver: kubelet's watcher then deregisters it.
  ::unlink(registrationSocket().c_str());
  ::unlink(pluginSocket().c_str());
}

void Driver::watch() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, config_.watchInterval, [this] { return stopping_; });
    if (stopping_) break;
    const bool gone = fileIdentity(registrationSocket()) != registrationId_ ||
                      fileIdentity(pluginSocket()) != pluginId_;
    if (!gone) continue;
    lock.unlock();
    say("a socket was removed or replaced (kubelet restart?): serving again");
    shutdownServers();
    if (auto ok = serve(); !ok) say("serving again failed: " + ok.error().message);
    lock.lock();
  }
}

}  // namespace tessera::dra
