#include "api/http_server.h"

#include <algorithm>
#include <chrono>
#include <regex>
#include <thread>
#include <type_traits>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/http_helpers.h"
#include "api/json_api.h"
#include "api/json_body.h"
#include "api/ui.h"
#include "common/listen_socket.h"
#include "common/text.h"

namespace tessera::api {
namespace {

using nlohmann::json;

const char* codeName(ErrorCode c) {
  switch (c) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kAlreadyExists:
      return "already_exists";
    case ErrorCode::kFailedPrecondition:
      return "failed_precondition";
    case ErrorCode::kResourceExhausted:
      return "does_not_fit";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "internal";
}

void sendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void sendError(httplib::Response& res, int status, std::string_view code, std::string_view message,
               const json& detail = nullptr) {
  json body = {{"error", {{"code", code}, {"message", message}}}};
  if (!detail.is_null()) body["error"]["detail"] = detail;
  sendJson(res, status, body);
}

void sendError(httplib::Response& res, const Error& e, const json& detail = nullptr) {
  sendError(res, httpStatusFor(e.code), codeName(e.code), e.message, detail);
}

// The leadership gate's answer: kube-scheduler, the agents and clients retry (at the leader,
// once the Service routes there).
void sendNotLeader(httplib::Response& res, const NotLeader& refused) {
  res.set_header("Retry-After", "1");
  sendError(res, 503, "not_leader", refused.message);
}

// application/json, or a JSON-based type (RFC 6839 "+json"); parameters and case ignored.
bool jsonMediaType(std::string_view contentType) {
  std::string type = lowerAscii(contentType.substr(0, contentType.find(';')));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.pop_back();
  return type == "application/json" ||
         (type.starts_with("application/") && type.ends_with("+json"));
}

// The body as JSON; answers 400/415 itself and returns nullopt when it is not.
std::optional<json> body(const httplib::Request& req, httplib::Response& res) {
  const std::string type = req.get_header_value("Content-Type");
  // No body and no type: the JSON parser says that a body is needed.
  if (!jsonMediaType(type) && !(type.empty() && req.body.empty())) {
    sendError(res, 415, "unsupported_media_type",
              type.empty() ? "body: send Content-Type: application/json"
                           : "body: Content-Type must be application/json, got " + type);
    return std::nullopt;
  }
  auto parsed = parseJsonBody(req.body);
  if (!parsed) {
    sendError(res, parsed.error());
    return std::nullopt;
  }
  return std::move(*parsed);
}

bool mutating(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "DELETE" || method == "PATCH";
}

// Constant-time comparison, so the token cannot be guessed byte by byte from timings.
bool sameToken(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

// RFC 9110 §8.6: Content-Length is 1*DIGIT, and several must agree. httplib reads "-5" as a
// length of 2^64 - 5 and answers 413 once its read times out.
bool validContentLength(const httplib::Request& req) {
  const auto [first, last] = req.headers.equal_range("Content-Length");
  for (auto it = first; it != last; ++it) {
    const std::string& v = it->second;
    if (v.empty() || v.size() > 19 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        v != first->second) {
      return false;
    }
  }
  return true;
}

// The credentials of `Authorization: Bearer <token>`; RFC 7235 §2.1: the scheme is
// case-insensitive, and one or more spaces follow it.
std::optional<std::string_view> bearerToken(std::string_view auth) {
  const std::size_t space = auth.find(' ');
  if (space == std::string_view::npos || lowerAscii(auth.substr(0, space)) != "bearer") {
    return std::nullopt;
  }
  std::string_view token = auth.substr(space);
  while (token.starts_with(' ')) token.remove_prefix(1);
  return token;
}

}  // namespace

HttpServer::HttpServer(ControlPlane& plane, ServerConfig config)
    : config_(std::move(config)),
      dispatcher_(plane, {.leader = config_.leader, .leaderName = config_.leaderName}) {}

HttpServer::~HttpServer() {
  stop();
}

Result<int> HttpServer::start() {
  if (config_.tlsCertFile.empty() != config_.tlsKeyFile.empty()) {
    return fail(Error::invalid("TLS needs both a certificate and a key file"));
  }
  if (!config_.tlsCertFile.empty()) {
    auto tls = std::make_unique<httplib::SSLServer>(config_.tlsCertFile.c_str(),
                                                    config_.tlsKeyFile.c_str());
    if (!tls->is_valid()) {
      return fail(Error::invalid("TLS: cannot load certificate " + config_.tlsCertFile +
                                 " with key " + config_.tlsKeyFile));
    }
    server_ = std::move(tls);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  // One port, one server: a port another process listens on is an error at bind, not a share.
  server_->set_socket_options(exclusiveListenOptions);
  const int threads = std::max(1, config_.threads);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(config_.maxBodyBytes);
  // Answers go out as several small writes (headers, body): without TCP_NODELAY, Nagle's
  // algorithm holds the last one until the client's delayed ACK, 40 ms later, on every
  // keep-alive request. And keep connections for many requests (httplib closes them after 5
  // by default), as kube-scheduler sends two calls per pod on one connection.
  server_->set_tcp_nodelay(true);
  server_->set_keep_alive_max_count(10'000);
  routes();
  int port = config_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(config_.host);
    if (port < 0) return fail(Error::invalid("cannot bind " + config_.host + " to any port"));
  } else if (!server_->bind_to_port(config_.host, port)) {
    return fail(Error::invalid("cannot listen on " + config_.host + ":" + std::to_string(port) +
                               " (in use, or not allowed)"));
  }
  thread_ = listenInBackground(*server_);
  ready_ = true;
  return port;
}

void HttpServer::stop() {
  ready_ = false;
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpServer::routes() {
  httplib::Server& s = *server_;
  using Req = httplib::Request;
  using Res = httplib::Response;

  s.set_pre_routing_handler([this](const Req& req, Res& res) {
    assumeNoBodyWithoutLength(req);  // `curl -X POST .../cordon` is served at once
    if (!validContentLength(req)) {
      // Answered before the body is read: there is no telling where it ends.
      res.set_header("Connection", "close");
      sendError(res, 400, "bad_request",
                "Content-Length: expected one non-negative whole number, got \"" +
                    req.get_header_value("Content-Length") + "\"");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (config_.token && mutating(req.method) && req.path.starts_with("/api/")) {
      const std::string auth = req.get_header_value("Authorization");
      const auto token = bearerToken(auth);
      if (!token || !sameToken(*token, *config_.token)) {
        res.set_header("WWW-Authenticate", "Bearer");
        sendError(res, 401, "unauthenticated",
                  auth.empty() ? "this call changes state: send Authorization: Bearer <token>"
                               : "the bearer token is not valid");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // Every POST and DELETE here (the extender's filter and prioritize too: kube-scheduler
    // must reach the leader) is refused on a standby before its body is read. The dispatcher
    // checks again in front of every mutating call: nothing mutating gets past it.
    if (mutating(req.method) &&
        (req.path.starts_with("/api/") || req.path.starts_with("/scheduler/") ||
         req.path.starts_with("/admission/"))) {
      if (auto refused = dispatcher_.refusal()) {
        sendNotLeader(res, *refused);
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.set_logger([this](const Req& req, const Res& res) {
    // The route's pattern would be better than the path, but httplib does not expose it;
    // collapse the object names to keep the label set bounded.
    std::string route = req.path;
    for (const char* prefix :
         {"/api/v1/nodes/", "/api/v1/models/", "/api/v1/replicas/", "/api/v1/deployments/"}) {
      if (route.starts_with(prefix)) route = std::string(prefix) + ":name";
    }
    if (!route.starts_with("/api/") && !route.starts_with("/scheduler/") &&
        route != k8s::kAdmissionPath && route != "/metrics" && route != "/healthz" &&
        route != "/readyz") {
      route = "other";
    }
    dispatcher_.current().httpRequests.add(
        {{"method", req.method}, {"route", route}, {"code", std::to_string(res.status)}});
    if (config_.logger != nullptr && (res.status >= 400 || mutating(req.method))) {
      const nlohmann::json fields = {{"method", req.method},
                                     {"path", req.path},
                                     {"status", res.status},
                                     {"remote", req.remote_addr}};
      if (res.status >= 500) {
        config_.logger->error("request failed", fields);
      } else if (res.status >= 400) {
        config_.logger->warn("request refused", fields);
      } else {
        config_.logger->info("request", fields);
      }
    }
  });
  s.set_exception_handler([](const Req&, Res& res, std::exception_ptr) {
    sendError(res, 500, "internal", "the server failed on this request");
  });
  s.set_error_handler([this](const Req& req, Res& res) {
    if (!res.body.empty()) return;
    std::string allowed;
    if (res.status == 404) {
      for (const auto& [method, pattern] : routeTable_) {
        if (std::regex_match(req.path, pattern) && allowed.find(method) == std::string::npos) {
          allowed += (allowed.empty() ? "" : ", ") + method + (method == "GET" ? ", HEAD" : "");
        }
      }
    }
    if (!allowed.empty()) {
      res.set_header("Allow", allowed);
      sendError(res, 405, "method_not_allowed",
                req.method + " " + req.path + ": this route takes " + allowed);
    } else if (res.status == 404) {
      sendError(res, 404, "not_found", "no route " + req.method + " " + req.path);
    } else if (res.status == 413) {
      sendError(res, 413, "payload_too_large", "body: larger than the server accepts");
    } else if (res.status >= 400) {
      sendError(res, res.status, "bad_request",
                "the request could not be read (malformed HTTP, or a body shorter than its "
                "Content-Length)");
    }
  });

  for (const std::string& pattern :
       ui::addRoutes(s, {.demo = config_.demo, .version = TESSERA_VERSION})) {
    routeTable_.emplace_back("GET", std::regex(pattern));
  }
  // Registers a route, and notes it for the 405 answers.
  auto on = [this, &s](const std::string& method, const std::string& pattern,
                       httplib::Server::Handler handler) {
    routeTable_.emplace_back(method, std::regex(pattern));
    if (method == "GET") {
      s.Get(pattern, std::move(handler));
    } else if (method == "POST") {
      s.Post(pattern, std::move(handler));
    } else {
      s.Delete(pattern, std::move(handler));
    }
  };
  on("GET", "/healthz", [](const Req&, Res& res) { res.set_content("ok\n", "text/plain"); });
  on("GET", "/readyz", [this](const Req&, Res& res) {
    res.status = ready_ ? 200 : 503;
    res.set_content(ready_ ? "ready\n" : "not ready\n", "text/plain");
  });
  on("GET", "/metrics", [this](const Req&, Res& res) {
    res.set_content(dispatcher_.read([](ControlPlane& p) { return p.metricsText(); }),
                    "text/plain; version=0.0.4; charset=utf-8");
  });

  // Handlers that return a Result<T>: `read` ones through the dispatcher's read path, the others
  // through its write path (the leadership gate, the writer lock). T is a JSON view, or a typed
  // result that `answer` encodes once the locks are let go.
  auto run = [this](bool read, const auto& fn) {
    using Out = std::invoke_result_t<decltype(fn), ControlPlane&>;
    if (read) {
      return std::expected<Out, NotLeader>(
          std::in_place, dispatcher_.read([&](ControlPlane& p) -> Out { return fn(p); }));
    }
    return dispatcher_.write([&](ControlPlane& p) -> Out { return fn(p); });
  };
  auto answer = [](Res& res, int okStatus, const auto& out) {
    if (!out) return sendNotLeader(res, out.error());
    if (!*out) return sendError(res, out->error());
    sendJson(res, okStatus, json_api::encode(**out));
  };
  // Operations on a body: `decode(body)` makes it the typed request before any lock is taken
  // (a malformed body never waits for or holds up a writer); `fn(plane, request, decoded)`
  // then runs through the dispatcher. A body that does not decode is answered with its error,
  // unless `missing(plane, request)` (a read; nullptr for a path that names nothing) says what
  // the path names does not exist: the 404 that the plane answers before it looks at a body.
  auto decoding = [this, run, answer](int okStatus, auto decode, auto missing, auto fn,
                                      bool read = false) {
    return [this, run, answer, okStatus, decode, missing, fn, read](const Req& req, Res& res) {
      auto parsed = body(req, res);
      if (!parsed) return;
      auto decoded = decode(*parsed);
      if (!decoded) {
        if constexpr (!std::is_null_pointer_v<decltype(missing)>) {
          const std::optional<Error> absent =
              dispatcher_.read([&](ControlPlane& p) { return missing(p, req); });
          if (absent) return sendError(res, *absent);
        }
        return sendError(res, decoded.error());
      }
      answer(res, okStatus, run(read, [&](ControlPlane& p) { return fn(p, req, *decoded); }));
    };
  };
  auto node = [](const ControlPlane& p, const Req& r) { return p.unknownNode(r.matches[1].str()); };
  // The catalogue is immutable: read with no lock.
  auto catalog = [this]() -> const model::GpuCatalog& { return dispatcher_.current().catalog(); };
  // fn(plane, request)
  auto reading = [run, answer](auto fn) {
    return [run, answer, fn](const Req& req, Res& res) {
      answer(res, 200, run(true, [&](ControlPlane& p) { return fn(p, req); }));
    };
  };
  auto writing = [run, answer](int okStatus, auto fn) {
    return [run, answer, okStatus, fn](const Req& req, Res& res) {
      answer(res, okStatus, run(false, [&](ControlPlane& p) { return fn(p, req); }));
    };
  };
  using R = Result<json>;
  using P = ControlPlane;

  on("GET", "/api/v1/nodes", reading([](P& p, const Req&) -> R { return p.listNodes(); }));
  on("GET", R"(/api/v1/nodes/([^/]+))",
     reading([](P& p, const Req& r) { return p.getNode(r.matches[1].str()); }));
  on("POST", "/api/v1/nodes",
     decoding(
         201, [catalog](const json& b) { return json_api::decodeRegisterNode(b, catalog()); },
         nullptr, [](P& p, const Req&, RegisterNode& n) { return p.registerNode(std::move(n)); }));
  on("POST", R"(/api/v1/nodes/([^/]+)/heartbeat)",
     decoding(200, json_api::decodeHeartbeat, node, [](P& p, const Req& r, Heartbeat& h) {
       return p.heartbeat(r.matches[1].str(), std::move(h));
     }));
  on("POST", R"(/api/v1/nodes/([^/]+)/cordon)",
     writing(200, [](P& p, const Req& r) { return p.setCordoned(r.matches[1].str(), true); }));
  on("POST", R"(/api/v1/nodes/([^/]+)/drain)",
     writing(200, [](P& p, const Req& r) { return p.drainNode(r.matches[1].str()); }));
  on("POST", R"(/api/v1/nodes/([^/]+)/uncordon)",
     writing(200, [](P& p, const Req& r) { return p.setCordoned(r.matches[1].str(), false); }));
  on("GET", R"(/api/v1/nodes/([^/]+)/allocations)",
     reading([](P& p, const Req& r) { return p.nodeAllocations(r.matches[1].str()); }));
  on("POST", R"(/api/v1/nodes/([^/]+)/allocations)",
     decoding(200, json_api::decodeConfirmAllocation, node,
              [](P& p, const Req& r, const ConfirmAllocation& a) {
                return p.confirmAllocation(r.matches[1].str(), a);
              }));
  on("DELETE", R"(/api/v1/nodes/([^/]+))", writing(200, [](P& p, const Req& r) {
       return p.removeNode(r.matches[1].str(), r.get_param_value("force") == "true");
     }));

  on("GET", "/api/v1/models", reading([](P& p, const Req&) -> R { return p.listModels(); }));
  on("GET", R"(/api/v1/models/([^/]+))",
     reading([](P& p, const Req& r) { return p.getModel(r.matches[1].str()); }));
  on("POST", "/api/v1/models",
     decoding(200, json_api::decodePutModel, nullptr,
              [](P& p, const Req&, PutModel& m) { return p.putModel(std::move(m)); }));
  on("DELETE", R"(/api/v1/models/([^/]+))",
     writing(200, [](P& p, const Req& r) { return p.deleteModel(r.matches[1].str()); }));

  on("GET", "/api/v1/replicas", reading([](P& p, const Req&) -> R { return p.listReplicas(); }));
  on("POST", "/api/v1/replicas", [this, catalog](const Req& req, Res& res) {
    auto parsed = body(req, res);
    if (!parsed) return;
    auto request = json_api::decodePlaceReplicas(*parsed, catalog());
    if (!request) return sendError(res, request.error());
    auto out = dispatcher_.write([&](P& p) { return p.placeReplicas(std::move(*request)); });
    if (!out) return sendNotLeader(res, out.error());
    if (!*out) return sendError(res, out->error().error, out->error().detail);
    sendJson(res, 201, **out);
  });
  on("POST", R"(/api/v1/replicas/(.+)/loaded)",
     writing(200, [](P& p, const Req& r) { return p.replicaLoaded(r.matches[1].str()); }));
  on("GET", R"(/api/v1/replicas/(.+))",
     reading([](P& p, const Req& r) { return p.getReplica(r.matches[1].str()); }));
  on("DELETE", R"(/api/v1/replicas/(.+))",
     writing(200, [](P& p, const Req& r) { return p.removeReplica(r.matches[1].str()); }));
  on("GET", "/api/v1/deployments",
     reading([](P& p, const Req&) -> R { return p.listDeployments(); }));
  on("GET", R"(/api/v1/deployments/([^/]+))",
     reading([](P& p, const Req& r) { return p.getDeployment(r.matches[1].str()); }));
  on("POST", "/api/v1/deployments", [this](const Req& req, Res& res) {
    auto parsed = body(req, res);
    if (!parsed) return;
    auto request = json_api::decodePutDeployment(*parsed);
    if (!request) return sendError(res, request.error());
    bool existed = false;
    auto out = dispatcher_.write([&](P& p) {
      existed = p.hasDeployment(request->spec.name);
      return p.putDeployment(std::move(*request));
    });
    if (!out) return sendNotLeader(res, out.error());
    if (!*out) return sendError(res, out->error());
    sendJson(res, existed ? 200 : 201, **out);
  });
  on("DELETE", R"(/api/v1/deployments/([^/]+))",
     writing(200, [](P& p, const Req& r) { return p.deleteDeployment(r.matches[1].str()); }));
  on("POST", R"(/api/v1/deployments/([^/]+)/signals)",
     decoding(
         200, json_api::decodeDeploymentSignals,
         [](const P& p, const Req& r) { return p.unknownDeployment(r.matches[1].str()); },
         [](P& p, const Req& r, const ReportDeploymentSignals& s) {
           return p.deploymentSignals(r.matches[1].str(), s);
         }));
  on("POST", R"(/api/v1/replicas/(.+)/signals)",
     decoding(
         200, json_api::decodeReplicaSignals,
         [](const P& p, const Req& r) { return p.unknownReplica(r.matches[1].str()); },
         [](P& p, const Req& r, const ReportReplicaSignals& s) {
           return p.replicaSignals(r.matches[1].str(), s);
         }));
  // A POST that books nothing: a read.
  on("POST", "/api/v1/explain",
     decoding(
         200, [catalog](const json& b) { return json_api::decodePlaceReplicas(b, catalog()); },
         nullptr, [](P& p, const Req&, PlaceReplicas& r) { return p.explain(std::move(r)); },
         /*read=*/true));
  on("GET", "/api/v1/events", [this](const Req& req, Res& res) {
    std::int64_t after = 0;
    std::size_t limit = 500;
    try {
      if (req.has_param("after")) after = std::stoll(req.get_param_value("after"));
      if (req.has_param("limit")) limit = std::stoul(req.get_param_value("limit"));
    } catch (const std::exception&) {
      return sendError(res, 400, "invalid_argument", "after and limit must be whole numbers");
    }
    sendJson(res, 200, dispatcher_.read([&](P& p) {
      return p.events(after, std::min<std::size_t>(limit, 5000));
    }));
  });

  // kube-scheduler extender (KubeSchedulerConfiguration extenders[].urlPrefix = .../scheduler).
  // `call(plane)` returns the answer through the dispatcher (std::expected<Result<json>,
  // NotLeader>); the body is parsed and the answer serialised outside its locks.
  auto verb = [this](std::string name, auto call) {
    return [this, name, call](const Req& req, Res& res) {
      const auto start = std::chrono::steady_clock::now();
      auto parsed = body(req, res);
      if (!parsed) return;
      const std::expected<Result<json>, NotLeader> out = call(*parsed);
      if (!out) {
        sendNotLeader(res, out.error());
      } else if (!*out) {
        sendError(res, out->error());
      } else {
        sendJson(res, 200, **out);
      }
      // The instruments are thread-safe: no lock of the dispatcher's.
      dispatcher_.current().extenderLatency.observe(
          {{"verb", name}},
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    };
  };
  // The claim webhook: the pod read and the event run outside the dispatcher's locks; the
  // booking takes them (writeAround), and its store write (onto the pod) runs with them
  // released, as bind's does.
  on("POST", std::string(k8s::kAdmissionPath), [this](const Req& req, Res& res) {
    auto parsed = body(req, res);
    if (!parsed) return;
    auto answer = [&](const json& review) {
      const json& r = review["response"];
      const char* outcome = r.contains("patch")          ? "pinned"
                            : !r.value("allowed", false) ? "refused"
                            : r.contains("warnings")     ? "not_pinned"
                                                         : "passed";
      dispatcher_.current().claimAdmissions.add({{"outcome", outcome}});
      sendJson(res, 200, review);
    };
    if (config_.admission == nullptr) {
      auto review = k8s::readAdmissionReview(*parsed);
      if (!review) return sendError(res, review.error());
      return answer(k8s::admissionAnswer(review->uid, true, nullptr, {config_.admissionOff}));
    }
    auto out = config_.admission->review(*parsed, [this](const json& pod) -> Result<json> {
      auto booked = dispatcher_.writeAround([&](P& p, const k8s::OutsideLock& outside) {
        return p.bookClaim(pod, outside, /*podExists=*/true);
      });
      if (!booked) return fail(Error::precondition("not booked: " + booked.error().message));
      return std::move(*booked);
    });
    if (!out) return sendError(res, out.error());
    answer(*out);
  });
  // filter, prioritize and preempt book nothing: reads (preempt's copy of the state too, which
  // then holds up no writer's persist).
  on("POST", "/scheduler/filter", verb("filter", [this](const json& b) {
       return std::expected<Result<json>, NotLeader>(
           std::in_place, dispatcher_.read([&](P& p) { return p.extender().filter(b); }));
     }));
  on("POST", "/scheduler/prioritize", verb("prioritize", [this](const json& b) {
       return std::expected<Result<json>, NotLeader>(
           std::in_place, dispatcher_.read([&](P& p) { return p.extender().prioritize(b); }));
     }));
  on("POST", "/scheduler/preempt", verb("preempt", [this](const json& b) {
       return std::expected<Result<json>, NotLeader>(
           std::in_place, dispatcher_.read([&](P& p) { return p.extender().preempt(b); }));
     }));
  // bind: assumed on the writer path; its store write and Binding POST (up to 3 s) run with
  // the dispatcher's locks released, so other calls, writers included, go on meanwhile; the
  // plane bound is the one the call started on.
  on("POST", "/scheduler/bind", verb("bind", [this](const json& b) {
       return dispatcher_.writeAround(
           [&](P& p, const k8s::OutsideLock& outside) { return p.extenderBind(b, outside); });
     }));
}

}  // namespace tessera::api
