#include "k8s/informer.h"

#include <algorithm>
#include <chrono>

#include "common/text.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

}  // namespace

std::string metadataText(const json& object, const char* key) {
  const auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return "";
  const auto v = m->find(key);
  return v != m->end() && v->is_string() ? v->get<std::string>() : "";
}

std::string objectKey(const json& object) {
  const std::string ns = metadataText(object, "namespace");
  const std::string name = metadataText(object, "name");
  return ns.empty() ? name : ns + "/" + name;
}

std::string resourceVersionOf(const json& object) {
  return metadataText(object, "resourceVersion");
}

Result<WatchEvent> parseWatchEvent(std::string_view line) {
  const json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) {
    return fail(
        Error::invalid("watch event: not a JSON object: " + std::string(line.substr(0, 120))));
  }
  const auto type = event.find("type");
  const auto object = event.find("object");
  if (type == event.end() || !type->is_string() || object == event.end() || !object->is_object()) {
    return fail(Error::invalid("watch event: expected {type, object}: " +
                               std::string(line.substr(0, 120))));
  }
  WatchEvent out;
  const std::string t = type->get<std::string>();
  if (t == "ADDED") {
    out.type = WatchEventType::kAdded;
  } else if (t == "MODIFIED") {
    out.type = WatchEventType::kModified;
  } else if (t == "DELETED") {
    out.type = WatchEventType::kDeleted;
  } else if (t == "BOOKMARK") {
    out.type = WatchEventType::kBookmark;
  } else if (t == "ERROR") {
    out.type = WatchEventType::kError;
  } else {
    return fail(Error::invalid("watch event: unknown type \"" + t + "\""));
  }
  out.object = *object;
  return out;
}

Informer::Informer(KubeClient& client, InformerOptions options, Handler handler)
    : client_(client), options_(std::move(options)), handler_(std::move(handler)) {
  rng_ = options_.jitterSeed != 0
             ? options_.jitterSeed
             : static_cast<std::uint64_t>(
                   std::chrono::steady_clock::now().time_since_epoch().count()) |
                   1;
}

Informer::~Informer() {
  stop();
}

void Informer::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

void Informer::stop() {
  {
    std::lock_guard lock(stopMu_);
    stopping_ = true;
  }
  stopCv_.notify_all();
  stopper_.stop();
  if (thread_.joinable()) thread_.join();
}

std::optional<json> Informer::get(const std::string& key) const {
  std::lock_guard lock(mu_);
  const auto it = items_.find(key);
  if (it == items_.end()) return std::nullopt;
  return it->second;
}

std::vector<json> Informer::list() const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  out.reserve(items_.size());
  for (const auto& [k, v] : items_) out.push_back(v);
  return out;
}

std::string Informer::resourceVersion() const {
  std::lock_guard lock(mu_);
  return rv_;
}

Informer::Stats Informer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string Informer::query(bool watch) const {
  std::string q;
  auto add = [&q](const std::string& k, const std::string& v) {
    q += q.empty() ? "?" : "&";
    q += k + "=" + percentEncode(v);
  };
  if (!options_.labelSelector.empty()) add("labelSelector", options_.labelSelector);
  if (!options_.fieldSelector.empty()) add("fieldSelector", options_.fieldSelector);
  if (watch) {
    add("watch", "1");
    add("resourceVersion", resourceVersion());
    add("allowWatchBookmarks", "true");
    add("timeoutSeconds", std::to_string(options_.watchTimeoutSeconds));
  }
  return q;
}

void Informer::sleepBackoff() {
  backoffMs_ =
      backoffMs_ == 0 ? options_.backoffInitialMs : std::min(options_.backoffMaxMs, backoffMs_ * 2);
  // Full jitter on the upper half: between half the step and the step.
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  const int half = std::max(1, backoffMs_ / 2);
  const int wait = half + static_cast<int>(rng_ % static_cast<std::uint64_t>(half + 1));
  std::unique_lock lock(stopMu_);
  stopCv_.wait_for(lock, std::chrono::milliseconds(wait), [this] { return stopping_; });
}

Result<void> Informer::relist() {
  std::map<std::string, json> fresh;
  std::string cont, listRv;
  for (;;) {
    std::string path = options_.path + query(false);
    path += path.find('?') == std::string::npos ? "?" : "&";
    path += "limit=" + std::to_string(options_.pageSize);
    if (!cont.empty()) path += "&continue=" + percentEncode(cont);
    auto res = client_.request("GET", path);
    if (!res) return fail(res.error());
    if (res->status == 410) {
      return fail(Error::precondition("list " + options_.path + ": " + describeFailure(*res)));
    }
    if (res->status != 200) {
      return fail(Error::internal("list " + options_.path + ": " + describeFailure(*res)));
    }
    const json body = json::parse(res->body, nullptr, false);
    if (!body.is_object() || !body.contains("items") || !body["items"].is_array()) {
      return fail(Error::internal("list " + options_.path + ": not a List"));
    }
    for (const json& item : body["items"]) fresh[objectKey(item)] = item;
    const json meta = body.value("metadata", json::object());
    if (cont.empty()) listRv = meta.value("resourceVersion", "");
    cont = meta.value("continue", "");
    if (cont.empty()) break;
  }
  // Replace the copy and tell the handler what changed.
  struct Change {
    Informer::Change kind;
    json object, old;
  };
  std::vector<Change> changes;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, old] : items_) {
      if (!fresh.contains(key)) changes.push_back({Informer::Change::kDeleted, old, old});
    }
    for (const auto& [key, obj] : fresh) {
      const auto it = items_.find(key);
      if (it == items_.end()) {
        changes.push_back({Informer::Change::kAdded, obj, json()});
      } else if (resourceVersionOf(it->second) != resourceVersionOf(obj)) {
        changes.push_back({Informer::Change::kModified, obj, it->second});
      }
    }
    items_ = std::move(fresh);
    rv_ = listRv;
    ++stats_.lists;
  }
  synced_.store(true);
  for (const Change& c : changes) {
    handler_(c.kind, c.object, c.kind == Informer::Change::kAdded ? nullptr : &c.old);
  }
  return {};
}

void Informer::apply(WatchEventType type, const json& object) {
  const std::string key = objectKey(object);
  json old;
  bool had = false;
  {
    std::lock_guard lock(mu_);
    if (const std::string rv = resourceVersionOf(object); !rv.empty()) rv_ = rv;
    if (type == WatchEventType::kBookmark) {
      ++stats_.bookmarks;
      return;
    }
    const auto it = items_.find(key);
    if (it != items_.end()) {
      old = std::move(it->second);
      had = true;
    }
    if (type == WatchEventType::kDeleted) {
      if (had) items_.erase(key);
    } else {
      items_[key] = object;
    }
  }
  if (type == WatchEventType::kDeleted) {
    handler_(Change::kDeleted, object, had ? &old : nullptr);
  } else {
    handler_(had ? Change::kModified : Change::kAdded, object, had ? &old : nullptr);
  }
}

Result<bool> Informer::watchOnce() {
  {
    std::lock_guard lock(mu_);
    ++stats_.watches;
  }
  std::string buffer;
  bool gone = false;
  std::optional<Error> broken;
  bool sawEvent = false;
  auto onData = [&](std::string_view data) {
    // Data is the first sign a watch answers (it may open and stay silent until an event or a
    // bookmark): the collection answers again.
    if (buffer.empty() && !data.empty()) answered();
    buffer.append(data);
    std::size_t start = 0;
    for (;;) {
      const std::size_t nl = buffer.find('\n', start);
      if (nl == std::string::npos) break;
      const std::string_view line(buffer.data() + start, nl - start);
      start = nl + 1;
      if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
      auto event = parseWatchEvent(line);
      if (!event) {
        broken = event.error();
        return false;
      }
      if (event->type == WatchEventType::kError) {
        const json& status = event->object;
        if (status.value("code", 0) == 410 || status.value("reason", "") == "Expired" ||
            status.value("reason", "") == "Gone") {
          gone = true;
        } else {
          broken = Error::internal("watch " + options_.path + ": " +
                                   status.value("message", status.dump()));
        }
        return false;
      }
      apply(event->type, event->object);
      sawEvent = true;
    }
    buffer.erase(0, start);
    return true;
  };
  // The server ends the watch after timeoutSeconds; allow it that long plus a margin.
  const int readMs = (options_.watchTimeoutSeconds + 30) * 1000;
  const auto began = std::chrono::steady_clock::now();
  auto res = client_.stream(options_.path + query(true), onData, &stopper_, readMs);
  if (gone) return true;
  if (broken) return fail(*broken);
  if (!res) return fail(res.error());
  if (res->status == 410) return true;
  if (res->status != 200) {
    return fail(Error::internal("watch " + options_.path + ": " + describeFailure(*res)));
  }
  if (sawEvent) {
    backoffMs_ = 0;
  } else if (std::chrono::steady_clock::now() - began < std::chrono::seconds(1)) {
    // A watch that ends at once with nothing in it (a proxy cutting it): do not spin.
    sleepBackoff();
  }
  return false;
}

void Informer::run() {
  bool needList = true;
  auto stopping = [this] {
    std::lock_guard lock(stopMu_);
    return stopping_;
  };
  while (!stopping()) {
    if (needList) {
      auto listed = relist();
      if (!listed) {
        {
          std::lock_guard lock(mu_);
          ++stats_.failures;
        }
        failed(listed.error());
        sleepBackoff();
        continue;
      }
      answered();
      backoffMs_ = 0;
      needList = false;
    }
    auto watched = watchOnce();
    if (stopping()) break;
    if (!watched) {
      {
        std::lock_guard lock(mu_);
        ++stats_.failures;
      }
      failed(watched.error());
      sleepBackoff();
      continue;
    }
    answered();
    if (*watched) {
      std::lock_guard lock(mu_);
      ++stats_.relists;
      needList = true;
    }
  }
}

void Informer::failed(const Error& e) {
  ++failedInARow_;
  if (!answering_) return;  // told already
  answering_ = false;
  if (options_.onHealth) options_.onHealth(false, options_.path + ": " + e.message);
}

void Informer::answered() {
  if (failedInARow_ > 0 && options_.onHealth) {
    options_.onHealth(true, options_.path + " answers again after " +
                                std::to_string(failedInARow_) + " failed attempt" +
                                (failedInARow_ == 1 ? "" : "s"));
  }
  answering_ = true;
  failedInARow_ = 0;
}

}  // namespace tessera::k8s
