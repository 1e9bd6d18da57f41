#include "k8s/testing/fake_apiserver.h"

#include <csignal>

#include <algorithm>
#include <chrono>

#include <httplib.h>

#include "k8s/testing/fake_apiserver_wire.h"

namespace tessera::k8s::testing {

using nlohmann::json;
using namespace wire;

FakeApiServer::FakeApiServer() = default;

FakeApiServer::~FakeApiServer() {
  stop();
}

std::string FakeApiServer::url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

Result<int> FakeApiServer::start(int port) {
  // A watch written to after its client left must not kill the test process.
  ::signal(SIGPIPE, SIG_IGN);
  {
    std::lock_guard lock(mu_);
    stopping_ = false;  // started again after stop(): the objects are kept
  }
  server_ = std::make_unique<httplib::Server>();
  server_->set_tcp_nodelay(true);  // as kube-apiserver's Go net/http does by default
  // Every open watch holds a worker.
  server_->new_task_queue = [] { return new httplib::ThreadPool(32); };
  routes();
  if (port > 0) {
    port_ = server_->bind_to_port("127.0.0.1", port) ? port : -1;
  } else {
    port_ = server_->bind_to_any_port("127.0.0.1");
  }
  if (port_ <= 0) return fail(Error::internal("fake API server: cannot bind"));
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port_;
}

void FakeApiServer::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !server_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void FakeApiServer::record(const std::string& resource, const std::string& type, const json& obj) {
  events_.push_back(Event{rv_, resource, type, obj});
  while (events_.size() > 4096) {
    oldestRetained_ = events_.front().rv + 1;
    events_.pop_front();
  }
  changed_.notify_all();
}

Result<json> FakeApiServer::createLocked(const std::string& resource, json obj) {
  if (!obj.is_object()) return fail(Error::invalid("body must be an object"));
  json& meta = obj["metadata"];
  if (!meta.is_object()) meta = json::object();
  std::string name = text(obj, "metadata", "name");
  if (name.empty()) {
    const std::string gen = text(obj, "metadata", "generateName");
    if (gen.empty()) return fail(Error::invalid("metadata.name: Required value"));
    static const char* alphabet = "bcdfghjklmnpqrstvwxz2456789";
    std::uint64_t n = ++uidCounter_ * 2654435761u;
    name = gen;
    for (int i = 0; i < 5; ++i) {
      name += alphabet[n % 27];
      n /= 27;
    }
    meta["name"] = name;
  }
  std::string ns = text(obj, "metadata", "namespace");
  if (namespaced(resource)) {
    if (ns.empty()) ns = "default";
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
    ns.clear();
  }
  auto& table = objects_[resource];
  const std::string key = keyOf(resource, ns, name);
  if (table.contains(key)) {
    return fail(Error::exists(resource + " \"" + name + "\" already exists"));
  }
  obj["kind"] = kindOf(resource);
  obj["apiVersion"] = apiVersionOf(resource);
  ++rv_;
  meta["resourceVersion"] = std::to_string(rv_);
  meta["uid"] = "uid-" + std::to_string(++uidCounter_);
  meta["creationTimestamp"] = nowTimestamp();
  meta["generation"] = 1;
  meta.erase("deletionTimestamp");
  table[key] = obj;
  record(resource, "ADDED", obj);
  return obj;
}

Result<json> FakeApiServer::updateLocked(const std::string& resource, json obj, bool status) {
  if (!obj.is_object()) return fail(Error::invalid("body must be an object"));
  const std::string name = text(obj, "metadata", "name");
  const std::string ns = namespaced(resource) ? text(obj, "metadata", "namespace") : "";
  auto& table = objects_[resource];
  const auto it =
      table.find(keyOf(resource, ns.empty() && namespaced(resource) ? "default" : ns, name));
  if (it == table.end()) return fail(Error::notFound(resource + " \"" + name + "\" not found"));
  json& stored = it->second;
  const std::string given = text(obj, "metadata", "resourceVersion");
  if (!given.empty() && given != stored["metadata"]["resourceVersion"].get<std::string>()) {
    ++conflicts_;
    return fail(Error::precondition(
        "Operation cannot be fulfilled on " + resource + " \"" + name +
        "\": the object has been modified; please apply your changes to the latest version "
        "and try again"));
  }
  json next = stored;
  if (status) {
    next["status"] = obj.contains("status") ? obj["status"] : json::object();
  } else {
    // The main resource: metadata (labels, annotations, ...) and spec; status is kept.
    json meta = obj["metadata"];
    for (const char* fixed : {"uid", "creationTimestamp", "generation", "namespace", "name",
                              "resourceVersion", "deletionTimestamp"}) {
      if (stored["metadata"].contains(fixed)) {
        meta[fixed] = stored["metadata"][fixed];
      } else {
        meta.erase(fixed);
      }
    }
    next = obj;
    next["metadata"] = meta;
    if (stored.contains("status")) {
      next["status"] = stored["status"];
    } else {
      next.erase("status");
    }
    next["kind"] = kindOf(resource);
    next["apiVersion"] = apiVersionOf(resource);
    if (obj.value("spec", json()) != stored.value("spec", json())) {
      next["metadata"]["generation"] = stored["metadata"].value("generation", 1) + 1;
    }
  }
  ++rv_;
  next["metadata"]["resourceVersion"] = std::to_string(rv_);
  stored = next;
  record(resource, "MODIFIED", next);
  return next;
}

Result<json> FakeApiServer::removeLocked(const std::string& resource, const std::string& ns,
                                         const std::string& name) {
  auto& table = objects_[resource];
  const auto it = table.find(keyOf(resource, ns, name));
  if (it == table.end()) return fail(Error::notFound(resource + " \"" + name + "\" not found"));
  json obj = std::move(it->second);
  table.erase(it);
  ++rv_;
  obj["metadata"]["resourceVersion"] = std::to_string(rv_);
  record(resource, "DELETED", obj);
  return obj;
}

Result<json> FakeApiServer::create(const std::string& resource, json object) {
  std::lock_guard lock(mu_);
  return createLocked(resource, std::move(object));
}

Result<json> FakeApiServer::update(const std::string& resource, json object) {
  std::lock_guard lock(mu_);
  return updateLocked(resource, std::move(object), false);
}

Result<json> FakeApiServer::updateStatus(const std::string& resource, json object) {
  std::lock_guard lock(mu_);
  return updateLocked(resource, std::move(object), true);
}

Result<json> FakeApiServer::remove(const std::string& resource, const std::string& ns,
                                   const std::string& name) {
  std::lock_guard lock(mu_);
  return removeLocked(resource, ns, name);
}

std::optional<json> FakeApiServer::get(const std::string& resource, const std::string& ns,
                                       const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto t = objects_.find(resource);
  if (t == objects_.end()) return std::nullopt;
  const auto it = t->second.find(keyOf(resource, ns, name));
  if (it == t->second.end()) return std::nullopt;
  return it->second;
}

std::vector<json> FakeApiServer::list(const std::string& resource) const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  if (const auto t = objects_.find(resource); t != objects_.end()) {
    for (const auto& [k, v] : t->second) out.push_back(v);
  }
  return out;
}

std::int64_t FakeApiServer::resourceVersion() const {
  std::lock_guard lock(mu_);
  return rv_;
}

void FakeApiServer::compact() {
  std::lock_guard lock(mu_);
  events_.clear();
  oldestRetained_ = rv_ + 1;
  snapshots_.clear();
}

void FakeApiServer::closeWatches() {
  {
    std::lock_guard lock(mu_);
    ++closeGeneration_;
  }
  changed_.notify_all();
}

void FakeApiServer::pauseWatches() {
  {
    std::lock_guard lock(mu_);
    paused_ = true;
    ++closeGeneration_;
  }
  changed_.notify_all();
}

void FakeApiServer::resumeWatches() {
  {
    std::lock_guard lock(mu_);
    paused_ = false;
  }
  changed_.notify_all();
}

void FakeApiServer::sendBookmarks() {
  {
    std::lock_guard lock(mu_);
    ++bookmarkGeneration_;
  }
  changed_.notify_all();
}

void FakeApiServer::refuseWrites(std::function<int(const std::string&, const json&)> rule) {
  std::lock_guard lock(mu_);
  refuse_ = std::move(rule);
}

int FakeApiServer::refusal(const std::string& resource, const json& body) const {
  std::function<int(const std::string&, const json&)> rule;
  {
    std::lock_guard lock(mu_);
    rule = refuse_;
  }
  return rule ? rule(resource, body) : 0;
}

void FakeApiServer::beforeNextStatusPut(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  beforeStatusPut_["*"] = std::move(fn);
}

int FakeApiServer::lists(const std::string& resource) const {
  std::lock_guard lock(mu_);
  const auto it = lists_.find(resource);
  return it == lists_.end() ? 0 : it->second;
}

int FakeApiServer::watches(const std::string& resource) const {
  std::lock_guard lock(mu_);
  const auto it = watches_.find(resource);
  return it == watches_.end() ? 0 : it->second;
}

int FakeApiServer::conflicts() const {
  std::lock_guard lock(mu_);
  return conflicts_;
}

int FakeApiServer::bindings() const {
  std::lock_guard lock(mu_);
  return bindings_;
}

std::vector<FakeApiServer::BindRecord> FakeApiServer::bindLog() const {
  std::lock_guard lock(mu_);
  return bindLog_;
}

int FakeApiServer::openWatches() const {
  std::lock_guard lock(mu_);
  return openWatches_;
}

}  // namespace tessera::k8s::testing
