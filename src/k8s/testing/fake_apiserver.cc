#include "k8s/testing/fake_apiserver.h"

#include <csignal>

#include <algorithm>
#include <chrono>

#include <httplib.h>

namespace tessera::k8s::testing {
namespace {

using nlohmann::json;

bool namespaced(const std::string& resource) {
  return resource != "nodes" && resource != "resourceslices" && resource != "deviceclasses";
}

std::string keyOf(const std::string& resource, const std::string& ns, const std::string& name) {
  return namespaced(resource) ? ns + "/" + name : name;
}

std::string text(const json& obj, const char* a, const char* b) {
  const auto x = obj.find(a);
  if (x == obj.end() || !x->is_object()) return "";
  const auto y = x->find(b);
  return y != x->end() && y->is_string() ? y->get<std::string>() : "";
}

json statusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

int httpStatusOf(const Error& e) {
  switch (e.code) {
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
      return 409;
    case ErrorCode::kFailedPrecondition:
      return 409;
    case ErrorCode::kInvalidArgument:
      return 422;
    default:
      return 500;
  }
}

std::string reasonOf(const Error& e) {
  switch (e.code) {
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kAlreadyExists:
      return "AlreadyExists";
    case ErrorCode::kFailedPrecondition:
      return "Conflict";
    case ErrorCode::kInvalidArgument:
      return "Invalid";
    default:
      return "InternalError";
  }
}

// /api/v1/... or /apis/tessera.io/v1alpha1/...
struct Target {
  std::string resource, ns, name, sub;
  bool nsGiven = false;
};

std::optional<Target> parsePath(const std::string& path) {
  std::vector<std::string> segs;
  std::size_t i = 0;
  while (i < path.size()) {
    const std::size_t j = path.find('/', i);
    const std::string seg = path.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (!seg.empty()) segs.push_back(seg);
    if (j == std::string::npos) break;
    i = j + 1;
  }
  std::size_t at = 0;
  bool core = false, coordination = false, dra = false;
  if (segs.size() >= 2 && segs[0] == "api" && segs[1] == "v1") {
    core = true;
    at = 2;
  } else if (segs.size() >= 3 && segs[0] == "apis" && segs[1] == "tessera.io" &&
             segs[2] == "v1alpha1") {
    at = 3;
  } else if (segs.size() >= 3 && segs[0] == "apis" && segs[1] == "coordination.k8s.io" &&
             segs[2] == "v1") {
    at = 3;
    coordination = true;
  } else if (segs.size() >= 3 && segs[0] == "apis" && segs[1] == "resource.k8s.io" &&
             segs[2] == "v1") {
    at = 3;
    dra = true;
  } else {
    return std::nullopt;
  }
  Target t;
  if (segs.size() >= at + 3 && segs[at] == "namespaces") {
    t.ns = segs[at + 1];
    t.nsGiven = true;
    at += 2;
  }
  if (segs.size() <= at || segs.size() > at + 3) return std::nullopt;
  t.resource = segs[at];
  if (segs.size() > at + 1) t.name = segs[at + 1];
  if (segs.size() > at + 2) t.sub = segs[at + 2];
  const bool known =
      core ? t.resource == "pods" || t.resource == "nodes" ||
                 ((t.resource == "configmaps" || t.resource == "events") &&
                  (t.nsGiven || t.name.empty()))
      : coordination ? t.resource == "leases" && t.nsGiven
      : dra          ? (t.resource == "resourceclaims" && (t.nsGiven || t.name.empty())) ||
                  ((t.resource == "resourceslices" || t.resource == "deviceclasses") && !t.nsGiven)
            : t.resource == "modeldeployments";
  if (!known) return std::nullopt;
  if ((t.resource == "leases" || t.resource == "configmaps" || t.resource == "events" ||
       t.resource == "resourceslices" || t.resource == "deviceclasses") &&
      !t.sub.empty()) {
    return std::nullopt;
  }
  if (t.resource == "nodes" && t.nsGiven) return std::nullopt;
  const bool binding = t.sub == "binding" && t.resource == "pods" && t.nsGiven;
  if (!t.sub.empty() && !binding && (t.sub != "status" || t.resource == "nodes")) {
    return std::nullopt;
  }
  return t;
}

std::string kindOf(const std::string& resource) {
  if (resource == "pods") return "Pod";
  if (resource == "nodes") return "Node";
  if (resource == "leases") return "Lease";
  if (resource == "configmaps") return "ConfigMap";
  if (resource == "events") return "Event";
  if (resource == "resourceslices") return "ResourceSlice";
  if (resource == "deviceclasses") return "DeviceClass";
  if (resource == "resourceclaims") return "ResourceClaim";
  return "ModelDeployment";
}

std::string apiVersionOf(const std::string& resource) {
  if (resource == "leases") return "coordination.k8s.io/v1";
  if (resource == "resourceslices" || resource == "deviceclasses" || resource == "resourceclaims") {
    return "resource.k8s.io/v1";
  }
  return resource == "modeldeployments" ? "tessera.io/v1alpha1" : "v1";
}

// label selector: comma-separated k=v, k==v, k!=v, k, !k.
bool labelsMatch(const json& obj, const std::string& selector) {
  if (selector.empty()) return true;
  json labels = json::object();
  if (const auto m = obj.find("metadata"); m != obj.end()) {
    if (const auto l = m->find("labels"); l != m->end() && l->is_object()) labels = *l;
  }
  std::size_t i = 0;
  while (i <= selector.size()) {
    std::size_t j = selector.find(',', i);
    if (j == std::string::npos) j = selector.size();
    std::string term = selector.substr(i, j - i);
    i = j + 1;
    if (term.empty()) continue;
    auto value = [&](const std::string& k) -> std::optional<std::string> {
      const auto it = labels.find(k);
      if (it == labels.end() || !it->is_string()) return std::nullopt;
      return it->get<std::string>();
    };
    if (const auto ne = term.find("!="); ne != std::string::npos) {
      if (value(term.substr(0, ne)) == term.substr(ne + 2)) return false;
    } else if (const auto eq = term.find('='); eq != std::string::npos) {
      const std::size_t vAt = term.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1;
      if (value(term.substr(0, eq)) != term.substr(vAt)) return false;
    } else if (term[0] == '!') {
      if (value(term.substr(1))) return false;
    } else if (!value(term)) {
      return false;
    }
  }
  return true;
}

// field selector: comma-separated dotted.path=value or !=value (strings only).
bool fieldsMatch(const json& obj, const std::string& selector) {
  if (selector.empty()) return true;
  std::size_t i = 0;
  while (i <= selector.size()) {
    std::size_t j = selector.find(',', i);
    if (j == std::string::npos) j = selector.size();
    std::string term = selector.substr(i, j - i);
    i = j + 1;
    if (term.empty()) continue;
    bool negate = false;
    std::size_t op = term.find("!=");
    std::size_t vAt = 0;
    if (op != std::string::npos) {
      negate = true;
      vAt = op + 2;
    } else {
      op = term.find('=');
      if (op == std::string::npos) return false;
      vAt = term.compare(op, 2, "==") == 0 ? op + 2 : op + 1;
    }
    const std::string path = term.substr(0, op), want = term.substr(vAt);
    const json* at = &obj;
    std::size_t p = 0;
    while (at != nullptr && p <= path.size()) {
      std::size_t q = path.find('.', p);
      if (q == std::string::npos) q = path.size();
      const std::string part = path.substr(p, q - p);
      p = q + 1;
      if (!at->is_object() || !at->contains(part)) {
        at = nullptr;
      } else {
        at = &(*at)[part];
      }
    }
    const std::string have = at != nullptr && at->is_string() ? at->get<std::string>() : "";
    if ((have == want) == negate) return false;
  }
  return true;
}

std::string nowTimestamp() {
  const auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

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

void FakeApiServer::routes() {
  auto reply = [](httplib::Response& res, int code, const json& body) {
    res.status = code;
    res.set_content(body.dump(), "application/json");
  };
  auto replyError = [reply](httplib::Response& res, const Error& e) {
    const int code = httpStatusOf(e);
    reply(res, code, statusBody(code, reasonOf(e), e.message));
  };
  auto notFound = [reply](httplib::Response& res, const std::string& path) {
    reply(res, 404, statusBody(404, "NotFound", "the server could not find " + path));
  };

  server_->Get(R"(/.*)", [this, reply, notFound](const httplib::Request& req,
                                                 httplib::Response& res) {
    const auto target = parsePath(req.path);
    if (!target) return notFound(res, req.path);
    const std::string resource = target->resource;
    if (!target->name.empty()) {
      auto obj = get(resource, target->nsGiven ? target->ns : "", target->name);
      if (!obj) {
        return reply(res, 404,
                     statusBody(404, "NotFound", resource + " \"" + target->name + "\" not found"));
      }
      return reply(res, 200, *obj);
    }
    const std::string labelSel = req.get_param_value("labelSelector");
    const std::string fieldSel = req.get_param_value("fieldSelector");
    const bool nsFilter = target->nsGiven;
    const std::string ns = target->ns;
    auto matches = [=](const json& obj) {
      if (nsFilter && text(obj, "metadata", "namespace") != ns) return false;
      return labelsMatch(obj, labelSel) && fieldsMatch(obj, fieldSel);
    };
    const std::string watch = req.get_param_value("watch");
    if (watch == "1" || watch == "true") {
      const std::string rvText = req.get_param_value("resourceVersion");
      const bool bookmarks = req.get_param_value("allowWatchBookmarks") == "true";
      int timeoutSeconds = 1800;
      if (req.has_param("timeoutSeconds")) {
        timeoutSeconds = std::max(1, std::atoi(req.get_param_value("timeoutSeconds").c_str()));
      }
      // What the stream starts with: the current objects (no resourceVersion) or the events
      // after the given one.
      auto pending = std::make_shared<std::deque<json>>();
      auto from = std::make_shared<std::int64_t>(0);
      {
        std::unique_lock lock(mu_);
        changed_.wait(lock, [this] { return !paused_ || stopping_; });
        ++watches_[resource];
        if (rvText.empty() || rvText == "0") {
          for (const auto& [k, v] : objects_[resource]) {
            if (matches(v)) pending->push_back({{"type", "ADDED"}, {"object", v}});
          }
          *from = rv_;
        } else {
          const std::int64_t rv = std::atoll(rvText.c_str());
          if (rv + 1 < oldestRetained_) {
            pending->push_back(
                {{"type", "ERROR"},
                 {"object", statusBody(410, "Expired",
                                       "too old resource version: " + rvText + " (" +
                                           std::to_string(oldestRetained_ - 1) + ")")}});
            *from = -1;  // end after the error
          } else {
            *from = rv;
          }
        }
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
      std::uint64_t closeGen = 0, bookmarkGen = 0;
      {
        std::lock_guard lock(mu_);
        closeGen = closeGeneration_;
        bookmarkGen = bookmarkGeneration_;
        ++openWatches_;
      }
      res.status = 200;
      res.set_chunked_content_provider(
          "application/json",
          [this, pending, from, matches, resource, bookmarks, deadline, closeGen, bookmarkGen](
              std::size_t, httplib::DataSink& sink) mutable {
            std::unique_lock lock(mu_);
            for (;;) {
              if (!pending->empty()) break;
              if (*from < 0 || stopping_ || closeGeneration_ != closeGen ||
                  std::chrono::steady_clock::now() >= deadline) {
                lock.unlock();
                sink.done();
                return true;
              }
              if (*from + 1 < oldestRetained_) {
                // Compacted past what this watch has seen: it cannot go on.
                pending->push_back(
                    {{"type", "ERROR"},
                     {"object", statusBody(410, "Expired",
                                           "too old resource version: " + std::to_string(*from))}});
                *from = -1;
                break;
              }
              for (const Event& e : events_) {
                if (e.rv <= *from) continue;
                *from = e.rv;
                if (e.resource == resource && matches(e.object)) {
                  pending->push_back({{"type", e.type}, {"object", e.object}});
                }
              }
              if (bookmarks && bookmarkGeneration_ != bookmarkGen) {
                bookmarkGen = bookmarkGeneration_;
                pending->push_back(
                    {{"type", "BOOKMARK"},
                     {"object",
                      {{"kind", kindOf(resource)},
                       {"apiVersion", apiVersionOf(resource)},
                       {"metadata", {{"resourceVersion", std::to_string(*from)}}}}}});
              }
              if (!pending->empty()) break;
              changed_.wait_for(lock, std::chrono::milliseconds(50));
            }
            std::string out;
            while (!pending->empty()) {
              out += pending->front().dump();
              out += '\n';
              pending->pop_front();
            }
            lock.unlock();
            return sink.write(out.data(), out.size());
          },
          [this](bool) {
            std::lock_guard lock(mu_);
            --openWatches_;
          });
      return;
    }
    // LIST, paged from a snapshot.
    std::size_t limit = 0;
    if (req.has_param("limit")) {
      limit =
          static_cast<std::size_t>(std::max(0, std::atoi(req.get_param_value("limit").c_str())));
    }
    const std::string token = req.get_param_value("continue");
    std::lock_guard lock(mu_);
    Snapshot snap;
    std::size_t offset = 0;
    if (!token.empty()) {
      const auto bar = token.find('|');
      const auto it = snapshots_.find(token.substr(0, bar));
      if (it == snapshots_.end() || it->second.rv + 1 < oldestRetained_) {
        return reply(res, 410,
                     statusBody(410, "Expired",
                                "The provided continue parameter is too old to display a "
                                "consistent list result. You can start a new list without "
                                "the continue parameter."));
      }
      snap = it->second;
      offset = bar == std::string::npos ? 0 : std::strtoul(token.c_str() + bar + 1, nullptr, 10);
    } else {
      ++lists_[resource];
      snap.rv = rv_;
      for (const auto& [k, v] : objects_[resource]) {
        if (matches(v)) snap.items.push_back(v);
      }
    }
    json items = json::array();
    std::size_t end = limit == 0 ? snap.items.size() : std::min(snap.items.size(), offset + limit);
    for (std::size_t i = offset; i < end; ++i) items.push_back(snap.items[i]);
    json meta{{"resourceVersion", std::to_string(snap.rv)}};
    if (end < snap.items.size()) {
      const std::string id = "snap" + std::to_string(snap.rv) + "-" + std::to_string(++uidCounter_);
      snapshots_[id] = snap;
      meta["continue"] = id + "|" + std::to_string(end);
      meta["remainingItemCount"] = snap.items.size() - end;
    }
    reply(res, 200,
          {{"kind", kindOf(resource) + "List"},
           {"apiVersion", apiVersionOf(resource)},
           {"metadata", meta},
           {"items", items}});
  });

  server_->Post(R"(/.*)", [this, reply, replyError, notFound](const httplib::Request& req,
                                                              httplib::Response& res) {
    const auto target = parsePath(req.path);
    if (target && target->sub == "binding") {
      // pods/{name}/binding: sets spec.nodeName once, with the pod's UID as a precondition.
      json body = json::parse(req.body, nullptr, false);
      if (body.is_discarded() || !body.is_object()) {
        return reply(res, 400, statusBody(400, "BadRequest", "the body is not a JSON object"));
      }
      const json to = body.value("target", json::object());
      const std::string node = to.is_object() ? to.value("name", "") : "";
      if (node.empty()) {
        return reply(res, 422, statusBody(422, "Invalid", "target.name: Required value"));
      }
      if (const int refused = refusal("bindings", body); refused != 0) {
        return reply(res, refused, statusBody(refused, "ServiceUnavailable", "write refused"));
      }
      const std::string uid = text(body, "metadata", "uid");
      auto bound = [&]() -> Result<json> {
        std::lock_guard lock(mu_);
        auto& pods = objects_["pods"];
        const auto it = pods.find(keyOf("pods", target->ns, target->name));
        if (it == pods.end()) {
          return fail(Error::notFound("pods \"" + target->name + "\" not found"));
        }
        const std::string have = text(it->second, "metadata", "uid");
        if (!uid.empty() && uid != have) {
          return fail(Error::precondition("Precondition failed: UID in precondition: " + uid +
                                          ", UID in object meta: " + have));
        }
        const json spec = it->second.value("spec", json::object());
        if (const std::string on = spec.value("nodeName", ""); !on.empty()) {
          return fail(Error::precondition("pod " + target->name +
                                          " is already assigned to node \"" + on + "\""));
        }
        json next = it->second;
        next["spec"]["nodeName"] = node;
        ++bindings_;
        BindRecord record{target->ns + "/" + target->name,
                          node,
                          req.get_header_value("User-Agent"),
                          {},
                          std::chrono::steady_clock::now()};
        for (const auto& [key, lease] : objects_["leases"]) {
          record.leaseHolders[key] =
              lease.value("spec", json::object()).value("holderIdentity", "");
        }
        bindLog_.push_back(std::move(record));
        return updateLocked("pods", std::move(next), false);
      }();
      if (!bound) return replyError(res, bound.error());
      return reply(
          res, 201,
          {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Success"}, {"code", 201}});
    }
    if (!target || !target->name.empty()) return notFound(res, req.path);
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return reply(res, 400, statusBody(400, "BadRequest", "the body is not a JSON object"));
    }
    if (target->nsGiven) body["metadata"]["namespace"] = target->ns;
    if (const int refused = refusal(target->resource, body); refused != 0) {
      return reply(res, refused, statusBody(refused, "ServiceUnavailable", "write refused"));
    }
    auto made = create(target->resource, std::move(body));
    if (!made) return replyError(res, made.error());
    reply(res, 201, *made);
  });

  server_->Put(R"(/.*)", [this, reply, replyError, notFound](const httplib::Request& req,
                                                             httplib::Response& res) {
    const auto target = parsePath(req.path);
    if (!target || target->name.empty()) return notFound(res, req.path);
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      return reply(res, 400, statusBody(400, "BadRequest", "the body is not a JSON object"));
    }
    if (text(body, "metadata", "name") != target->name) {
      return reply(res, 400,
                   statusBody(400, "BadRequest", "the name of the object does not match the URL"));
    }
    if (target->nsGiven) body["metadata"]["namespace"] = target->ns;
    if (const int refused = refusal(target->resource, body); refused != 0) {
      return reply(res, refused, statusBody(refused, "ServiceUnavailable", "write refused"));
    }
    const bool status = target->sub == "status";
    if (status) {
      std::function<void()> hook;
      {
        std::lock_guard lock(mu_);
        if (auto it = beforeStatusPut_.find("*"); it != beforeStatusPut_.end()) {
          hook = std::move(it->second);
          beforeStatusPut_.erase(it);
        }
      }
      if (hook) hook();
    }
    auto done = status ? updateStatus(target->resource, std::move(body))
                       : update(target->resource, std::move(body));
    if (!done) return replyError(res, done.error());
    reply(res, 200, *done);
  });

  // PATCH with a JSON merge patch (RFC 7386, application/merge-patch+json), on the main
  // resource or /status: the patch is merged into the stored object and written as a PUT of
  // the result would be; a metadata.resourceVersion in the patch is a precondition (409 when
  // stale), none patches whatever is stored. Other patch types answer 415, as kube-apiserver
  // does for a type it does not accept.
  server_->Patch(R"(/.*)", [this, reply, replyError, notFound](const httplib::Request& req,
                                                               httplib::Response& res) {
    const auto target = parsePath(req.path);
    if (!target || target->name.empty()) return notFound(res, req.path);
    const std::string type = req.get_header_value("Content-Type");
    if (type.rfind("application/merge-patch+json", 0) != 0) {
      return reply(res, 415,
                   statusBody(415, "UnsupportedMediaType",
                              "the body of the request was in an unknown format - accepted "
                              "media types include: application/merge-patch+json"));
    }
    json patch = json::parse(req.body, nullptr, false);
    if (patch.is_discarded() || !patch.is_object()) {
      return reply(res, 400, statusBody(400, "BadRequest", "the patch is not a JSON object"));
    }
    if (const int refused = refusal(target->resource, patch); refused != 0) {
      return reply(res, refused, statusBody(refused, "ServiceUnavailable", "write refused"));
    }
    const auto done = [&]() -> Result<json> {
      std::lock_guard lock(mu_);
      const std::string ns =
          namespaced(target->resource) ? (target->nsGiven ? target->ns : "default") : "";
      auto& table = objects_[target->resource];
      const auto it = table.find(keyOf(target->resource, ns, target->name));
      if (it == table.end()) {
        return fail(Error::notFound(target->resource + " \"" + target->name + "\" not found"));
      }
      json merged = it->second;
      const std::string stored = merged["metadata"]["resourceVersion"].get<std::string>();
      merged.merge_patch(patch);
      if (!patch.contains("metadata") || !patch["metadata"].is_object() ||
          !patch["metadata"].contains("resourceVersion")) {
        merged["metadata"]["resourceVersion"] = stored;  // no precondition asked for
      }
      merged["metadata"]["name"] = target->name;
      if (!ns.empty()) merged["metadata"]["namespace"] = ns;
      return updateLocked(target->resource, std::move(merged), target->sub == "status");
    }();
    if (!done) return replyError(res, done.error());
    reply(res, 200, *done);
  });

  server_->Delete(R"(/.*)", [this, reply, replyError, notFound](const httplib::Request& req,
                                                                httplib::Response& res) {
    const auto target = parsePath(req.path);
    if (!target || target->name.empty() || !target->sub.empty()) {
      return notFound(res, req.path);
    }
    // DeleteOptions.preconditions.resourceVersion, as kube-apiserver checks it.
    const json options = json::parse(req.body.empty() ? "{}" : req.body, nullptr, false);
    std::string expected;
    if (options.is_object() && options.contains("preconditions") &&
        options["preconditions"].is_object()) {
      expected = options["preconditions"].value("resourceVersion", "");
    }
    auto gone = [&]() -> Result<json> {
      std::lock_guard lock(mu_);
      const std::string ns =
          namespaced(target->resource) ? (target->nsGiven ? target->ns : "default") : "";
      if (!expected.empty()) {
        auto& table = objects_[target->resource];
        const auto it = table.find(keyOf(target->resource, ns, target->name));
        if (it != table.end() &&
            it->second["metadata"]["resourceVersion"].get<std::string>() != expected) {
          ++conflicts_;
          return fail(Error::precondition(
              "Operation cannot be fulfilled on " + target->resource + " \"" + target->name +
              "\": the object has been modified; please apply your changes to the latest "
              "version and try again"));
        }
      }
      return removeLocked(target->resource, ns, target->name);
    }();
    if (!gone) return replyError(res, gone.error());
    reply(res, 200, *gone);
  });
}

}  // namespace tessera::k8s::testing
