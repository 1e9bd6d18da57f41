// Every query the shipped dashboard, alert rules and autoscaler examples run names a metric
// the real `tessera serve` exports, with labels that metric really has. The server is the
// built binary on a loopback port, fed a node, a model, deployments (one that fits, one that
// cannot) and signals over its HTTP API, then scraped.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/testing/spawn.h"
#include "deploy_test_support.h"
#include "promql.h"

namespace tessera::deploytest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- the reader itself ---------------------------------------------------------------------

std::set<std::string> names(const std::string& expr) {
  auto r = readPromql(expr);
  EXPECT_TRUE(r) << r.error().message;
  return r ? r->metrics : std::set<std::string>{};
}

TEST(PromqlReader, FindsMetricsAndSkipsEverythingElse) {
  EXPECT_EQ(names("up"), (std::set<std::string>{"up"}));
  EXPECT_EQ(names("sum by (le, verb) (rate(a_bucket{verb=~\"filter|bind\"}[5m]))"),
            (std::set<std::string>{"a_bucket"}));
  EXPECT_EQ(names("histogram_quantile(0.99, sum(rate(x_bucket[$__rate_interval])) by (le))"),
            (std::set<std::string>{"x_bucket"}));
  EXPECT_EQ(names("a / on(deployment) group_left(model) b > 0.4 and c unless d offset 1h"),
            (std::set<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(names("sum_over_time(m[$__range:1m]) / 60 * $gpu_hourly_cost + ${other}"),
            (std::set<std::string>{"m"}));
  EXPECT_EQ(names("{__name__=\"named\", job=\"x\"} + 1e3 + 0x1f + Inf + NaN"),
            (std::set<std::string>{"named"}));
  EXPECT_EQ(names("label_replace(m, \"dst\", \"$1\", \"src\", \"(.*)\") # comment metric"),
            (std::set<std::string>{"m"}));
  EXPECT_EQ(names("topk(10, g) or vector(0)"), (std::set<std::string>{"g"}));
  EXPECT_EQ(names("count without (gpu) (g) >= bool 2"), (std::set<std::string>{"g"}));
}

TEST(PromqlReader, KeepsTheLabelsOfEachSelector) {
  auto r = readPromql("a{state=\"ready\", deployment=~\"$d\"} / b");
  ASSERT_TRUE(r);
  std::set<std::string> labelsOfA;
  for (const auto& [m, labels] : r->selectors) {
    if (m == "a") labelsOfA.insert(labels.begin(), labels.end());
  }
  EXPECT_EQ(labelsOfA, (std::set<std::string>{"state", "deployment"}));
}

TEST(PromqlReader, RefusesUnknownFunctionsAndBrokenSyntax) {
  EXPECT_FALSE(readPromql("rat(m[5m])"));
  EXPECT_FALSE(readPromql("m{a=\"x\""));
  EXPECT_FALSE(readPromql("m[5m"));
  EXPECT_FALSE(readPromql("m{a=b}"));
  EXPECT_FALSE(readPromql("m{a=\"x}"));
}

TEST(PromqlReader, ReadsGrafanaLabelValues) {
  auto r = readGrafanaVariableQuery("label_values(tessera_x{a=\"b\"}, deployment)");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->metrics, (std::set<std::string>{"tessera_x"}));
  r = readGrafanaVariableQuery("label_values(deployment)");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->metrics.empty());
}

// ---- the real server -----------------------------------------------------------------------

struct Exported {
  std::set<std::string> names;                          // every series name a scrape can have
  std::map<std::string, std::set<std::string>> labels;  // seen on samples, by name
  std::set<std::string> withSamples;
};

Exported parseExposition(const std::string& text) {
  Exported e;
  std::istringstream in(text);
  std::string line;
  static const std::regex typeLine(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$)");
  static const std::regex sampleLine(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? \S+$)");
  static const std::regex labelName(R"(([a-zA-Z_][a-zA-Z0-9_]*)=\")");
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, m, typeLine)) {
      const std::string name = m[1];
      const std::string type = m[2];
      e.names.insert(name);
      if (type == "histogram") {
        for (const char* s : {"_bucket", "_sum", "_count"}) e.names.insert(name + s);
      } else if (type == "summary") {
        for (const char* s : {"_sum", "_count"}) e.names.insert(name + s);
      }
    } else if (std::regex_match(line, m, sampleLine)) {
      const std::string name = m[1];
      e.names.insert(name);
      e.withSamples.insert(name);
      const std::string labels = m[3];
      for (auto it = std::sregex_iterator(labels.begin(), labels.end(), labelName);
           it != std::sregex_iterator(); ++it) {
        e.labels[name].insert((*it)[1]);
      }
      e.labels[name];  // present even without labels
    }
  }
  return e;
}

class Server {
 public:
  Server() {
    char dir[] = "/tmp/tessera-deploy-serve-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    const std::string store = (fs::path(dir_) / "state.db").string();
    const auto child = tessera::testing::spawnWithStdoutPipe(
        {TESSERA_BINARY, "serve", "--listen", "127.0.0.1:0", "--store", store, "--threads", "2"},
        {}, "/dev/null");
    pid_ = child.pid;
    if (pid_ < 0) return;
    const int out = child.out;
    std::string line;
    char c = 0;
    while (::read(out, &c, 1) == 1 && c != '\n') line += c;
    ::close(out);
    const auto at = line.find("127.0.0.1:");
    if (at != std::string::npos) port_ = std::atoi(line.c_str() + at + 10);
  }
  ~Server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (!dir_.empty()) {
      std::error_code ignored;
      fs::remove_all(dir_, ignored);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
};

class MetricNamesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new Server();
    ASSERT_GT(server_->port(), 0) << "tessera serve did not start";
    httplib::Client c("127.0.0.1", server_->port());
    auto post = [&](const std::string& path, const json& body) {
      auto r = c.Post(path, body.dump(), "application/json");
      ASSERT_TRUE(r) << path;
      ASSERT_LT(r->status, 300) << path << ": " << r->body;
    };
    post("/api/v1/nodes",
         {{"name", "gpu-a"},
          {"cpu", 64},
          {"gpus", json::array({{{"type", "A100-80GB"}}, {{"type", "A100-80GB"}}})}});
    post("/api/v1/models", {{"name", "llama-8b"}, {"weights", "16Gi"}, {"computeMilli", 500}});
    post("/api/v1/models", {{"name", "giant"}, {"weights", "400Gi"}});
    post("/api/v1/deployments",
         {{"name", "chat"}, {"model", "llama-8b"}, {"minReplicas", 1}, {"maxReplicas", 2}});
    post("/api/v1/deployments",
         {{"name", "huge"}, {"model", "giant"}, {"minReplicas", 1}, {"maxReplicas", 1}});
    // The Tessera deployment of deploy/examples/keda-scaledobject.yaml: it recommends, the
    // HPA acts.
    post("/api/v1/deployments", {{"name", "models.chat"},
                                 {"model", "llama-8b"},
                                 {"placedBy", "kubernetes"},
                                 {"minReplicas", 1},
                                 {"maxReplicas", 16},
                                 {"autoscaling", {{"recommender", "tessera"}}}});
    post("/api/v1/nodes/gpu-a/heartbeat",
         {{"gpus", json::array({{{"id", "0"}, {"usedMib", 18000}, {"utilization", 0.3}},
                                {{"id", "1"}, {"usedMib", 0}, {"utilization", 0}}})}});
    post("/api/v1/replicas/chat-0/loaded", json::object());
    post("/api/v1/replicas/chat-0/signals", {{"waiting", 3}, {"running", 4}});
    post("/api/v1/deployments/chat/signals", {{"bufferedRequests", 1}});
    // An extender call (refused: no pod), so that its latency histogram has a series.
    ASSERT_TRUE(c.Post("/scheduler/filter", "{}", "application/json"));
    auto r = c.Get("/metrics");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    exported_ = new Exported(parseExposition(r->body));
    text_ = new std::string(r->body);
  }
  static void TearDownTestSuite() {
    delete exported_;
    exported_ = nullptr;
    delete text_;
    text_ = nullptr;
    delete server_;
    server_ = nullptr;
  }

  // Every metric `expr` reads is exported, with the labels it matches on.
  static void expectExported(const std::string& where, const Result<PromqlNames>& read) {
    ASSERT_TRUE(read) << where << ": " << read.error().message;
    EXPECT_FALSE(read->metrics.empty()) << where << ": reads no metric";
    for (const std::string& m : read->metrics) {
      EXPECT_TRUE(exported_->names.contains(m))
          << where << ": " << m << " is not exported by tessera serve";
    }
    for (const auto& [m, labels] : read->selectors) {
      if (!exported_->withSamples.contains(m)) continue;
      for (const std::string& l : labels) {
        EXPECT_TRUE(exported_->labels[m].contains(l))
            << where << ": " << m << " has no label " << l;
      }
    }
  }

  static Server* server_;
  static Exported* exported_;
  static std::string* text_;
};

Server* MetricNamesTest::server_ = nullptr;
Exported* MetricNamesTest::exported_ = nullptr;
std::string* MetricNamesTest::text_ = nullptr;

TEST_F(MetricNamesTest, TheSeededServerExportsWhatTheDashboardsNeed) {
  // The seeding worked: these carry samples (so their labels are checked too).
  for (const char* m :
       {"tessera_gpu_utilization_ratio", "tessera_deployment_replicas", "tessera_pending_replicas",
        "tessera_deployment_queue_depth", "tessera_node_heartbeat_age_seconds",
        "tessera_replica_load_duration_seconds_bucket", "tessera_http_requests_total",
        "tessera_extender_request_duration_seconds_bucket", "tessera_placements_total",
        "tessera_reservations_expired_total"}) {
    EXPECT_TRUE(exported_->withSamples.contains(m)) << m;
  }
  EXPECT_FALSE(exported_->names.contains("tessera_no_such_metric"));
}

TEST_F(MetricNamesTest, EveryDashboardQueryNamesExportedMetrics) {
  const fs::path dir = sourceDir() / "deploy/grafana";
  int dashboards = 0, targets = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    ++dashboards;
    const json d = json::parse(readText(e.path()));
    EXPECT_GE(d.value("schemaVersion", 0), 36) << e.path();
    std::set<int> ids;
    std::vector<json> panels;
    for (const json& p : d["panels"]) {
      panels.push_back(p);
      for (const json& inner : p.value("panels", json::array())) panels.push_back(inner);
    }
    for (const json& p : panels) {
      EXPECT_TRUE(ids.insert(p["id"].get<int>()).second) << "duplicate panel id " << p["id"];
      if (p["type"] == "row") continue;
      const std::string title = p.value("title", "");
      ASSERT_TRUE(p.contains("targets") && !p["targets"].empty()) << title << " has no query";
      EXPECT_EQ(p["datasource"]["uid"], "${datasource}") << title;
      for (const json& t : p["targets"]) {
        ++targets;
        expectExported(e.path().filename().string() + ": " + title,
                       readPromql(t["expr"].get<std::string>()));
      }
    }
    for (const json& v : d["templating"]["list"]) {
      if (v["type"] != "query") continue;
      const json q = v["query"];
      const std::string text = q.is_object() ? q["query"].get<std::string>() : q.get<std::string>();
      expectExported("variable " + v["name"].get<std::string>(), readGrafanaVariableQuery(text));
    }
  }
  EXPECT_GE(dashboards, 1);
  EXPECT_GE(targets, 10);
}

json rulesOf(const json& doc) {
  return doc.value("kind", "") == "PrometheusRule" ? doc["spec"]["groups"] : doc["groups"];
}

TEST_F(MetricNamesTest, EveryAlertRuleNamesExportedMetricsAndHasARunbook) {
  const auto crd = yamlDocuments(readText(sourceDir() / "deploy/prometheus/tessera-alerts.yaml"),
                                 "tessera-alerts.yaml");
  const auto plain =
      yamlDocuments(readText(sourceDir() / "deploy/prometheus/tessera-alerts.rules.yaml"),
                    "tessera-alerts.rules.yaml");
  ASSERT_EQ(crd.size(), 1u);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(crd[0]["apiVersion"], "monitoring.coreos.com/v1");
  EXPECT_EQ(rulesOf(crd[0]), rulesOf(plain[0])) << "the two rule files differ";
  const std::string operations = readText(sourceDir() / "docs/operations.md");
  std::set<std::string> alerts;
  for (const json& group : rulesOf(crd[0])) {
    for (const json& rule : group["rules"]) {
      const std::string name = rule.value("alert", rule.value("record", std::string()));
      ASSERT_FALSE(name.empty());
      EXPECT_TRUE(alerts.insert(name).second) << "duplicate rule " << name;
      expectExported(name, readPromql(rule["expr"].get<std::string>()));
      if (!rule.contains("alert")) continue;
      EXPECT_TRUE(rule["labels"].contains("severity")) << name;
      const std::string runbook = rule["annotations"].value("runbook", "");
      EXPECT_EQ(
          runbook, "docs/operations.md#" +
                       [&] {
                         std::string lower = name;
                         for (char& c : lower)
                           c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
                         return lower;
                       }())
          << name;
      EXPECT_NE(operations.find("### " + name + "\n"), std::string::npos)
          << name << " has no section in docs/operations.md";
    }
  }
  for (const char* required :
       {"TesseraFleetUtilisationLow", "TesseraReplicasPending",
        "TesseraReservationsExpiringWithoutTelemetry", "TesseraAgentHeartbeatLost"}) {
    EXPECT_TRUE(alerts.contains(required)) << required;
  }
}

TEST_F(MetricNamesTest, TheAutoscalerExamplesQueryExportedMetrics) {
  int queries = 0;
  for (const auto& doc :
       yamlDocuments(readText(sourceDir() / "deploy/examples/keda-scaledobject.yaml"),
                     "keda-scaledobject.yaml")) {
    if (doc["kind"] != "ScaledObject") continue;
    for (const json& t : doc["spec"]["triggers"]) {
      ++queries;
      expectExported("ScaledObject trigger", readPromql(t["metadata"]["query"].get<std::string>()));
    }
  }
  for (const auto& doc :
       yamlDocuments(readText(sourceDir() / "deploy/examples/hpa-prometheus-adapter.yaml"),
                     "hpa-prometheus-adapter.yaml")) {
    if (doc["kind"] != "ConfigMap") continue;
    const auto config =
        yamlDocuments(doc["data"]["config.yaml"].get<std::string>(), "adapter config");
    ASSERT_EQ(config.size(), 1u);
    for (const json& rule : config[0]["externalRules"]) {
      // prometheus-adapter fills these in; stand in a plausible expansion.
      std::string q = rule["metricsQuery"];
      q = std::regex_replace(q, std::regex("<<\\.LabelMatchers>>"), "deployment=\"x\"");
      q = std::regex_replace(q, std::regex("<<\\.Series>>"), "tessera_deployment_replicas");
      q = std::regex_replace(q, std::regex("<<\\.GroupBy>>"), "deployment");
      queries += 2;
      expectExported("adapter metricsQuery", readPromql(q));
      expectExported("adapter seriesQuery", readPromql(rule["seriesQuery"].get<std::string>()));
    }
  }
  EXPECT_GE(queries, 4);
  // And they find their series: a deployment placed by Kubernetes exports its recommendation
  // and its queue like any other.
  EXPECT_NE(
      text_->find("tessera_deployment_replicas{deployment=\"models.chat\",state=\"desired\"} "),
      std::string::npos);
  EXPECT_NE(text_->find("tessera_deployment_queue_depth{deployment=\"models.chat\","),
            std::string::npos);
}

}  // namespace
}  // namespace tessera::deploytest
