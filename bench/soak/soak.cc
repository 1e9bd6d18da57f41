// A month in minutes (docs/benchmarks.md, "Soak"): the real ControlPlane over a real SQLite
// store, driven on an injected clock through what a fleet does all day: replicas placed,
// loaded and removed, agents' heartbeats with telemetry, nodes drained and put back, nodes
// removed and registered again. Per simulated day it reports resident memory, the store's size
// on disk, the replica and node tables' sizes, the events kept, the time one copy of the
// state takes (the batch and eviction planners work on copies), and the p50/p99 latency of
// each call, so growth shows as a trend.
//
// With --crashes N it then kills a child running the same load with SIGKILL N times, at
// random points, and after each kill restores the store (timed) and checks that no
// acknowledged change is lost (the child logs an intent before each call and an
// acknowledgement after it, unbuffered, to a file the kill leaves whole) and that the books
// over-commit nothing (ClusterState::checkInvariants).
//
// Usage: control_plane_soak [--nodes 1000] [--days 30] [--cycles-per-day 10000]
//                           [--crashes 0] [--seed S] [--dir DIR] [--json]

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/control_plane.h"
#include "api/json_api.h"
#include "common/clock.h"
#include "model/gpu_catalog.h"
#include "store/event_sink.h"
#include "store/store.h"

namespace {

using nlohmann::json;
using tessera::Millis;
using tessera::api::ControlPlane;
namespace fs = std::filesystem;

constexpr Millis kMinute = 60'000;
constexpr Millis kDay = 24 * 60 * kMinute;
constexpr Millis kCalendarStart = 1'798'761'600'000;  // 2027-01-01, the events' clock

struct Options {
  int nodes = 1000;
  int days = 30;
  int cyclesPerDay = 10'000;
  int crashes = 0;
  std::uint64_t seed = 0;
  std::string dir;
  bool json = false;
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "control_plane_soak: %s\n", what.c_str());
  std::exit(1);
}

const char* kTypes[] = {"H100-80GB", "A100-80GB", "L40S", "L4"};

json nodeBody(int i) {
  const std::string type = kTypes[i % 4];
  const bool nvlink = i % 4 < 2;
  json gpus = json::array();
  for (int g = 0; g < 8; ++g) gpus.push_back({{"type", type}, {"nvlinkGroup", nvlink ? g / 4 : -1}});
  return {{"name", "node-" + std::to_string(i)}, {"cpu", 192}, {"hostMemory", "2Ti"},
          {"gpus", gpus}, {"labels", {{"pool", i % 3 == 0 ? "batch" : "online"}}}};
}

std::vector<json> models() {
  std::vector<json> out;
  const int weightsGi[] = {4, 8, 14, 16, 26, 30, 40, 60};
  for (int m = 0; m < 8; ++m) {
    out.push_back({{"name", "model-" + std::to_string(m)},
                   {"weights", std::to_string(weightsGi[m]) + "Gi"},
                   {"kvCache", "4Gi"},
                   {"computeMilli", 250 + 50 * m},
                   {"priority", m % 3}});
  }
  out.push_back({{"name", "model-tp2"}, {"weights", "70Gi"}, {"kvCache", "8Gi"},
                 {"gpusPerReplica", 2}, {"nvlinkRequired", true}});
  return out;
}

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

double residentMib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return 0;
}

double storeMib(const std::string& dir) {
  std::uintmax_t total = 0;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    const auto n = fs::file_size(fs::path(dir) / (std::string("state.db") + suffix), ec);
    if (!ec) total += n;
  }
  return static_cast<double>(total) / (1 << 20);
}

// The load: one instance per process (the soak, or one crash child).
class Fleet {
 public:
  Fleet(const Options& o, std::uint64_t seed, int acksFd)
      : options_(o), rng_(seed), acksFd_(acksFd) {}

  // Opens the store and the plane (restoring what the store holds); returns the seconds it
  // took.
  double open() {
    const auto started = std::chrono::steady_clock::now();
    auto s = tessera::store::Store::open((fs::path(options_.dir) / "state.db").string());
    if (!s) die("store: " + s.error().message);
    store_ = std::move(*s);
    tessera::api::ControlPlaneConfig config;
    config.eventClockMs = [this] { return kCalendarStart + clock_.nowMs(); };
    events_ = std::make_unique<tessera::store::SqliteEventSink>(*store_);
    auto plane = ControlPlane::create(catalog_, clock_, config, store_.get(), events_.get());
    if (!plane) die("control plane: " + plane.error().message);
    plane_ = std::move(*plane);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // Pick up where a previous process left off: the live replicas, oldest first.
    const json listed = plane_->listReplicas();
    for (const json& r : listed["replicas"]) live_.push_back(r["replica"].get<std::string>());
    std::sort(live_.begin(), live_.end(), [](const std::string& a, const std::string& b) {
      return std::stoll(a.substr(2)) < std::stoll(b.substr(2));
    });
    if (!live_.empty()) nextReplica_ = std::stoll(live_.back().substr(2)) + 1;
    return seconds;
  }

  void setUp() {
    for (const json& m : models()) {
      if (auto r = tessera::api::json_api::putModel(*plane_, m); !r)
        die("model: " + r.error().message);
    }
    for (int i = 0; i < options_.nodes; ++i) {
      if (auto r = tessera::api::json_api::registerNode(*plane_, nodeBody(i)); !r)
        die("node: " + r.error().message);
    }
  }

  // One simulated minute of the fleet's day.
  void minute() {
    clock_.advance(kMinute);
    ++minutes_;
    const double perMinute = options_.cyclesPerDay / 1440.0;
    placeDebt_ += perMinute;
    std::uniform_int_distribution<int> pickModel(0, 8);
    while (placeDebt_ >= 1) {
      placeDebt_ -= 1;
      const std::string id = "r-" + std::to_string(nextReplica_++);
      const std::string model = pickModel(rng_) == 8 ? "model-tp2"
                                                     : "model-" + std::to_string(pickModel(rng_) % 8);
      intent('P', id);
      const bool placed = timed(placeMs_, [&] {
        return tessera::api::json_api::placeReplicas(*plane_, {{"replicaId", id}, {"model", model}})
            .has_value();
      });
      if (!placed) {
        ack('N', id);  // refused: nothing booked
        continue;
      }
      ack('P', id);
      live_.push_back(id);
      timed(loadedMs_, [&] { return plane_->replicaLoaded(id).has_value(); });
    }
    // Replicas live about a day or two: keep the fleet at its steady-state size.
    const std::size_t target = static_cast<std::size_t>(options_.nodes) * 3;
    while (live_.size() > target) removeOne();
    heartbeats();
    if (minutes_ % 60 == 0) drainAndReturn(false);
    if (minutes_ % 360 == 0) drainAndReturn(true);
  }

  struct Day {
    int day = 0;
    double rssMib = 0, storeMib = 0, copyMs = 0;
    std::size_t liveReplicas = 0, replicaSlots = 0, nodeSlots = 0, events = 0;
    double placeP50 = 0, placeP99 = 0, removeP99 = 0, heartbeatP99 = 0, loadedP99 = 0;
    long refused = 0;
  };
  Day endOfDay(int day) {
    Day d;
    d.day = day;
    d.rssMib = residentMib();
    d.storeMib = storeMib(options_.dir);
    const auto t0 = std::chrono::steady_clock::now();
    {
      const tessera::sched::ClusterState copy = plane_->state();
      d.replicaSlots = copy.replicas().size();
      d.nodeSlots = copy.nodes().size();
    }
    d.copyMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    d.liveReplicas = static_cast<std::size_t>(plane_->state().liveReplicaCount());
    d.events = plane_->events(0, 1'000'000)["events"].size();
    d.placeP50 = percentile(placeMs_, 0.5);
    d.placeP99 = percentile(placeMs_, 0.99);
    d.removeP99 = percentile(removeMs_, 0.99);
    d.heartbeatP99 = percentile(heartbeatMs_, 0.99);
    d.loadedP99 = percentile(loadedMs_, 0.99);
    d.refused = refused_;
    placeMs_.clear();
    removeMs_.clear();
    heartbeatMs_.clear();
    loadedMs_.clear();
    refused_ = 0;
    auto ok = plane_->state().checkInvariants();
    if (!ok) die("day " + std::to_string(day) + ": " + ok.error().message);
    return d;
  }

 private:
  template <typename Fn>
  bool timed(std::vector<double>& into, Fn&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    const bool ok = fn();
    into.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!ok && &into == &placeMs_) ++refused_;
    return ok;
  }

  // The crash log: "?P id" before a call that may change `id`, "P id" / "R id" / "N id"
  // after it was acknowledged (placed, removed, refused). write(2), no buffer: a SIGKILL
  // loses nothing already written.
  void logLine(const std::string& line) {
    if (acksFd_ < 0) return;
    const std::string l = line + "\n";
    if (::write(acksFd_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) die("ack log");
  }
  void intent(char op, const std::string& id) { logLine(std::string("?") + op + " " + id); }
  void ack(char op, const std::string& id) { logLine(std::string(1, op) + " " + id); }

  void removeOne() {
    const std::string id = live_.front();
    live_.pop_front();
    intent('R', id);
    if (timed(removeMs_, [&] { return plane_->removeReplica(id).has_value(); })) ack('R', id);
  }

  void heartbeats() {
    std::uniform_int_distribution<int> pickNode(0, options_.nodes - 1);
    const tessera::sched::ClusterState& st = plane_->state();
    for (int k = 0; k < std::max(1, options_.nodes / 20); ++k) {
      const std::string name = "node-" + std::to_string(pickNode(rng_));
      const auto id = st.findNode(name);
      if (!id) continue;
      json gpus = json::array();
      for (tessera::sched::GpuId g : st.node(*id).gpuIds) {
        const auto& rec = st.gpu(g);
        gpus.push_back({{"id", rec.spec.id}, {"usedMib", rec.chargedMib},
                        {"utilization", rec.replicas.empty() ? 0.0 : 0.6}});
      }
      timed(heartbeatMs_, [&] {
        return tessera::api::json_api::heartbeat(*plane_, name, {{"gpus", gpus}}).has_value();
      });
    }
  }

  // A node drained (its replicas removed, as their deployments would replace them) and
  // uncordoned; or, with `replace`, removed and registered again (a node replaced).
  void drainAndReturn(bool replace) {
    std::uniform_int_distribution<int> pickNode(0, options_.nodes - 1);
    const int i = pickNode(rng_);
    const std::string name = "node-" + std::to_string(i);
    auto drained = plane_->drainNode(name);
    if (!drained) return;
    for (const std::string& id : drained->draining) {
      intent('R', id);
      if (timed(removeMs_, [&] { return plane_->removeReplica(id).has_value(); })) ack('R', id);
      std::erase(live_, id);
    }
    if (replace) {
      if (plane_->removeNode(name, false))
        (void)tessera::api::json_api::registerNode(*plane_, nodeBody(i));  // best effort
    } else {
      (void)plane_->setCordoned(name, false);  // best effort: the node may be gone
    }
  }

  Options options_;
  std::mt19937_64 rng_;
  int acksFd_;
  tessera::model::GpuCatalog catalog_ = tessera::model::GpuCatalog::builtin();
  tessera::ManualClock clock_{0};
  std::unique_ptr<tessera::store::Store> store_;
  std::unique_ptr<tessera::store::SqliteEventSink> events_;
  std::unique_ptr<ControlPlane> plane_;
  std::deque<std::string> live_;
  long long nextReplica_ = 0;
  long minutes_ = 0;
  double placeDebt_ = 0;
  long refused_ = 0;
  std::vector<double> placeMs_, removeMs_, heartbeatMs_, loadedMs_;
};

void soak(const Options& o) {
  Fleet fleet(o, o.seed, -1);
  fleet.open();
  fleet.setUp();
  const auto started = std::chrono::steady_clock::now();
  std::vector<Fleet::Day> days;
  if (!o.json) {
    std::printf("| day | RSS MiB | store MiB | live replicas | replica slots | node slots | events kept | "
                "state copy ms | place p50 / p99 ms | loaded p99 | remove p99 | heartbeat p99 | refused |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  }
  for (int day = 1; day <= o.days; ++day) {
    for (int m = 0; m < 1440; ++m) fleet.minute();
    const Fleet::Day d = fleet.endOfDay(day);
    days.push_back(d);
    if (!o.json) {
      std::printf("| %d | %.0f | %.1f | %zu | %zu | %zu | %zu | %.1f | %.2f / %.2f | %.2f | %.2f | %.3f | %ld |\n",
                  d.day, d.rssMib, d.storeMib, d.liveReplicas, d.replicaSlots, d.nodeSlots, d.events,
                  d.copyMs, d.placeP50, d.placeP99, d.loadedP99, d.removeP99, d.heartbeatP99, d.refused);
      std::fflush(stdout);
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (o.json) {
    json out = json::array();
    for (const Fleet::Day& d : days) {
      out.push_back({{"day", d.day}, {"rssMib", d.rssMib}, {"storeMib", d.storeMib},
                     {"liveReplicas", d.liveReplicas}, {"replicaSlots", d.replicaSlots},
                     {"nodeSlots", d.nodeSlots}, {"events", d.events}, {"stateCopyMs", d.copyMs},
                     {"placeP50Ms", d.placeP50}, {"placeP99Ms", d.placeP99},
                     {"removeP99Ms", d.removeP99}, {"heartbeatP99Ms", d.heartbeatP99}});
    }
    std::printf("%s\n", json{{"days", out}, {"wallSeconds", wall}}.dump(1).c_str());
  } else {
    std::printf("\n%d nodes, %d days of %d place/remove cycles, %.0f s wall\n", o.nodes, o.days,
                o.cyclesPerDay, wall);
  }
}

// Replays the crash log: per replica, what the last acknowledged call left ("placed" or
// "gone"), or "either" when a call on it was in flight at the kill.
std::map<std::string, std::string> expected(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.size() < 3) continue;  // a torn last line: the kill came mid-write
    const std::string id = line.substr(line[0] == '?' ? 3 : 2);
    if (line[0] == '?') {
      out[id] = "either";
    } else if (line[0] == 'P') {
      out[id] = "placed";
    } else if (line[0] == 'R' || line[0] == 'N') {
      out[id] = "gone";
    }
  }
  return out;
}

void crashes(const Options& o) {
  const std::string acks = (fs::path(o.dir) / "acks.log").string();
  std::mt19937_64 rng(o.seed ^ 0x9e3779b97f4a7c15ULL);
  std::uniform_int_distribution<int> runMs(20, 400);
  std::vector<double> restarts;
  long verified = 0;
  long duringRestore = 0;
  for (int k = 0; k < o.crashes; ++k) {
    int ready[2];
    if (::pipe(ready) != 0) die("pipe failed");
    const pid_t child = ::fork();
    if (child < 0) die("fork failed");
    if (child == 0) {
      ::close(ready[0]);
      const int fd = ::open(acks.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd < 0) die("cannot open " + acks);
      Fleet fleet(o, o.seed + static_cast<std::uint64_t>(k) + 1, fd);
      fleet.open();
      const char byte = 1;
      if (::write(ready[1], &byte, 1) != 1) die("ready pipe");
      for (;;) fleet.minute();
    }
    ::close(ready[1]);
    // One kill in ten lands while the child restores the store; the others once it serves.
    if (k % 10 != 0) {
      char byte = 0;
      if (::read(ready[0], &byte, 1) != 1) die("the child died before it served");
    } else {
      ++duringRestore;
    }
    ::close(ready[0]);
    ::usleep(static_cast<useconds_t>(runMs(rng)) * 1000);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    // Restart on what the kill left, timed, and check it.
    Fleet check(o, 0, -1);
    const double seconds = check.open();
    restarts.push_back(seconds * 1000);
    auto st = check.endOfDay(0);  // checkInvariants, or dies naming the violation
    (void)st;
    const std::map<std::string, std::string> want = expected(acks);
    auto snapshot = tessera::store::Store::open((fs::path(o.dir) / "state.db").string());
    if (!snapshot) die("reopen: " + snapshot.error().message);
    auto all = (*snapshot)->loadAll();
    if (!all) die("load: " + all.error().message);
    std::set<std::string> stored;
    for (const auto& d : all->documents) {
      if (d.kind == "replica") stored.insert(d.name);
    }
    for (const auto& [id, state] : want) {
      if (state == "placed" && !stored.contains(id)) die("kill " + std::to_string(k + 1) + ": acknowledged replica " + id + " is lost");
      if (state == "gone" && stored.contains(id)) die("kill " + std::to_string(k + 1) + ": acknowledged removal of " + id + " is undone");
      ++verified;
    }
  }
  std::vector<double> sorted = restarts;
  std::printf("\n%d kill -9 at random points (%ld during a restore, the rest under load): every "
              "acknowledged change kept (%ld checks), no over-commitment; restart (store open + "
              "restore) p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
              o.crashes, duringRestore, verified, percentile(sorted, 0.5), percentile(sorted, 0.99),
              *std::max_element(restarts.begin(), restarts.end()));
  if (o.crashes >= 10 && verified == 0) die("no acknowledged change was ever checked");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) die(a + " needs a value");
      return argv[++i];
    };
    if (a == "--nodes") o.nodes = std::stoi(next());
    else if (a == "--days") o.days = std::stoi(next());
    else if (a == "--cycles-per-day") o.cyclesPerDay = std::stoi(next());
    else if (a == "--crashes") o.crashes = std::stoi(next());
    else if (a == "--seed") o.seed = std::stoull(next());
    else if (a == "--dir") o.dir = next();
    else if (a == "--json") o.json = true;
    else die("unknown argument " + a + " (see the comment at the top of bench/soak/soak.cc)");
  }
  if (o.nodes < 1 || o.days < 0 || o.cyclesPerDay < 0 || o.crashes < 0) die("counts must be positive");
  bool ownDir = false;
  if (o.dir.empty()) {
    char tmpl[] = "/tmp/tessera-soak-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) die("mkdtemp failed");
    o.dir = tmpl;
    ownDir = true;
  }
  std::fprintf(stderr, "soak: seed %llu, store in %s\n", static_cast<unsigned long long>(o.seed),
               o.dir.c_str());
  soak(o);
  if (o.crashes > 0) crashes(o);
  if (ownDir) {
    std::error_code ec;
    fs::remove_all(o.dir, ec);
  }
  return 0;
}
