// The test API server's HTTP routes: list (paged, selectors), watch (bookmarks, 410 Gone on a
// compacted resourceVersion), get, create, update (optimistic concurrency), patch, delete,
// bindings and leases, answered with the real server's status codes and Status bodies.

#include <algorithm>
#include <chrono>

#include <httplib.h>

#include "k8s/testing/fake_apiserver.h"
#include "k8s/testing/fake_apiserver_wire.h"

namespace tessera::k8s::testing {

using nlohmann::json;
using namespace wire;

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
