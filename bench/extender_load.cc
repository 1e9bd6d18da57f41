// Load test of the kube-scheduler extender over HTTP (docs/benchmarks.md, "Extender under
// load"). Not a Google Benchmark suite: it is a sustained-rate test with a wall-clock duration.
//
// It starts the real HttpServer in-process on a loopback port over a control plane with
// 1,000 nodes (8 GPUs each, mixed types; about a third of the GPU memory booked by replicas of
// several models, so nodes score differently and some fail), then drives what kube-scheduler
// sends for each pod: POST /scheduler/filter, then POST /scheduler/prioritize, with a full
// v1.Pod (src/k8s/testdata/pod_llama.json) and nodeCacheCapable NodeNames listing every node
// (--nodelist: a v1.NodeList of every node instead). Client threads keep their connections
// alive. Scenarios, all in one run so the ratios compare like with like:
//
//   direct       the same filter + prioritize calls on k8s::Extender in-process, arguments
//                already parsed: the extender's own cost (the baseline)
//   direct+json  parse the body, call, dump the answer: what a handler does, minus HTTP
//   healthz      GET /healthz as fast as the clients can: the HTTP floor
//   max          filter + prioritize as fast as the clients can (closed loop)
//   rate         filter + prioritize at a fixed rate of HTTP requests (open loop): each pod's
//                filter has an intended send time on a fixed schedule and its latency counts
//                from then, so a stall delays later requests instead of hiding them
//                (coordinated omission); prioritize is sent when filter answers and counts
//                from its send
//
// Usage: extender_load [--nodes N] [--seconds S] [--rate R] [--clients C]
//                      [--server-threads T] [--nodelist] [--scenarios a,b,...]

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/control_plane.h"
#include "api/http_server.h"
#include "api/json_api.h"
#include "api/json_body.h"
#include "common/clock.h"
#include "k8s/pod.h"
#include "model/gpu_catalog.h"
#include "sched/engine.h"
#include "sched/plugin.h"
#include "sched/profile.h"

namespace {

using namespace tessera;
using nlohmann::json;
using Mono = std::chrono::steady_clock;

struct Options {
  int nodes = 1000;
  double seconds = 10;
  double rate = 2000;  // HTTP requests per second (filter and prioritize each count)
  int clients = 8;
  int serverThreads = 8;
  bool nodeList = false;
  std::string scenarios = "direct,direct+json,healthz,max,rate";
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "extender_load: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--nodes") {
      o.nodes = std::stoi(next());
    } else if (a == "--seconds") {
      o.seconds = std::stod(next());
    } else if (a == "--rate") {
      o.rate = std::stod(next());
    } else if (a == "--clients") {
      o.clients = std::stoi(next());
    } else if (a == "--server-threads") {
      o.serverThreads = std::stoi(next());
    } else if (a == "--nodelist") {
      o.nodeList = true;
    } else if (a == "--scenarios") {
      o.scenarios = next();
    } else {
      std::fprintf(stderr,
                   "usage: extender_load [--nodes N] [--seconds S] [--rate R] [--clients C] "
                   "[--server-threads T] [--nodelist] [--scenarios direct,direct+json,healthz,"
                   "max,rate]\n");
      std::exit(2);
    }
  }
  return o;
}

std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

void must(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "extender_load: %s\n", what.c_str());
    std::exit(1);
  }
}

// ---- the cluster ---------------------------------------------------------------------------

// 8 GPUs per node; the types cycle so that every tenth node is a T4 node and every tenth an L4
// one, neither of which can hold the pod's 20 GiB (24 GiB with the safety factor).
const char* const kTypes[] = {"H100-80GB", "A100-80GB", "A100-40GB", "L40S", "A100-80GB",
                              "H100-80GB", "L4",        "A100-40GB", "T4",   "L40S"};

json nodeBody(int i) {
  const std::string type = kTypes[i % 10];
  const bool sxm = type.starts_with("A100") || type.starts_with("H100");
  json gpus = {{"type", type}, {"count", 8}};
  if (sxm) gpus["nvlinkGroups"] = 1;
  json n = {
      {"name", "node-" + std::to_string(i)},
      {"cpu", 96},
      {"hostMemory", "1Ti"},
      {"labels", {{"tessera.io/pool", "inference"}, {"zone", "z" + std::to_string(i % 3)}}},
      {"taints",
       json::array({{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}})},
      {"gpus", gpus}};
  return n;
}

struct Fleet {
  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock{0};
  std::unique_ptr<api::ControlPlane> plane;
  std::vector<std::string> names;
  int replicas = 0;
};

void build(Fleet& f, int nodes) {
  auto plane = api::ControlPlane::create(f.catalog, f.clock);
  must(plane.has_value(), "cannot create the control plane");
  f.plane = std::move(*plane);
  for (int i = 0; i < nodes; ++i) {
    auto r = tessera::api::json_api::registerNode(*f.plane, nodeBody(i));
    must(r.has_value(), r ? "" : r.error().message);
    f.names.push_back("node-" + std::to_string(i));
  }
  for (const char* m : {R"({"name":"llama-7b","weights":"13Gi","kvCache":"4Gi"})",
                        R"({"name":"mistral-7b","weights":"14Gi","kvCache":"2Gi"})",
                        R"({"name":"qwen-14b","weights":"28Gi","kvCache":"8Gi"})",
                        R"({"name":"phi-3b","weights":"7Gi","kvCache":"1Gi"})",
                        R"({"name":"llama-70b","weights":"131Gi","kvCache":"16Gi",
                            "gpusPerReplica":4})"}) {
    auto r = tessera::api::json_api::putModel(*f.plane, json::parse(m));
    must(r.has_value(), r ? "" : r.error().message);
  }
  // Book about a third of the fleet's GPU memory, in a fixed pseudo-random order of models,
  // so that nodes hold different loads and score differently.
  const char* const models[] = {"llama-7b", "mistral-7b", "qwen-14b", "phi-3b", "llama-70b"};
  std::uint64_t x = 20240601;
  const int target = nodes * 3;
  for (int i = 0; i < target; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const char* m = models[(x >> 33) % 5];
    auto r = tessera::api::json_api::placeReplicas(
        *f.plane,
        json{{"replicaId", "fill-" + std::to_string(i)},
             {"model", m},
             {"tolerations", json::array({{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}}})}});
    if (r) {
      ++f.replicas;
    } else if (i == 0) {
      std::fprintf(stderr, "extender_load: fill-0 not placed: %s\n",
                   r.error().error.message.c_str());
    }
  }
  // The fills all start as reservations; let them lapse so nodes are charged their estimates.
  f.clock.advance(3'600'000);
  f.plane->tick();
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  must(static_cast<bool>(in), "cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The kube-scheduler argument: the golden pod, and every node by name (or as a NodeList).
std::string argsBody(const Fleet& f, bool nodeList, int index) {
  json pod =
      json::parse(readFile(std::string(TESSERA_SOURCE_DIR) + "/src/k8s/testdata/pod_llama.json"));
  // Distinct pods of one deployment, as a scale-up sends them.
  const std::string suffix = "-" + std::to_string(index);
  pod["metadata"]["name"] = pod["metadata"]["name"].get<std::string>() + suffix;
  pod["metadata"]["uid"] = pod["metadata"]["uid"].get<std::string>() + suffix;
  json args = {{"Pod", pod}};
  if (nodeList) {
    json items = json::array();
    for (const std::string& n : f.names) {
      items.push_back(
          {{"metadata",
            {{"name", n},
             {"uid", "uid-" + n},
             {"labels", {{"kubernetes.io/hostname", n}, {"tessera.io/pool", "inference"}}}}},
           {"spec",
            {{"taints",
              json::array(
                  {{{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}})}}},
           {"status",
            {{"capacity", {{"cpu", "96"}, {"memory", "1056Gi"}, {"nvidia.com/gpu", "8"}}},
             {"allocatable", {{"cpu", "95"}, {"memory", "1050Gi"}, {"nvidia.com/gpu", "8"}}},
             {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}});
    }
    args["Nodes"] = {{"metadata", json::object()}, {"items", std::move(items)}};
    args["NodeNames"] = nullptr;
  } else {
    args["Nodes"] = nullptr;
    args["NodeNames"] = f.names;
  }
  return args.dump();
}

// ---- measurements --------------------------------------------------------------------------

struct Stats {
  std::string name;
  double seconds = 0;
  std::size_t requests = 0;
  std::size_t errors = 0;
  std::vector<double> latencyUs;  // per request (filter and prioritize)
  std::vector<double> pairUs;     // per pod: filter's intended send to prioritize's answer
  double targetRate = 0;

  double rate() const { return seconds > 0 ? static_cast<double>(requests) / seconds : 0; }
  static double pct(std::vector<double>& v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
  }
};

using Bodies = std::vector<std::string>;

double since(Mono::time_point t) {
  return std::chrono::duration<double, std::micro>(Mono::now() - t).count();
}

Stats direct(api::ControlPlane& plane, const Bodies& bodies, double seconds, bool withJson) {
  Stats s;
  s.name = withJson ? "in-process: parse + Extender + dump" : "in-process: Extender only";
  std::vector<json> parsedBodies;
  for (const std::string& b : bodies) parsedBodies.push_back(json::parse(b));
  const auto start = Mono::now();
  std::size_t bytes = 0;
  for (std::size_t k = 0; since(start) < seconds * 1e6; ++k) {
    const std::string& body = bodies[k % bodies.size()];
    const json& args = parsedBodies[k % bodies.size()];
    for (int verb = 0; verb < 2; ++verb) {
      const auto t = Mono::now();
      if (withJson) {
        auto parsed = api::parseJsonBody(body);
        auto out =
            verb == 0 ? plane.extender().filter(*parsed) : plane.extender().prioritize(*parsed);
        bytes += out->dump().size();
      } else {
        auto out = verb == 0 ? plane.extender().filter(args) : plane.extender().prioritize(args);
        bytes += out->size();
      }
      s.latencyUs.push_back(since(t));
      ++s.requests;
    }
  }
  s.seconds = since(start) / 1e6;
  if (bytes == 0) s.errors = 1;
  return s;
}

std::unique_ptr<httplib::Client> client(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  c->set_tcp_nodelay(true);  // as Go's net/http, which kube-scheduler uses, does
  c->set_connection_timeout(5);
  c->set_read_timeout(30);
  return c;
}

// Closed loop: every client sends its next request when the last one answered.
Stats closedLoop(int port, const Options& o, const Bodies& bodies, bool healthz) {
  Stats s;
  s.name = healthz ? "HTTP GET /healthz, max" : "HTTP filter + prioritize, max";
  std::vector<Stats> per(static_cast<std::size_t>(o.clients));
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (int t = 0; t < o.clients; ++t) {
    clients.push_back(client(port));
    (void)clients.back()->Get("/healthz");  // connect before the clock starts
  }
  std::vector<std::thread> threads;
  const auto start = Mono::now();
  const double limitUs = o.seconds * 1e6;
  for (int t = 0; t < o.clients; ++t) {
    threads.emplace_back([&, t] {
      Stats& mine = per[static_cast<std::size_t>(t)];
      httplib::Client& c = *clients[static_cast<std::size_t>(t)];
      for (std::size_t k = static_cast<std::size_t>(t) * 7; since(start) < limitUs; ++k) {
        const std::string& body = bodies[k % bodies.size()];
        if (healthz) {
          const auto t0 = Mono::now();
          auto r = c.Get("/healthz");
          mine.latencyUs.push_back(since(t0));
          ++mine.requests;
          if (!r || r->status != 200) ++mine.errors;
          continue;
        }
        const auto t0 = Mono::now();
        auto f = c.Post("/scheduler/filter", body, "application/json");
        const double fUs = since(t0);
        const auto t1 = Mono::now();
        auto p = c.Post("/scheduler/prioritize", body, "application/json");
        mine.latencyUs.push_back(fUs);
        mine.latencyUs.push_back(since(t1));
        mine.pairUs.push_back(since(t0));
        mine.requests += 2;
        if (!f || f->status != 200) ++mine.errors;
        if (!p || p->status != 200) ++mine.errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  s.seconds = since(start) / 1e6;
  for (Stats& p : per) {
    s.requests += p.requests;
    s.errors += p.errors;
    s.latencyUs.insert(s.latencyUs.end(), p.latencyUs.begin(), p.latencyUs.end());
    s.pairUs.insert(s.pairUs.end(), p.pairUs.begin(), p.pairUs.end());
  }
  return s;
}

// Open loop at o.rate HTTP requests per second (o.rate / 2 pods per second), spread evenly over
// the clients with staggered phases.
Stats openLoop(int port, const Options& o, const Bodies& bodies) {
  Stats s;
  s.name = "HTTP filter + prioritize, " + std::to_string(static_cast<int>(o.rate)) + "/s";
  s.targetRate = o.rate;
  const double pairsPerSecond = o.rate / 2;
  const auto interval = std::chrono::duration<double>(o.clients / pairsPerSecond);
  const std::size_t perClient =
      static_cast<std::size_t>(o.seconds * pairsPerSecond / o.clients + 0.5);
  std::vector<Stats> per(static_cast<std::size_t>(o.clients));
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (int t = 0; t < o.clients; ++t) {
    clients.push_back(client(port));
    (void)clients.back()->Get("/healthz");  // connect before the clock starts
  }
  std::vector<std::thread> threads;
  const auto start = Mono::now() + std::chrono::milliseconds(50);
  for (int t = 0; t < o.clients; ++t) {
    threads.emplace_back([&, t] {
      Stats& mine = per[static_cast<std::size_t>(t)];
      httplib::Client& c = *clients[static_cast<std::size_t>(t)];
      const auto phase = interval * (static_cast<double>(t) / o.clients);
      for (std::size_t k = 0; k < perClient; ++k) {
        const auto intended =
            start + std::chrono::duration_cast<Mono::duration>(phase + interval * k);
        std::this_thread::sleep_until(intended);
        const std::string& body = bodies[(static_cast<std::size_t>(t) * 7 + k) % bodies.size()];
        auto f = c.Post("/scheduler/filter", body, "application/json");
        const auto t1 = Mono::now();
        mine.latencyUs.push_back(std::chrono::duration<double, std::micro>(t1 - intended).count());
        auto p = c.Post("/scheduler/prioritize", body, "application/json");
        mine.latencyUs.push_back(since(t1));
        mine.pairUs.push_back(
            std::chrono::duration<double, std::micro>(Mono::now() - intended).count());
        mine.requests += 2;
        if (!f || f->status != 200) ++mine.errors;
        if (!p || p->status != 200) ++mine.errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  s.seconds = std::chrono::duration<double>(Mono::now() - start).count();
  for (Stats& p : per) {
    s.requests += p.requests;
    s.errors += p.errors;
    s.latencyUs.insert(s.latencyUs.end(), p.latencyUs.begin(), p.latencyUs.end());
    s.pairUs.insert(s.pairUs.end(), p.pairUs.begin(), p.pairUs.end());
  }
  return s;
}

// Where one pod's filter + prioritize spends its time, in-process: each component timed alone
// over `rounds` repetitions (medians in µs).
void breakdown(api::ControlPlane& plane, const Bodies& bodies, int rounds) {
  const json first = json::parse(bodies[0]);
  const json& podJson = first["Pod"];
  auto lookup = [&](std::string_view n) { return plane.findModel(n); };
  const auto pod = k8s::readPod(podJson, lookup);
  must(pod.has_value(), "readPod");
  // An engine like the control plane's (default profile).
  sched::PluginRegistry registry;
  sched::registerBuiltinPlugins(registry);
  const sched::Profile profile = sched::defaultProfile();
  auto plugins = sched::buildPlugins(profile, registry);
  must(plugins.has_value(), "plugins");
  sched::PlacementEngine engine(std::move(*plugins), profile.options);
  std::map<std::string, std::vector<double>> us;
  for (int i = 0; i < rounds; ++i) {
    const std::string& body = bodies[static_cast<std::size_t>(i) % bodies.size()];
    const json args = json::parse(body);
    auto time = [&](const char* name, auto fn) {
      const auto t = Mono::now();
      fn();
      us[name].push_back(since(t));
    };
    time("parse body (json::parse)", [&] { (void)api::parseJsonBody(body); });
    time("readPod", [&] { (void)k8s::readPod(podJson, lookup); });
    time("engine.scoreNodes", [&] {
      sched::DecideOptions quick;
      quick.explainFailures = false;
      quick.diagnoseFailures = false;
      (void)engine.scoreNodes(plane.state(), pod->request, quick);
    });
    time("engine.decide(explain)", [&] {
      sched::DecideOptions explain;
      explain.explain = true;
      (void)engine.decide(plane.state(), pod->request, explain);
    });
    time("decide(explain, onlyNode) x failing", [&] {
      sched::DecideOptions quick;
      quick.explainFailures = false;
      quick.diagnoseFailures = false;
      std::vector<char> ok(plane.state().nodes().size(), 0);
      for (const auto& ns : engine.scoreNodes(plane.state(), pod->request, quick)) {
        ok[static_cast<std::size_t>(ns.node)] = 1;
      }
      for (std::size_t n = 0; n < ok.size(); ++n) {
        if (ok[n]) continue;
        sched::DecideOptions one;
        one.explain = true;
        one.onlyNode = static_cast<sched::NodeId>(n);
        (void)engine.decide(plane.state(), pod->request, one);
      }
    });
    json filtered, prioritized;
    time("Extender::filter", [&] { filtered = *plane.extender().filter(args); });
    time("Extender::prioritize", [&] { prioritized = *plane.extender().prioritize(args); });
    time("dump filter answer", [&] { (void)filtered.dump(); });
    time("dump prioritize answer", [&] { (void)prioritized.dump(); });
  }
  std::printf("\nbreakdown (median of %d, µs):\n", rounds);
  for (auto& [name, v] : us) std::printf("  %-28s %9.1f\n", name.c_str(), Stats::pct(v, 50));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const auto has = [&](const char* s) {
    return ("," + o.scenarios + ",").find(std::string(",") + s + ",") != std::string::npos;
  };
  std::fprintf(stderr, "extender_load: %d CPUs online, load average %s\n",
               static_cast<int>(std::thread::hardware_concurrency()), loadAverage().c_str());
  const auto t0 = Mono::now();
  Fleet fleet;
  build(fleet, o.nodes);
  Bodies bodies;
  for (int i = 0; i < (o.nodeList ? 32 : 64); ++i) bodies.push_back(argsBody(fleet, o.nodeList, i));
  const std::string& body = bodies[0];
  {
    // One call to check the answers before timing anything.
    const json args = json::parse(body);
    auto f = fleet.plane->extender().filter(args);
    auto p = fleet.plane->extender().prioritize(args);
    must(f && p, "the extender refused the benchmark's arguments");
    const std::size_t passing =
        o.nodeList ? (*f)["Nodes"]["items"].size() : (*f)["NodeNames"].size();
    std::map<std::int64_t, int> scores;
    for (const json& hs : *p) ++scores[hs["Score"].get<std::int64_t>()];
    std::string hist;
    for (const auto& [score, n] : scores) {
      hist += (hist.empty() ? "" : " ") + std::to_string(score) + ":" + std::to_string(n);
    }
    std::fprintf(stderr,
                 "extender_load: %d nodes, %d replicas placed, body %zu bytes; filter passes %zu "
                 "nodes, fails %zu; prioritize scores (score:nodes) %s; set up in %.1f s\n",
                 o.nodes, fleet.replicas, body.size(), passing,
                 (*f)["FailedNodes"].size() + (*f)["FailedAndUnresolvableNodes"].size(),
                 hist.c_str(), since(t0) / 1e6);
  }

  if (has("breakdown")) breakdown(*fleet.plane, bodies, 200);
  std::vector<Stats> results;
  if (has("direct")) results.push_back(direct(*fleet.plane, bodies, o.seconds, false));
  if (has("direct+json")) results.push_back(direct(*fleet.plane, bodies, o.seconds, true));

  api::ServerConfig config;
  config.port = 0;
  config.threads = o.serverThreads;
  config.maxBodyBytes = 64u << 20;
  api::HttpServer server(*fleet.plane, config);
  auto port = server.start();
  must(port.has_value(), port ? "" : port.error().message);
  {
    // Warm up connections, allocators and caches (not measured).
    Options warm = o;
    warm.seconds = 1;
    (void)closedLoop(*port, warm, bodies, false);
  }
  if (has("healthz")) results.push_back(closedLoop(*port, o, bodies, true));
  if (has("max")) results.push_back(closedLoop(*port, o, bodies, false));
  if (has("rate")) results.push_back(openLoop(*port, o, bodies));
  server.stop();

  const std::string load = loadAverage();
  double directRate = 0;
  for (const Stats& s : results) {
    if (s.name == "in-process: Extender only") directRate = s.rate();
  }
  std::printf(
      "\n%d nodes, %s, %d clients, %d server threads, %.0f s per scenario, load average "
      "after: %s\n\n",
      o.nodes, o.nodeList ? "NodeList bodies" : "NodeNames (nodeCacheCapable)", o.clients,
      o.serverThreads, o.seconds, load.c_str());
  std::printf("%-42s %10s %8s %8s %8s %8s %8s %9s %7s\n", "scenario", "req/s", "p50 ms", "p90 ms",
              "p99 ms", "max ms", "pod p99", "vs direct", "errors");
  json out = json::object();
  out["nodes"] = o.nodes;
  out["nodeList"] = o.nodeList;
  out["clients"] = o.clients;
  out["serverThreads"] = o.serverThreads;
  out["seconds"] = o.seconds;
  out["loadAverageAfter"] = load;
  out["cpus"] = std::thread::hardware_concurrency();
  json scenarios = json::array();
  for (Stats& s : results) {
    const double p50 = Stats::pct(s.latencyUs, 50) / 1e3, p90 = Stats::pct(s.latencyUs, 90) / 1e3,
                 p99 = Stats::pct(s.latencyUs, 99) / 1e3, mx = Stats::pct(s.latencyUs, 100) / 1e3,
                 pod99 = Stats::pct(s.pairUs, 99) / 1e3;
    const double ratio = directRate > 0 ? s.rate() / directRate : 0;
    std::printf("%-42s %10.0f %8.3f %8.3f %8.3f %8.2f %8.3f %8.2fx %7zu\n", s.name.c_str(),
                s.rate(), p50, p90, p99, mx, pod99, ratio, s.errors);
    scenarios.push_back({{"name", s.name},
                         {"requestsPerSecond", s.rate()},
                         {"targetRate", s.targetRate},
                         {"requests", s.requests},
                         {"errors", s.errors},
                         {"p50Ms", p50},
                         {"p90Ms", p90},
                         {"p99Ms", p99},
                         {"maxMs", mx},
                         {"podP99Ms", pod99},
                         {"vsDirect", ratio}});
  }
  out["scenarios"] = std::move(scenarios);
  std::printf("\n%s\n", out.dump().c_str());
  bool errors = false;
  for (const Stats& s : results) errors = errors || s.errors > 0;
  return errors ? 1 : 0;
}
