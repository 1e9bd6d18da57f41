#include "agent/dra_driver_host.h"

#include <algorithm>

#include "agent/device_plugin_host.h"
#include "dra/driver.h"
#include "dra/publisher.h"
#include "k8s/kube_client.h"

namespace tessera::agent {

using json = nlohmann::json;

std::vector<std::string> draDriverGpus(const DraDriverConfig& config,
                                       const std::vector<AgentGpu>& gpus) {
  if (!config.enabled) return {};
  if (!config.gpus.empty()) return config.gpus;
  std::vector<std::string> all;
  for (const AgentGpu& g : gpus) all.push_back(g.id);
  return all;
}

bool devicePluginWanted(const AgentConfig& config) {
  if (config.draDriver.enabled && config.draDriver.gpus.empty() &&
      !config.devicePlugin.enabled.has_value()) {
    return false;  // mode dra: every GPU is the driver's
  }
  return devicePluginWanted(config.devicePlugin);
}

DraDriverHost::DraDriverHost(DraDriverHostOptions options) : options_(std::move(options)) {}

DraDriverHost::~DraDriverHost() {
  stop();
}

deviceplugin::Inventory DraDriverHost::inventoryOf(const std::vector<AgentGpu>& gpus) const {
  const std::vector<std::string> mine = draDriverGpus(options_.config, gpus);
  std::vector<AgentGpu> selected;
  for (const AgentGpu& g : gpus) {
    if (std::ranges::find(mine, g.id) != mine.end()) selected.push_back(g);
  }
  return inventoryFromGpus(selected, options_.controlDeviceNodes);
}

Result<void> DraDriverHost::start(const std::vector<AgentGpu>& gpus) {
  const DraDriverConfig& c = options_.config;
  for (const std::string& id : c.gpus) {
    if (std::ranges::none_of(gpus, [&](const AgentGpu& g) { return g.id == id; })) {
      return fail(Error::invalid("draDriver.gpus: this node has no GPU " + id));
    }
  }
  k8s::KubeConfig kc;
  if (!c.kubeApiServer.empty()) {
    kc.server = c.kubeApiServer;
    kc.tokenFile = c.kubeTokenFile;
    kc.caFile = c.kubeCaFile;
  } else {
    auto in = k8s::inClusterConfig();
    if (!in) {
      return fail(Error::invalid("draDriver: no draDriver.kubeApiServer and not inside a pod: " +
                                 in.error().message));
    }
    kc = *in;
  }
  kc.userAgent = "tessera-agent/" TESSERA_VERSION " (dra " + options_.nodeName + ")";
  auto client = k8s::KubeClient::create(kc);
  if (!client) return fail(Error::invalid("draDriver: " + client.error().message));
  client_ = std::move(*client);
  claims_ = dra::apiServerClaims(*client_);
  const deviceplugin::Inventory inventory = inventoryOf(gpus);
  dra::DriverConfig dc;
  dc.nodeName = options_.nodeName;
  dc.registryDir = c.registryDir;
  dc.pluginDir = c.pluginDir;
  dc.cdiDir = c.cdiDir;
  dc.env.mpsPipeDirectory = options_.mpsPipeDirectory;
  dc.watchInterval = std::chrono::milliseconds(c.watchMs);
  dc.healthTimeout = std::max(std::chrono::seconds(30),
                              std::chrono::ceil<std::chrono::seconds>(
                                  3 * std::chrono::milliseconds(options_.sampleIntervalMs)));
  dc.log = options_.log;
  driver_ = std::make_unique<dra::Driver>(dc, *claims_, inventory);
  if (auto ok = driver_->start(); !ok) {
    return fail(Error::internal("draDriver: " + ok.error().message));
  }
  dra::SliceOptions so;
  so.nodeName = options_.nodeName;
  so.catalog = options_.catalog;
  publisher_ = std::make_unique<dra::SlicePublisher>(*client_, so);
  publish(inventory);
  return {};
}

void DraDriverHost::publish(const deviceplugin::Inventory& inventory) {
  auto r = publisher_->publish(inventory);
  std::lock_guard lock(mu_);
  if (!r) {
    publishedOk_ = false;
    if (lastError_ != r.error().message && options_.log) {
      options_.log("dra: publishing ResourceSlices failed (retried at the next sample): " +
                   r.error().message);
    }
    lastError_ = r.error().message;
    return;
  }
  publishedOk_ = true;
  lastError_.clear();
  published_ = inventory;
  generation_ = r->generation;
  devices_ = r->devices;
  if (r->changed && options_.log) {
    options_.log("dra: ResourceSlice pool " + options_.nodeName + " at generation " +
                 std::to_string(r->generation) + " (" + std::to_string(r->devices) + " devices)");
  }
}

void DraDriverHost::gpusSampled(const std::vector<AgentGpu>& gpus) {
  if (!driver_) return;
  const deviceplugin::Inventory inventory = inventoryOf(gpus);
  bool again = false;
  {
    std::lock_guard lock(mu_);
    if (stopped_ || withdrawn_) return;
    again = !publishedOk_ || published_.gpus.size() != inventory.gpus.size();
    for (std::size_t i = 0; !again && i < inventory.gpus.size(); ++i) {
      const auto& a = published_.gpus[i];
      const auto& b = inventory.gpus[i];
      again = a.id != b.id || a.healthy != b.healthy || a.migEnabled != b.migEnabled ||
              a.migDevices.size() != b.migDevices.size();
    }
  }
  driver_->setInventory(inventory);
  if (again) publish(inventory);
}

std::vector<std::string> DraDriverHost::drain(std::size_t) {
  if (!publisher_) return {};
  {
    std::lock_guard lock(mu_);
    if (withdrawn_) return {};
    withdrawn_ = true;
  }
  if (auto ok = publisher_->withdraw(); !ok) {
    return {"dra: withdrawing the ResourceSlice pool failed: " + ok.error().message};
  }
  return {"dra: ResourceSlice pool withdrawn (kube-scheduler allocates no new claim here)"};
}

void DraDriverHost::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (driver_) driver_->stop();
}

json DraDriverHost::status() const {
  json s{{"enabled", true}, {"driver", std::string(dra::kDriverName)}};
  std::lock_guard lock(mu_);
  s["state"] = stopped_     ? "stopped"
               : withdrawn_ ? "withdrawn"
               : driver_    ? "serving"
                            : "not started";
  if (driver_) {
    s["registrationSocket"] = driver_->registrationSocket();
    s["pluginSocket"] = driver_->pluginSocket();
    s["registrations"] = driver_->registrations();
    s["healthStreams"] = driver_->healthStreams();
    s["healthTimeoutSeconds"] = driver_->healthTimeout().count();
  }
  s["poolGeneration"] = generation_;
  s["devices"] = devices_;
  json gpus = json::array();
  for (const auto& g : published_.gpus) gpus.push_back({{"id", g.id}, {"healthy", g.healthy}});
  s["gpus"] = gpus;
  if (!lastError_.empty()) s["error"] = lastError_;
  return s;
}

}  // namespace tessera::agent
