#include "k8s/leader_election.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>

namespace tessera::k8s {
namespace {

using nlohmann::json;

// metav1.MicroTime: RFC 3339 with microseconds, UTC.
std::string microTimeNow() {
  const auto now = std::chrono::system_clock::now();
  const auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%06lldZ", date, static_cast<long long>(us % 1000000));
  return out;
}

std::string holderOf(const json& lease) {
  const auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) return "";
  const auto h = spec->find("holderIdentity");
  return h != spec->end() && h->is_string() ? h->get<std::string>() : "";
}

std::string specText(const json& lease) {
  const auto spec = lease.find("spec");
  return spec == lease.end() ? "" : spec->dump();
}

}  // namespace

Result<void> validate(const LeaderElectionConfig& c) {
  if (c.ns.empty()) return fail(Error::invalid("leader election: the lease namespace is empty"));
  if (c.name.empty()) return fail(Error::invalid("leader election: the lease name is empty"));
  if (c.retryPeriodMs <= 0) {
    return fail(Error::invalid("leader election: retry period must be > 0"));
  }
  if (c.renewDeadlineMs * 10 <= c.retryPeriodMs * 12) {
    return fail(Error::invalid("leader election: renew deadline (" +
                               std::to_string(c.renewDeadlineMs) +
                               " ms) must be more than 1.2 × the retry period (" +
                               std::to_string(c.retryPeriodMs) + " ms)"));
  }
  if (c.leaseDurationMs <= c.renewDeadlineMs) {
    return fail(Error::invalid("leader election: lease duration (" +
                               std::to_string(c.leaseDurationMs) +
                               " ms) must be more than the renew deadline (" +
                               std::to_string(c.renewDeadlineMs) + " ms)"));
  }
  if (c.leaseDurationMs % 1000 != 0) {
    return fail(Error::invalid(
        "leader election: lease duration must be whole seconds (the Lease stores seconds)"));
  }
  return {};
}

std::string defaultLeaderIdentity() {
  std::string base;
  if (const char* pod = std::getenv("POD_NAME"); pod != nullptr && *pod != '\0') base = pod;
  if (base.empty()) {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0) base = host;
  }
  if (base.empty()) base = "tessera";
  std::random_device rd;
  const std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(r));
  return base + "_" + suffix;
}

int leaderElectionTimeoutMs(const LeaderElectionConfig& config) {
  return static_cast<int>(std::max<Millis>(1000, config.renewDeadlineMs / 2));
}

Result<std::unique_ptr<LeaderElector>> LeaderElector::create(KubeClient& client,
                                                             LeaderElectionConfig config,
                                                             const Clock& clock) {
  if (config.identity.empty()) config.identity = defaultLeaderIdentity();
  TESSERA_RETURN_IF_ERROR(validate(config));
  return std::unique_ptr<LeaderElector>(new LeaderElector(client, std::move(config), clock));
}

LeaderElector::LeaderElector(KubeClient& client, LeaderElectionConfig config, const Clock& clock)
    : client_(client), config_(std::move(config)), clock_(clock) {}

std::string LeaderElector::leaseName() const {
  return config_.ns + "/" + config_.name;
}

std::string LeaderElector::leasePath(bool collection) const {
  std::string p = "/apis/coordination.k8s.io/v1/namespaces/" + config_.ns + "/leases";
  if (!collection) p += "/" + config_.name;
  return p;
}

json LeaderElector::record(const json* previous, bool releasing) const {
  const std::string now = microTimeNow();
  json spec = json::object();
  std::int64_t transitions = 0;
  std::string acquired = now;
  if (previous != nullptr) {
    const json& old = (*previous)["spec"];
    if (old.is_object()) {
      transitions = old.value("leaseTransitions", std::int64_t{0});
      if (old.value("holderIdentity", "") == config_.identity) {
        acquired = old.value("acquireTime", now);
      } else if (!releasing) {
        ++transitions;
      }
    }
  }
  spec["holderIdentity"] = releasing ? "" : config_.identity;
  spec["leaseDurationSeconds"] = releasing ? 1 : config_.leaseDurationMs / 1000;
  spec["acquireTime"] = acquired;
  spec["renewTime"] = now;
  spec["leaseTransitions"] = transitions;
  json lease = previous != nullptr ? *previous : json::object();
  lease["apiVersion"] = "coordination.k8s.io/v1";
  lease["kind"] = "Lease";
  lease["metadata"]["name"] = config_.name;
  lease["metadata"]["namespace"] = config_.ns;
  lease["spec"] = std::move(spec);
  return lease;
}

void LeaderElector::observe(const json& lease) {
  // Caller holds mu_.
  const std::string spec = specText(lease);
  if (!observed_ || spec != observedSpec_) {
    observedSpec_ = spec;
    observedAtMs_ = clock_.nowMs();
  }
  observed_ = lease;
}

// PUT with the lease's resourceVersion: the stored lease on 200, nullopt on 409 Conflict.
Result<std::optional<json>> LeaderElector::put(const json& lease) {
  auto r = client_.request("PUT", leasePath(false), lease.dump());
  if (!r) return fail(r.error());
  if (r->status == 409) return std::optional<json>();
  if (r->status != 200) {
    return fail(Error::internal("renewing lease " + leaseName() + ": " + describeFailure(*r)));
  }
  json stored = json::parse(r->body, nullptr, false);
  if (stored.is_discarded() || !stored.is_object()) {
    return fail(
        Error::internal("lease " + leaseName() + ": the API server answered a PUT with no object"));
  }
  return std::optional<json>(std::move(stored));
}

// GET: the lease on 200, nullopt on 404.
Result<std::optional<json>> LeaderElector::get() {
  auto r = client_.request("GET", leasePath(false));
  if (!r) return fail(r.error());
  if (r->status == 404) return std::optional<json>();
  if (r->status != 200) {
    return fail(Error::internal("reading lease " + leaseName() + ": " + describeFailure(*r)));
  }
  json lease = json::parse(r->body, nullptr, false);
  if (lease.is_discarded() || !lease.is_object()) {
    return fail(
        Error::internal("lease " + leaseName() + ": the API server's answer is not a JSON object"));
  }
  return std::optional<json>(std::move(lease));
}

Result<bool> LeaderElector::tryAcquireOrRenew() {
  std::optional<json> previous;
  {
    std::lock_guard lock(mu_);
    previous = observed_;
  }
  // 1. The leader's fast path: renew from the cached record, no GET.
  if (previous && holderOf(*previous) == config_.identity) {
    auto stored = put(record(&*previous, false));
    if (stored && *stored) {
      std::lock_guard lock(mu_);
      observe(**stored);
      renewedAtMs_ = clock_.nowMs();
      return true;
    }
    // Conflict or failure: read the lease and decide from what it holds now.
  }
  // 2. Read it; create it when absent.
  auto got = get();
  if (!got) return fail(got.error());
  if (!*got) {
    json lease = record(nullptr, false);
    auto made = client_.request("POST", leasePath(true), lease.dump());
    if (!made) return fail(made.error());
    if (made->status == 409) {
      // Another candidate created it first: note whose it is (the standby names the leader,
      // and its lease duration counts from now).
      if (auto again = get(); again && *again) {
        std::lock_guard lock(mu_);
        observe(**again);
      }
      return false;
    }
    if (made->status != 201 && made->status != 200) {
      return fail(Error::internal("creating lease " + leaseName() + ": " + describeFailure(*made)));
    }
    json stored = json::parse(made->body, nullptr, false);
    if (stored.is_discarded() || !stored.is_object()) stored = lease;
    std::lock_guard lock(mu_);
    observe(stored);
    renewedAtMs_ = clock_.nowMs();
    return true;
  }
  json& current = **got;
  // 3. and 4. Another holder keeps an unexpired lease (expiry on our clock, from the change).
  const std::string holder = holderOf(current);
  {
    std::lock_guard lock(mu_);
    observe(current);
    if (!holder.empty() && holder != config_.identity) {
      const json spec = current.value("spec", json::object());
      const Millis duration =
          1000 * (spec.is_object() ? spec.value("leaseDurationSeconds", std::int64_t{0}) : 0);
      if (observedAtMs_ + duration > clock_.nowMs()) {
        renewedAtMs_.reset();
        return false;
      }
    }
  }
  // 5. Take or keep it, with the resourceVersion just read.
  auto stored = put(record(&current, false));
  if (!stored) return fail(stored.error());
  std::lock_guard lock(mu_);
  if (!*stored) {
    renewedAtMs_.reset();
    return false;
  }
  observe(**stored);
  renewedAtMs_ = clock_.nowMs();
  return true;
}

Result<void> LeaderElector::release() {
  std::optional<json> previous;
  {
    std::lock_guard lock(mu_);
    previous = observed_;
    renewedAtMs_.reset();  // stop acting before the lease is handed back
  }
  if (!previous || holderOf(*previous) != config_.identity) return {};
  auto stored = put(record(&*previous, true));
  if (!stored) return fail(stored.error());
  if (!*stored) {
    return fail(Error::precondition("releasing lease " + leaseName() +
                                    ": it changed since this process last renewed it"));
  }
  std::lock_guard lock(mu_);
  observe(**stored);
  return {};
}

bool LeaderElector::isLeader() const {
  std::lock_guard lock(mu_);
  return renewedAtMs_ && observed_ && holderOf(*observed_) == config_.identity &&
         clock_.nowMs() - *renewedAtMs_ < config_.renewDeadlineMs;
}

std::string LeaderElector::observedHolder() const {
  std::lock_guard lock(mu_);
  return observed_ ? holderOf(*observed_) : "";
}

void LeaderElector::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  wake_.notify_all();
}

bool LeaderElector::sleepFor(Millis ms) {
  std::unique_lock lock(mu_);
  wake_.wait_for(lock, std::chrono::milliseconds(std::max<Millis>(0, ms)),
                 [&] { return stopped_; });
  return !stopped_;
}

void LeaderElector::run(const Callbacks& cb, bool releaseOnStop) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0, 1.2);
  std::string lastHolder;
  auto noteHolder = [&] {
    const std::string h = observedHolder();
    if (h != lastHolder) {
      lastHolder = h;
      if (cb.onNewLeader && !h.empty()) cb.onNewLeader(h);
    }
  };
  // Acquire: every retryPeriod, jittered.
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
    }
    auto got = tryAcquireOrRenew();
    noteHolder();
    if (got && *got) break;
    const auto wait =
        static_cast<Millis>(static_cast<double>(config_.retryPeriodMs) * (1 + jitter(rng)));
    if (!sleepFor(wait)) return;
  }
  if (cb.onStartedLeading) cb.onStartedLeading();
  // Renew: every retryPeriod; lost when no attempt succeeded within renewDeadline.
  bool stoppedByCaller = false;
  while (true) {
    if (!sleepFor(config_.retryPeriodMs)) {
      stoppedByCaller = true;
      break;
    }
    const Millis start = clock_.nowMs();
    bool renewed = false;
    while (clock_.nowMs() - start < config_.renewDeadlineMs) {
      auto got = tryAcquireOrRenew();
      noteHolder();
      if (got && *got) {
        renewed = true;
        break;
      }
      if (got && !*got) break;  // someone else holds it now: lost at once
      if (!sleepFor(config_.retryPeriodMs)) {
        stoppedByCaller = true;
        break;
      }
    }
    if (stoppedByCaller || !renewed) break;
  }
  {
    std::lock_guard lock(mu_);
    renewedAtMs_.reset();
  }
  if (stoppedByCaller && releaseOnStop) (void)release();
  if (cb.onStoppedLeading) cb.onStoppedLeading();
}

}  // namespace tessera::k8s
