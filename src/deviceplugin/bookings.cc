#include "deviceplugin/bookings.h"

#include <httplib.h>

#include <mutex>

#include <nlohmann/json.hpp>

namespace tessera::deviceplugin {
namespace {

using nlohmann::json;

Result<std::string> text(const json& obj, const char* key, const std::string& path,
                         bool required = true) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (!required) return std::string();
    return fail(Error::invalid(path + "." + key + ": missing"));
  }
  if (!it->is_string()) return fail(Error::invalid(path + "." + key + ": expected text"));
  return it->get<std::string>();
}

Result<std::int64_t> integer(const json& obj, const char* key, const std::string& path,
                             std::int64_t fallback) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) {
    return fail(Error::invalid(path + "." + key + ": expected an integer"));
  }
  return it->get<std::int64_t>();
}

class ControlPlaneBookings final : public BookingSource {
 public:
  explicit ControlPlaneBookings(ControlPlaneBookingsConfig config) : config_(std::move(config)) {}

  Result<std::vector<Booking>> bookings() override {
    std::lock_guard lock(mu_);
    auto& c = client();
    const std::string path = "/api/v1/nodes/" + config_.node + "/allocations";
    auto res = c.Get(path, headers());
    if (!res) {
      return fail(Error::internal("control plane " + config_.url + path + ": " +
                                  httplib::to_string(res.error())));
    }
    if (res->status != 200) {
      return fail(Error::internal("control plane " + config_.url + path + ": HTTP " +
                                  std::to_string(res->status) + ": " + res->body));
    }
    const json body = json::parse(res->body, nullptr, false);
    if (body.is_discarded()) {
      return fail(Error::internal("control plane " + config_.url + path + ": not JSON"));
    }
    return parseBookings(body);
  }

  Result<void> confirm(const Confirmation& confirmation) override {
    std::lock_guard lock(mu_);
    auto& c = client();
    const std::string path = "/api/v1/nodes/" + config_.node + "/allocations";
    const json body = {{"replica", confirmation.replica},
                       {"devices", confirmation.deviceIds},
                       {"gpus", confirmation.gpuIds}};
    auto res = c.Post(path, headers(), body.dump(), "application/json");
    if (!res) {
      return fail(Error::internal("control plane " + config_.url + path + ": " +
                                  httplib::to_string(res.error())));
    }
    if (res->status == 404) {
      return fail(Error::notFound("control plane: " + res->body));
    }
    if (res->status != 200) {
      return fail(Error::precondition("control plane refused the confirmation (HTTP " +
                                      std::to_string(res->status) + "): " + res->body));
    }
    return {};
  }

 private:
  httplib::Client& client() {
    if (!client_) {
      client_ = std::make_unique<httplib::Client>(config_.url);
      const auto seconds = config_.timeoutMs / 1000;
      const auto micros = (config_.timeoutMs % 1000) * 1000;
      client_->set_connection_timeout(seconds, micros);
      client_->set_read_timeout(seconds, micros);
      client_->set_write_timeout(seconds, micros);
      if (!config_.caFile.empty()) client_->set_ca_cert_path(config_.caFile.c_str());
    }
    return *client_;
  }
  httplib::Headers headers() const {
    if (config_.token.empty()) return {};
    return {{"Authorization", "Bearer " + config_.token}};
  }

  ControlPlaneBookingsConfig config_;
  std::mutex mu_;  // httplib's client is not safe for concurrent use
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace

Result<std::vector<Booking>> parseBookings(const json& body) {
  if (!body.is_object()) return fail(Error::invalid("body: expected an object"));
  const auto list = body.find("allocations");
  if (list == body.end() || !list->is_array()) {
    return fail(Error::invalid("allocations: expected an array"));
  }
  std::vector<Booking> out;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& a = (*list)[i];
    const std::string path = "allocations[" + std::to_string(i) + "]";
    if (!a.is_object()) return fail(Error::invalid(path + ": expected an object"));
    Booking b;
    auto replica = text(a, "replica", path);
    auto resource = text(a, "resource", path);
    auto mode = text(a, "mode", path);
    for (auto* r : {&replica, &resource, &mode}) {
      if (!*r) return fail(r->error());
    }
    b.replica = *replica;
    b.resource = *resource;
    b.mode = *mode;
    auto placed = integer(a, "placedAtMs", path, 0);
    if (!placed) return fail(placed.error());
    b.placedAtMs = *placed;
    if (const auto c = a.find("confirmed"); c != a.end() && c->is_boolean()) {
      b.confirmed = c->get<bool>();
    }
    const auto gpus = a.find("gpus");
    if (gpus == a.end() || !gpus->is_array() || gpus->empty()) {
      return fail(Error::invalid(path + ".gpus: expected a non-empty array"));
    }
    for (std::size_t j = 0; j < gpus->size(); ++j) {
      const json& g = (*gpus)[j];
      const std::string gpath = path + ".gpus[" + std::to_string(j) + "]";
      if (!g.is_object()) return fail(Error::invalid(gpath + ": expected an object"));
      BookedGpu bg;
      auto id = text(g, "id", gpath);
      if (!id) return fail(id.error());
      bg.gpuId = *id;
      auto mib = integer(g, "reservedMib", gpath, 0);
      auto milli = integer(g, "computeMilli", gpath, 0);
      auto start = integer(g, "migStart", gpath, -1);
      for (auto* r : {&mib, &milli, &start}) {
        if (!*r) return fail(r->error());
      }
      bg.memoryMib = *mib;
      bg.computeMilli = static_cast<std::int32_t>(*milli);
      bg.migStart = static_cast<int>(*start);
      auto profile = text(g, "migProfile", gpath, false);
      if (!profile) return fail(profile.error());
      bg.migProfile = *profile;
      b.gpus.push_back(std::move(bg));
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::unique_ptr<BookingSource> controlPlaneBookings(ControlPlaneBookingsConfig config) {
  return std::make_unique<ControlPlaneBookings>(std::move(config));
}

}  // namespace tessera::deviceplugin
