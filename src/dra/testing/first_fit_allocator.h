#pragma once
// An allocator written from the DRA rules (KEP-4381 structured parameters, KEP-5075
// consumable capacity), independent of everything in src/dra, to check the claims Tessera
// writes against what kube-scheduler's allocator would do (tests only).
//
// What it models:
//  - devices from ResourceSlices (resource.k8s.io/v1), in slice order and device order:
//    first fit, as the upstream allocator keeps the first solution in listing order;
//  - a request `exactly` with a deviceClassName, CEL selectors (the class's and the
//    request's), ExactCount 1, and capacity.requests;
//  - CEL: a conjunction (&&) of comparisons `device.driver == '<d>'` and
//    `device.attributes['<domain>'].<name> == <string or integer literal>` — what Tessera's
//    classes and claims use; anything else is reported as unsupported, not guessed. A
//    missing attribute is an error, absorbed by a false term of the conjunction (CEL's &&)
//    and otherwise failing the claim, as a CEL runtime error fails scheduling;
//  - consumable capacity: on a device with allowMultipleAllocations each claim consumes,
//    per capacity, its request (or the request policy's default, or the whole capacity when
//    neither), rounded up to the validRange step above its min; the sum over allocated
//    claims stays within the capacity's value. A device without allowMultipleAllocations
//    goes to one claim whole;
//  - taints NoSchedule / NoExecute: the device is skipped (no tolerations modelled).
// Not modelled: backtracking over several requests (Tessera pins each request to one
// device, so the first fit is the only fit), constraints, counters, admin access.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "k8s/quantity.h"

namespace tessera::dra::testing {

class FirstFitAllocator {
 public:
  struct Allocation {
    std::string request, pool, device;
    std::map<std::string, double> consumed;
  };
  struct Outcome {
    bool ok = false;
    std::string why;  // when not ok
    std::vector<Allocation> results;
  };

  // Adds the slice's devices, or none when the API server would refuse the slice for a
  // capacity's request policy (resource.k8s.io/v1 validation): the answer names the device and
  // the capacity; empty when the slice is accepted. A policy needs allowMultipleAllocations; a
  // validRange needs its min and a default within [min, max], with min and min + step at most
  // the capacity's value.
  [[nodiscard]] std::string addSlice(const nlohmann::json& slice) {
    const nlohmann::json& spec = slice.at("spec");
    std::vector<Device> added;
    for (const nlohmann::json& d : spec.at("devices")) {
      Device dev;
      dev.driver = spec.at("driver").get<std::string>();
      dev.pool = spec.at("pool").at("name").get<std::string>();
      dev.name = d.at("name").get<std::string>();
      dev.object = d;
      dev.multiple = d.value("allowMultipleAllocations", false);
      const nlohmann::json taints = d.value("taints", nlohmann::json::array());
      for (const nlohmann::json& t : taints) {
        const std::string effect = t.value("effect", "");
        dev.tainted = dev.tainted || effect == "NoSchedule" || effect == "NoExecute";
      }
      const nlohmann::json caps = d.value("capacity", nlohmann::json::object());
      for (const auto& [cap, c] : caps.items()) {
        const std::string where = "device " + dev.name + ", capacity " + cap + ": ";
        Capacity x;
        x.value = quantity(c.at("value").get<std::string>());
        const nlohmann::json policy = c.value("requestPolicy", nlohmann::json::object());
        if (!policy.empty() && !dev.multiple) {
          return where + "a requestPolicy needs allowMultipleAllocations";
        }
        if (policy.contains("default"))
          x.byDefault = quantity(policy["default"].get<std::string>());
        if (const auto range = policy.find("validRange"); range != policy.end()) {
          if (!range->contains("min")) return where + "validRange.min is required";
          x.min = quantity((*range)["min"].get<std::string>());
          if (range->contains("step")) x.step = quantity((*range)["step"].get<std::string>());
          const double max =
              range->contains("max") ? quantity((*range)["max"].get<std::string>()) : x.value;
          if (!x.byDefault) return where + "a validRange needs a default";
          if (*x.byDefault < x.min || *x.byDefault > max) {
            return where + "the default is outside the validRange";
          }
          if (x.min > x.value || x.min + x.step > x.value) {
            return where + "validRange min (and min + step) must not exceed the value";
          }
        }
        dev.capacity[cap] = x;
      }
      added.push_back(std::move(dev));
    }
    for (Device& dev : added) {
      byPool_[dev.pool].push_back(devices_.size());
      devices_.push_back(std::move(dev));
    }
    return {};
  }
  void addClass(const nlohmann::json& deviceClass) {
    classes_[deviceClass.at("metadata").at("name").get<std::string>()] = deviceClass;
  }

  // Allocates `claim` from devices of pool `pool` (the node the pod is pinned to; empty: any),
  // and books it when every request found a device.
  Outcome allocate(const nlohmann::json& claim, const std::string& pool = "") {
    Outcome out;
    std::map<std::size_t, std::map<std::string, double>> taking;  // this claim's, per device
    for (const nlohmann::json& r : claim.at("spec").at("devices").at("requests")) {
      const std::string name = r.at("name").get<std::string>();
      if (!r.contains("exactly"))
        return refuse(out, name + ": only `exactly` requests are modelled");
      const nlohmann::json& ex = r.at("exactly");
      const auto cls = classes_.find(ex.value("deviceClassName", ""));
      if (cls == classes_.end()) return refuse(out, name + ": unknown device class");
      std::vector<std::string> selectors;
      const nlohmann::json& classSpec = cls->second.at("spec");
      for (const nlohmann::json* list : {&classSpec, &ex}) {
        for (const nlohmann::json& s : list->value("selectors", nlohmann::json::array())) {
          selectors.push_back(s.at("cel").at("expression").get<std::string>());
        }
      }
      const nlohmann::json wanted = ex.value("capacity", nlohmann::json::object())
                                        .value("requests", nlohmann::json::object());
      std::map<std::string, double> asked;
      for (const auto& [cap, q] : wanted.items()) asked[cap] = quantity(q.get<std::string>());
      bool found = false;
      std::vector<std::size_t> all;
      const std::vector<std::size_t>* candidates = &all;
      if (pool.empty()) {
        for (std::size_t i = 0; i < devices_.size(); ++i) all.push_back(i);
      } else if (const auto it = byPool_.find(pool); it != byPool_.end()) {
        candidates = &it->second;
      }
      for (std::size_t k = 0; k < candidates->size() && !found; ++k) {
        const std::size_t i = (*candidates)[k];
        Device& d = devices_[i];
        if (d.tainted || taking.contains(i)) continue;
        bool match = true;
        for (const std::string& expr : selectors) {
          auto cached = d.cel.find(expr);
          if (cached == d.cel.end()) cached = d.cel.emplace(expr, evaluate(expr, d)).first;
          switch (cached->second) {
            case Cel::kUnsupported:
              return refuse(out, name + ": unsupported CEL: " + expr);
            case Cel::kError:  // kube-scheduler fails the pod's scheduling on a CEL error
              return refuse(out, name + ": CEL error on device " + d.name + ": " + expr);
            case Cel::kFalse:
              match = false;
              break;
            case Cel::kTrue:
              break;
          }
        }
        if (!match) continue;
        std::map<std::string, double> consumes;
        if (!fits(d, asked, consumes)) continue;
        taking[i] = consumes;
        out.results.push_back({name, d.pool, d.name, consumes});
        found = true;
      }
      if (!found) return refuse(out, name + ": no device fits");
    }
    for (const auto& [i, consumes] : taking) {
      Device& d = devices_[i];
      ++d.claims;
      for (const auto& [cap, v] : consumes) d.consumed[cap] += v;
    }
    out.ok = true;
    return out;
  }

  // What is left of a capacity on a device (value minus consumed); nullopt: no such device.
  std::optional<double> free(const std::string& pool, const std::string& device,
                             const std::string& capacity) const {
    for (const Device& d : devices_) {
      if (d.pool != pool || d.name != device) continue;
      const nlohmann::json caps = d.object.value("capacity", nlohmann::json::object());
      const auto c = caps.find(capacity);
      if (c == caps.end()) return std::nullopt;
      const double value = quantity(c->at("value").get<std::string>());
      const auto it = d.consumed.find(capacity);
      return value - (it == d.consumed.end() ? 0 : it->second);
    }
    return std::nullopt;
  }
  // Devices with no claim at all.
  int unallocatedDevices() const {
    int n = 0;
    for (const Device& d : devices_) n += d.claims == 0 && !d.tainted ? 1 : 0;
    return n;
  }

 private:
  enum class Cel { kTrue, kFalse, kError, kUnsupported };
  struct Capacity {
    double value = 0, min = 0, step = 0;
    std::optional<double> byDefault;
  };
  struct Device {
    std::map<std::string, Capacity> capacity;
    std::map<std::string, Cel>
        cel;  // expression -> its value on this device (devices are immutable)
    std::string driver, pool, name;
    nlohmann::json object;
    bool multiple = false, tainted = false;
    int claims = 0;
    std::map<std::string, double> consumed;
  };

  static Outcome& refuse(Outcome& out, std::string why) {
    out.ok = false;
    out.why = std::move(why);
    out.results.clear();
    return out;
  }

  static double quantity(const std::string& text) {
    auto v = k8s::parseQuantity(text);
    return v ? *v : -1;
  }

  static bool fits(const Device& d, const std::map<std::string, double>& asked,
                   std::map<std::string, double>& consumes) {
    for (const auto& [cap, _] : asked) {
      if (!d.capacity.contains(cap)) return false;  // asks for a capacity the device lacks
    }
    if (!d.multiple) {
      if (d.claims > 0) return false;
      for (const auto& [cap, c] : d.capacity) {
        if (const auto it = asked.find(cap); it != asked.end() && it->second > c.value)
          return false;
        consumes[cap] = c.value;
      }
      return true;
    }
    for (const auto& [cap, c] : d.capacity) {
      double ask = c.value;
      if (const auto it = asked.find(cap); it != asked.end()) {
        ask = it->second;
      } else if (c.byDefault) {
        ask = *c.byDefault;
      }
      ask = std::max(ask, c.min);
      if (c.step > 0) ask = c.min + std::ceil((ask - c.min) / c.step - 1e-9) * c.step;
      const auto it = d.consumed.find(cap);
      const double used = it == d.consumed.end() ? 0 : it->second;
      if (used + ask > c.value + 1e-6) return false;
      consumes[cap] = ask;
    }
    return true;
  }

  static std::string trim(const std::string& s) {
    const auto a = s.find_first_not_of(' ');
    const auto b = s.find_last_not_of(' ');
    return a == std::string::npos ? "" : s.substr(a, b - a + 1);
  }

  // One conjunction of equalities. CEL's && is false when any side is false, even where
  // another side is an error (a missing attribute); else an error aborts the allocation.
  static Cel evaluate(const std::string& expr, const Device& d) {
    bool anyFalse = false, anyError = false;
    std::size_t from = 0;
    while (from <= expr.size()) {
      const std::size_t at = expr.find("&&", from);
      const std::string term =
          trim(expr.substr(from, at == std::string::npos ? std::string::npos : at - from));
      const std::size_t eq = term.find("==");
      if (eq == std::string::npos) return Cel::kUnsupported;
      const std::string lhs = trim(term.substr(0, eq));
      const std::string rhs = trim(term.substr(eq + 2));
      nlohmann::json literal;
      if (rhs.size() >= 2 && (rhs.front() == '\'' || rhs.front() == '"') &&
          rhs.back() == rhs.front()) {
        literal = rhs.substr(1, rhs.size() - 2);
      } else {
        try {
          std::size_t used = 0;
          const long long v = std::stoll(rhs, &used);
          if (used != rhs.size()) return Cel::kUnsupported;
          literal = v;
        } catch (const std::exception&) {
          return Cel::kUnsupported;
        }
      }
      nlohmann::json value;
      if (lhs == "device.driver") {
        value = d.driver;
      } else if (lhs.starts_with("device.attributes[")) {
        const std::size_t close = lhs.find("].");
        if (close == std::string::npos) return Cel::kUnsupported;
        std::string domain = lhs.substr(18, close - 18);
        if (domain.size() < 2) return Cel::kUnsupported;
        domain = domain.substr(1, domain.size() - 2);
        const std::string attr = lhs.substr(close + 2);
        const nlohmann::json attrs = d.object.value("attributes", nlohmann::json::object());
        // An attribute without a domain belongs to the device's driver.
        const nlohmann::json* a = nullptr;
        if (attrs.contains(domain + "/" + attr)) {
          a = &attrs[domain + "/" + attr];
        } else if (domain == d.driver && attrs.contains(attr)) {
          a = &attrs[attr];
        }
        if (a != nullptr) {
          for (const char* kind : {"string", "int", "bool", "version"}) {
            if (a->contains(kind)) value = (*a)[kind];
          }
        }
      } else {
        return Cel::kUnsupported;
      }
      if (value.is_null()) {
        anyError = true;  // no such attribute on this device
      } else if (value != literal) {
        anyFalse = true;
      }
      if (at == std::string::npos) break;
      from = at + 2;
    }
    return anyFalse ? Cel::kFalse : anyError ? Cel::kError : Cel::kTrue;
  }

  std::vector<Device> devices_;
  std::map<std::string, std::vector<std::size_t>> byPool_;
  std::map<std::string, nlohmann::json> classes_;
};

}  // namespace tessera::dra::testing
