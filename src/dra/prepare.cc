#include "dra/prepare.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "deviceplugin/bookings.h"
#include "dra/slices.h"
#include "k8s/quantity.h"

namespace tessera::dra {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

json cdiEdits(const deviceplugin::ContainerSpec& spec) {
  json edits = json::object();
  json env = json::array();
  for (const auto& [k, v] : spec.envs) env.push_back(k + "=" + v);
  edits["env"] = std::move(env);
  json nodes = json::array();
  for (const deviceplugin::ContainerDevice& d : spec.devices) {
    json n = {{"path", d.containerPath}, {"hostPath", d.hostPath}};
    if (!d.permissions.empty()) n["permissions"] = d.permissions;
    nodes.push_back(std::move(n));
  }
  if (!nodes.empty()) edits["deviceNodes"] = std::move(nodes);
  json mounts = json::array();
  for (const deviceplugin::ContainerMount& m : spec.mounts) {
    mounts.push_back({{"hostPath", m.hostPath},
                      {"containerPath", m.containerPath},
                      {"options", json::array({"rbind", m.readOnly ? "ro" : "rw"})}});
  }
  if (!mounts.empty()) edits["mounts"] = std::move(mounts);
  return edits;
}

// One allocation result of this driver, resolved.
struct Resolved {
  const json* result = nullptr;
  DeviceRef ref;
  deviceplugin::BookedGpu gpu;
  bool shared = false;
};

Result<Resolved> resolve(const json& r, const std::string& who,
                         const deviceplugin::Inventory& inventory, const PrepareOptions& o) {
  const std::string pool = str(r, "pool"), device = str(r, "device");
  if (pool != o.nodeName) {
    return fail(Error::precondition(who + ": device " + device + " was allocated from pool '" +
                                    pool + "', and this node is '" + o.nodeName + "'"));
  }
  const auto ref = findDevice(inventory, device);
  if (!ref) {
    return fail(Error::notFound(who + ": this node publishes no device " + device +
                                " (removed since the claim was allocated?)"));
  }
  Resolved x;
  x.result = &r;
  x.ref = *ref;
  x.gpu.gpuId = ref->gpu->id;
  x.gpu.memoryMib = ref->gpu->memoryMib;
  x.gpu.computeMilli = static_cast<std::int32_t>(kComputeMilli);
  if (ref->mig != nullptr) {
    x.gpu.migProfile = ref->mig->profile;
    x.gpu.migStart = ref->mig->startSlot;
    return x;
  }
  const auto consumed = r.find("consumedCapacity");
  if (consumed == r.end() || !consumed->is_object()) return x;
  if (const auto m = consumed->find("memory"); m != consumed->end()) {
    if (!m->is_string())
      return fail(Error::invalid(who + ": consumedCapacity.memory is not a quantity"));
    auto mib = k8s::bytesToMib(m->get<std::string>());
    if (!mib)
      return fail(Error::invalid(who + ": consumedCapacity.memory: " + mib.error().message));
    x.gpu.memoryMib = std::min(*mib, ref->gpu->memoryMib);
    x.shared = *mib < ref->gpu->memoryMib;
  }
  if (const auto c = consumed->find("compute"); c != consumed->end()) {
    if (!c->is_string())
      return fail(Error::invalid(who + ": consumedCapacity.compute is not a quantity"));
    auto milli = k8s::wholeNumber(c->get<std::string>());
    if (!milli)
      return fail(Error::invalid(who + ": consumedCapacity.compute: " + milli.error().message));
    x.gpu.computeMilli =
        static_cast<std::int32_t>(std::clamp<std::int64_t>(*milli, 0, kComputeMilli));
    x.shared = x.shared || *milli < kComputeMilli;
  }
  return x;
}

std::string replicaOf(const json& claim, const ClaimRef& ref) {
  // The pod the claim is reserved for, when exactly one: the engine's replica id.
  const json status = claim.value("status", json::object());
  const json reserved = status.value("reservedFor", json::array());
  if (reserved.is_array() && reserved.size() == 1 && str(reserved[0], "resource") == "pods") {
    return ref.ns + "/" + str(reserved[0], "name");
  }
  return ref.key();
}

}  // namespace

std::string cdiKind(std::string_view driver) {
  return std::string(driver) + "/claim";
}

std::string cdiSpecPath(std::string_view cdiDir, std::string_view driver, std::string_view uid) {
  return (fs::path(cdiDir) / (std::string(driver) + "-claim_" + std::string(uid) + ".json"))
      .string();
}

Result<PreparedClaim> prepareClaim(const json& claim, const ClaimRef& ref,
                                   const deviceplugin::Inventory& inventory,
                                   const PrepareOptions& o) {
  const std::string who = "resourceclaim " + ref.key();
  const json meta = claim.value("metadata", json::object());
  if (const std::string uid = str(meta, "uid"); uid != ref.uid) {
    return fail(Error::precondition(who + " has uid " + uid + ", kubelet asked for " + ref.uid +
                                    " (deleted and created again?)"));
  }
  const json* results = nullptr;
  if (const auto s = claim.find("status"); s != claim.end() && s->is_object()) {
    if (const auto a = s->find("allocation"); a != s->end() && a->is_object()) {
      if (const auto d = a->find("devices"); d != a->end() && d->is_object()) {
        if (const auto r = d->find("results"); r != d->end() && r->is_array()) results = &*r;
      }
    }
  }
  if (results == nullptr) return fail(Error::precondition(who + " is not allocated"));
  // Results by request, in order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, std::vector<Resolved>> byRequest;
  for (const json& r : *results) {
    if (!r.is_object() || str(r, "driver") != o.driver) continue;
    const std::string request = str(r, "request");
    auto x = resolve(r, who, inventory, o);
    if (!x) return fail(x.error());
    if (!byRequest.contains(request)) order.push_back(request);
    byRequest[request].push_back(*x);
  }
  if (order.empty()) {
    return fail(Error::precondition(who + " has no device of driver " + o.driver));
  }
  PreparedClaim out;
  json devices = json::array();
  for (const std::string& request : order) {
    const std::vector<Resolved>& xs = byRequest[request];
    deviceplugin::Booking b;
    b.replica = replicaOf(claim, ref);
    b.resource = o.driver;
    const bool mig = xs.front().ref.mig != nullptr;
    bool shared = false;
    for (const Resolved& x : xs) {
      if ((x.ref.mig != nullptr) != mig) {
        return fail(
            Error::invalid(who + ": request " + request + " mixes MIG instances and whole GPUs"));
      }
      shared = shared || x.shared;
      b.gpus.push_back(x.gpu);
    }
    b.mode = mig ? "mig" : shared ? "shared" : "exclusive";
    auto spec = deviceplugin::containerSpec(inventory, b, o.env);
    if (!spec) return fail(Error{spec.error().code, who + ": " + spec.error().message});
    const std::string name = ref.uid + "-" + (request.empty() ? std::string("0") : request);
    devices.push_back({{"name", name}, {"containerEdits", cdiEdits(*spec)}});
    for (std::size_t i = 0; i < xs.size(); ++i) {
      PreparedDevice d;
      d.requests = {request};
      d.pool = str(*xs[i].result, "pool");
      d.device = str(*xs[i].result, "device");
      if (i == 0) d.cdiIds = {cdiKind(o.driver) + "=" + name};
      if (const std::string share = str(*xs[i].result, "shareID"); !share.empty()) {
        d.shareId = share;
      }
      out.devices.push_back(std::move(d));
    }
  }
  out.cdiSpec = {{"cdiVersion", "0.6.0"}, {"kind", cdiKind(o.driver)}, {"devices", devices}};
  return out;
}

Result<void> writeCdiSpec(const std::string& path, const json& spec) {
  const fs::path p(path);
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  if (ec) {
    return fail(Error::internal("CDI directory " + p.parent_path().string() + ": " + ec.message()));
  }
  const fs::path tmp = p.parent_path() / ("." + p.filename().string() + ".tmp");
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << spec.dump(2) << "\n";
    f.flush();
    if (!f) return fail(Error::internal("writing CDI spec " + tmp.string() + " failed"));
  }
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return fail(Error::internal("CDI spec " + path + ": " + ec.message()));
  }
  return {};
}

Result<void> removeCdiSpec(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return fail(Error::internal("removing CDI spec " + path + ": " + ec.message()));
  return {};
}

}  // namespace tessera::dra
