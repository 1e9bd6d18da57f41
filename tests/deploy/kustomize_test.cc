// `kubectl kustomize` builds the base and every overlay under deploy/overlays, and what it
// builds holds together: namespaces, references between objects (config maps, service
// accounts, selectors, the scheduler's extender URL and lease), the control plane's and the
// agent's safety settings, and least-privilege RBAC. Uses the kubectl on $PATH (Debian 12's
// kubernetes-client, whose kustomize is v2.0, is the oldest the manifests promise to build
// with), or $TESSERA_KUBECTL.

#include <unistd.h>
#include <algorithm>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config/serve_config.h"
#include "deploy_test_support.h"
#include "k8s/claim_admission.h"
#include "k8s/dra_claims.h"

namespace tessera::deploytest {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::set<std::string> kClusterScoped = {"Namespace",
                                              "CustomResourceDefinition",
                                              "ClusterRole",
                                              "ClusterRoleBinding",
                                              "PriorityClass",
                                              "DeviceClass",
                                              "MutatingWebhookConfiguration"};

std::vector<fs::path> kustomizations() {
  std::vector<fs::path> dirs = {sourceDir() / "deploy/base"};
  std::vector<fs::path> overlays;
  for (const auto& e : fs::directory_iterator(sourceDir() / "deploy/overlays")) {
    if (e.is_directory() && fs::exists(e.path() / "kustomization.yaml"))
      overlays.push_back(e.path());
  }
  std::sort(overlays.begin(), overlays.end());
  dirs.insert(dirs.end(), overlays.begin(), overlays.end());
  return dirs;
}

class Built {
 public:
  explicit Built(std::vector<json> objects) : objects_(std::move(objects)) {}
  const std::vector<json>& all() const { return objects_; }
  std::vector<const json*> ofKind(const std::string& kind) const {
    std::vector<const json*> out;
    for (const json& o : objects_) {
      if (o.value("kind", "") == kind) out.push_back(&o);
    }
    return out;
  }
  const json* find(const std::string& kind, const std::string& name) const {
    for (const json& o : objects_) {
      if (o.value("kind", "") == kind && o["metadata"].value("name", "") == name) return &o;
    }
    return nullptr;
  }

 private:
  std::vector<json> objects_;
};

bool labelsMatch(const json& selector, const json& labels) {
  if (!selector.is_object() || selector.empty()) return false;
  for (const auto& [k, v] : selector.items()) {
    if (!labels.contains(k) || labels[k] != v) return false;
  }
  return true;
}

const json& container(const json& workload, const std::string& name) {
  for (const json& c : workload["spec"]["template"]["spec"]["containers"]) {
    if (c["name"] == name) return c;
  }
  static const json none = json::object();
  ADD_FAILURE() << "no container " << name;
  return none;
}

// Checks that hold for every build.
void checkCommon(const Built& b, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_FALSE(b.all().empty());
  std::set<std::string> serviceAccounts, configMaps;
  for (const json& o : b.all()) {
    ASSERT_TRUE(o.contains("apiVersion") && o.contains("kind") && o.contains("metadata"));
    const std::string kind = o["kind"];
    const std::string name = o["metadata"].value("name", "");
    EXPECT_FALSE(name.empty()) << kind;
    if (!kClusterScoped.contains(kind)) {
      EXPECT_TRUE(o["metadata"].contains("namespace"))
          << kind << " " << name << " has no namespace";
    }
    if (kind == "ServiceAccount")
      serviceAccounts.insert(o["metadata"]["namespace"].get<std::string>() + "/" + name);
    if (kind == "ConfigMap")
      configMaps.insert(o["metadata"]["namespace"].get<std::string>() + "/" + name);
  }
  ASSERT_NE(b.find("Namespace", "tessera-system"), nullptr);
  ASSERT_NE(b.find("CustomResourceDefinition", "modeldeployments.tessera.io"), nullptr);

  // Workloads: selectors match their pods, service accounts and config maps exist.
  for (const char* kind : {"Deployment", "DaemonSet"}) {
    for (const json* w : b.ofKind(kind)) {
      const std::string ns = (*w)["metadata"]["namespace"];
      const std::string name = (*w)["metadata"]["name"];
      const json& pod = (*w)["spec"]["template"];
      EXPECT_TRUE(labelsMatch((*w)["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"]))
          << name << ": selector does not match its pod template";
      const std::string sa = pod["spec"].value("serviceAccountName", "default");
      EXPECT_TRUE(serviceAccounts.contains(ns + "/" + sa)) << name << ": no service account " << sa;
      for (const json& v : pod["spec"].value("volumes", json::array())) {
        if (v.contains("configMap")) {
          const std::string cm = v["configMap"]["name"];
          EXPECT_TRUE(configMaps.contains(ns + "/" + cm)) << name << ": no ConfigMap " << cm;
        }
      }
      for (const json& c : pod["spec"]["containers"]) {
        EXPECT_TRUE(c.contains("resources") && c["resources"].contains("requests"))
            << name << "/" << c["name"] << ": no resource requests";
        EXPECT_TRUE(c["resources"].contains("limits") &&
                    c["resources"]["limits"].contains("memory"))
            << name << "/" << c["name"] << ": no memory limit";
        const json sc = c.value("securityContext", json::object());
        EXPECT_EQ(sc.value("allowPrivilegeEscalation", true), false) << name;
        EXPECT_EQ(sc.value("readOnlyRootFilesystem", false), true) << name;
        EXPECT_EQ(sc["capabilities"]["drop"], json::array({"ALL"})) << name;
        EXPECT_FALSE(sc.value("privileged", false)) << name;
      }
    }
  }

  // The control plane.
  const json* cp = b.find("Deployment", "tessera");
  ASSERT_NE(cp, nullptr);
  // Three replicas, one leader, the state in the API server: nothing holds a rollout back.
  EXPECT_EQ((*cp)["spec"]["replicas"], 3);
  EXPECT_EQ((*cp)["spec"]["strategy"]["type"], "RollingUpdate");
  EXPECT_EQ(
      (*cp)["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
           ["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["topologyKey"],
      "kubernetes.io/hostname");
  const json& podSpec = (*cp)["spec"]["template"]["spec"];
  EXPECT_GT(podSpec.value("terminationGracePeriodSeconds", 0), 0);
  EXPECT_TRUE(podSpec["securityContext"].value("runAsNonRoot", false));
  const json& serve = container(*cp, "tessera");
  EXPECT_EQ(serve["livenessProbe"]["httpGet"]["path"], "/healthz");
  EXPECT_EQ(serve["readinessProbe"]["httpGet"]["path"], "/readyz");
  const std::vector<std::string> args = serve["args"];
  ASSERT_GE(args.size(), 3u);
  EXPECT_EQ(args[0], "serve");
  const auto configAt = std::find(args.begin(), args.end(), "--config");
  ASSERT_NE(configAt, args.end());
  ASSERT_NE(configAt + 1, args.end());
  // The server file comes from a ConfigMap mounted at that path, and it loads.
  std::string serveYaml;
  std::map<std::string, std::string> mounts;  // mountPath -> volume
  for (const json& m : serve["volumeMounts"]) mounts[m["mountPath"]] = m["name"];
  for (const json& v : podSpec["volumes"]) {
    if (v.contains("configMap") && mounts[*(configAt + 1)] == v["name"]) {
      const json* cm = b.find("ConfigMap", v["configMap"]["name"]);
      ASSERT_NE(cm, nullptr);
      serveYaml = (*cm)["data"]["serve.yaml"];
    }
  }
  ASSERT_FALSE(serveYaml.empty()) << "serve.yaml is not mounted at " << *(configAt + 1);
  auto file = config::parseServeYaml(serveYaml, "serve.yaml");
  ASSERT_TRUE(file) << file.error().message;
  ASSERT_TRUE(file->listen && file->tlsCert && file->tlsKey && file->tokenFile);
  EXPECT_FALSE(file->store) << "the state is in the API server, not in a file";
  EXPECT_NE(std::find(args.begin(), args.end(), "--leader-elect"), args.end());
  const auto backend = std::find(args.begin(), args.end(), "--state-backend");
  ASSERT_NE(backend, args.end());
  ASSERT_NE(backend + 1, args.end());
  EXPECT_EQ(*(backend + 1), "kubernetes");
  // The files it names are mounted, and no volume outlives the pod.
  auto mountedFrom = [&](const std::string& path) -> std::string {
    std::string best, volume;
    for (const auto& [at, vol] : mounts) {
      if ((path == at || path.starts_with(at + "/")) && at.size() > best.size()) {
        best = at;
        volume = vol;
      }
    }
    return volume;
  };
  for (const json& v : podSpec["volumes"]) {
    EXPECT_FALSE(v.contains("persistentVolumeClaim")) << v.dump();
  }
  EXPECT_TRUE(b.ofKind("PersistentVolumeClaim").empty());
  for (const std::string* f : {&*file->tlsCert, &*file->tlsKey, &*file->tokenFile}) {
    EXPECT_FALSE(mountedFrom(*f).empty()) << *f << " is not mounted";
  }
  EXPECT_EQ(file->kubeApiServer.value_or(""), "in-cluster");
  // The Service reaches the port the server listens on.
  const std::string listen = *file->listen;
  const int port = std::stoi(listen.substr(listen.rfind(':') + 1));
  const json* svc = b.find("Service", "tessera");
  ASSERT_NE(svc, nullptr);
  // It selects the leader alone: the replicas' pods plus the role label the leader sets.
  json selector = (*svc)["spec"]["selector"];
  EXPECT_EQ(selector.value("tessera.io/role", ""), "leader");
  selector.erase("tessera.io/role");
  EXPECT_TRUE(labelsMatch(selector, (*cp)["spec"]["template"]["metadata"]["labels"]));
  // A budget keeps two of the three through drains.
  const json* cpPdb = b.find("PodDisruptionBudget", "tessera");
  ASSERT_NE(cpPdb, nullptr);
  EXPECT_EQ((*cpPdb)["spec"]["minAvailable"], 2);
  EXPECT_TRUE(labelsMatch((*cpPdb)["spec"]["selector"]["matchLabels"],
                          (*cp)["spec"]["template"]["metadata"]["labels"]));
  EXPECT_EQ(serve["ports"][0]["containerPort"], port);
  EXPECT_EQ((*svc)["spec"]["ports"][0]["port"], port);

  // The agent.
  const json* agent = b.find("DaemonSet", "tessera-agent");
  ASSERT_NE(agent, nullptr);
  const json& apod = (*agent)["spec"]["template"]["spec"];
  EXPECT_GE(apod.value("terminationGracePeriodSeconds", 0), 120)
      << "drain: ~10 s to stop new work, up to 60 s in flight, then unload";
  // Only as a DRA driver (deploy/overlays/dra) does the agent call the Kubernetes API.
  const bool dra = b.find("DeviceClass", "gpu.tessera.io") != nullptr;
  EXPECT_EQ(apod.value("automountServiceAccountToken", true), dra);
  const json& ac = container(*agent, "agent");
  const std::vector<std::string> preStop = ac["lifecycle"]["preStop"]["exec"]["command"];
  ASSERT_GE(preStop.size(), 3u);
  EXPECT_EQ(preStop[1], "agent");
  EXPECT_EQ(preStop[2], "drain");
  bool nodeName = false;
  for (const json& e : ac["env"]) {
    if (e["name"] == "TESSERA_NODE_NAME") {
      nodeName = e["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName";
    }
  }
  EXPECT_TRUE(nodeName) << "the agent must register under the Kubernetes node name";
  bool devicePlugins = false;
  for (const json& v : apod["volumes"]) {
    if (v.contains("hostPath") && v["hostPath"]["path"] == "/var/lib/kubelet/device-plugins") {
      for (const json& m : ac["volumeMounts"]) {
        devicePlugins = devicePlugins || (m["name"] == v["name"] &&
                                          m["mountPath"] == "/var/lib/kubelet/device-plugins");
      }
    }
  }
  EXPECT_TRUE(devicePlugins) << "kubelet's device-plugins directory is not mounted";

  // The second scheduler: its configuration is the shipped file, its extender is our
  // Service, its lease is the one its Role allows.
  const json* sched = b.find("Deployment", "tessera-scheduler");
  ASSERT_NE(sched, nullptr);
  std::string schedConfigText;
  for (const json& v : (*sched)["spec"]["template"]["spec"]["volumes"]) {
    if (v.contains("configMap")) {
      const json* cm = b.find("ConfigMap", v["configMap"]["name"]);
      ASSERT_NE(cm, nullptr);
      schedConfigText = (*cm)["data"].value("scheduler-config.yaml", "");
    }
  }
  EXPECT_EQ(schedConfigText,
            readText(sourceDir() / "deploy/base/kube-scheduler/scheduler-config.yaml"));
  const auto schedDocs = yamlDocuments(schedConfigText, "scheduler-config.yaml");
  ASSERT_EQ(schedDocs.size(), 1u);
  const json& sc = schedDocs[0];
  EXPECT_EQ(sc["profiles"][0]["schedulerName"], "tessera-scheduler");
  const std::string ns = (*svc)["metadata"]["namespace"];
  EXPECT_EQ(sc["extenders"][0]["urlPrefix"],
            "https://tessera." + ns + ".svc:" + std::to_string(port) + "/scheduler");
  EXPECT_EQ(sc["leaderElection"]["resourceNamespace"], ns);
  const json* role = b.find("Role", "tessera-scheduler-leader-election");
  ASSERT_NE(role, nullptr);
  bool leaseAllowed = false;
  for (const json& r : (*role)["rules"]) {
    if (r.contains("resourceNames")) {
      for (const json& n : r["resourceNames"])
        leaseAllowed = leaseAllowed || n == sc["leaderElection"]["resourceName"];
    }
  }
  EXPECT_TRUE(leaseAllowed);
  // The control plane's lease (tessera serve --leader-elect's default name), in its namespace.
  const json* cpLease = b.find("Role", "tessera-control-plane-leader-election");
  ASSERT_NE(cpLease, nullptr);
  EXPECT_EQ((*cpLease)["metadata"]["namespace"], ns);
  bool cpLeaseAllowed = false;
  for (const json& r : (*cpLease)["rules"]) {
    for (const json& n : r.value("resourceNames", json::array())) {
      cpLeaseAllowed = cpLeaseAllowed || (n == "tessera-control-plane" &&
                                          r["verbs"].dump().find("update") != std::string::npos);
    }
  }
  EXPECT_TRUE(cpLeaseAllowed);

  // RBAC: no wildcards; the control plane may bind pods and write ModelDeployment status
  // and nothing of the kind on other resources; nothing is bound to the agent.
  for (const char* kind : {"ClusterRole", "Role"}) {
    for (const json* r : b.ofKind(kind)) {
      for (const json& rule : (*r)["rules"]) {
        for (const char* field : {"apiGroups", "resources", "verbs"}) {
          for (const json& x : rule.value(field, json::array())) {
            EXPECT_NE(x, "*") << (*r)["metadata"]["name"] << " has a wildcard in " << field;
          }
        }
      }
    }
  }
  const json* cpRole = b.find("ClusterRole", "tessera-control-plane");
  ASSERT_NE(cpRole, nullptr);
  auto allows = [&](const std::string& resource, const std::string& verb) {
    for (const json& rule : (*cpRole)["rules"]) {
      const auto& res = rule["resources"];
      const auto& verbs = rule["verbs"];
      if (std::find(res.begin(), res.end(), resource) != res.end() &&
          std::find(verbs.begin(), verbs.end(), verb) != verbs.end()) {
        return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(allows("pods/binding", "create"));
  EXPECT_TRUE(allows("pods", "patch")) << "--leader-elect labels the replica's pod";
  // --state-backend kubernetes: ConfigMaps in the control plane's namespace, nowhere else.
  const json* stateRole = b.find("Role", "tessera-control-plane-state");
  ASSERT_NE(stateRole, nullptr);
  EXPECT_EQ((*stateRole)["metadata"]["namespace"], "tessera-system");
  EXPECT_EQ((*stateRole)["rules"][0]["resources"], json::array({"configmaps"}));
  for (const char* verb : {"get", "list", "create", "update", "delete"}) {
    const json& verbs = (*stateRole)["rules"][0]["verbs"];
    EXPECT_NE(std::find(verbs.begin(), verbs.end(), verb), verbs.end()) << verb;
  }
  EXPECT_FALSE(allows("configmaps", "create")) << "not cluster-wide";
  EXPECT_TRUE(allows("modeldeployments/status", "update"));
  EXPECT_TRUE(allows("modeldeployments", "watch"));
  EXPECT_FALSE(allows("modeldeployments", "update")) << "the spec is the user's";
  EXPECT_FALSE(allows("secrets", "get"));
  EXPECT_FALSE(allows("nodes", "update"));
  for (const char* kind : {"ClusterRoleBinding", "RoleBinding"}) {
    for (const json* rb : b.ofKind(kind)) {
      for (const json& s : (*rb)["subjects"]) {
        if (dra && (*rb)["metadata"]["name"] == "tessera-dra-driver") continue;
        EXPECT_NE(s["name"], "tessera-agent")
            << "the agent needs no Kubernetes API access beyond the DRA driver's";
      }
    }
  }
  // Disruption budgets select some workload's pods.
  for (const json* pdb : b.ofKind("PodDisruptionBudget")) {
    bool selects = false;
    for (const json& o : b.all()) {
      if (o["kind"] == "Deployment" || o["kind"] == "DaemonSet") {
        selects = selects || labelsMatch((*pdb)["spec"]["selector"]["matchLabels"],
                                         o["spec"]["template"]["metadata"]["labels"]);
      }
    }
    EXPECT_TRUE(selects) << (*pdb)["metadata"]["name"] << " selects no pods";
  }
}

class KustomizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kubectl_ = findKubectl();
    if (!kubectl_) {
      GTEST_SKIP() << "kubectl is not installed (scripts/install-deps.sh installs Debian's "
                      "kubernetes-client); the kustomize builds are not checked";
    }
  }
  Built build(const fs::path& dir) {
    const CommandResult r = runCommand("'" + *kubectl_ + "' kustomize '" + dir.string() + "'");
    EXPECT_EQ(r.status, 0) << "kubectl kustomize " << dir << ":\n" << r.err;
    return Built(yamlDocuments(r.out, dir.string()));
  }
  std::optional<std::string> kubectl_;
};

TEST_F(KustomizeTest, TheBaseAndEveryOverlayBuildAndHoldTogether) {
  const auto dirs = kustomizations();
  ASSERT_GE(dirs.size(), 3u) << "the base and at least two overlays";
  for (const fs::path& dir : dirs) {
    const Built b = build(dir);
    checkCommon(b, dir.string());
  }
}

TEST_F(KustomizeTest, ProductionRunsTwoSchedulersWithABudgetAndIssuesItsCertificate) {
  const Built b = build(sourceDir() / "deploy/overlays/production");
  const json* sched = b.find("Deployment", "tessera-scheduler");
  ASSERT_NE(sched, nullptr);
  EXPECT_EQ((*sched)["spec"]["replicas"], 2);
  // The control plane's budget (the base's) and the schedulers'.
  ASSERT_EQ(b.ofKind("PodDisruptionBudget").size(), 2u);
  EXPECT_NE(b.find("PodDisruptionBudget", "tessera-scheduler"), nullptr);
  bool tls = false;
  for (const json* c : b.ofKind("Certificate"))
    tls = tls || (*c)["spec"]["secretName"] == "tessera-tls";
  EXPECT_TRUE(tls) << "nothing issues the tessera-tls Secret";
  for (const json& o : b.all()) {
    if (o["kind"] != "Deployment" && o["kind"] != "DaemonSet") continue;
    for (const json& c : o["spec"]["template"]["spec"]["containers"]) {
      const std::string image = c["image"];
      EXPECT_NE(image.find(':'), std::string::npos) << image << " is not pinned";
      EXPECT_EQ(image.find(":latest"), std::string::npos) << image;
    }
  }
}

TEST_F(KustomizeTest, DevRunsVirtualGpusWithoutTheNvidiaRuntime) {
  const Built b = build(sourceDir() / "deploy/overlays/dev");
  const json* agent = b.find("DaemonSet", "tessera-agent");
  ASSERT_NE(agent, nullptr);
  EXPECT_FALSE((*agent)["spec"]["template"]["spec"].contains("runtimeClassName"));
  EXPECT_FALSE((*agent)["spec"]["template"]["spec"].contains("nodeSelector"));
  std::string agentYaml;
  for (const json* cm : b.ofKind("ConfigMap")) {
    if ((*cm)["data"].contains("agent.yaml")) agentYaml = (*cm)["data"]["agent.yaml"];
  }
  const auto docs = yamlDocuments(agentYaml, "agent.yaml");
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0]["gpuDiscovery"], "virtual");
}

TEST_F(KustomizeTest, DraRunsTheDriverWithItsClassRbacAndKubeletDirectories) {
  const Built b = build(sourceDir() / "deploy/overlays/dra");
  const json* cls = b.find("DeviceClass", "gpu.tessera.io");
  ASSERT_NE(cls, nullptr);
  EXPECT_EQ((*cls)["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ((*cls)["spec"]["selectors"][0]["cel"]["expression"],
            "device.driver == 'gpu.tessera.io'");
  const json* agent = b.find("DaemonSet", "tessera-agent");
  ASSERT_NE(agent, nullptr);
  const json& pod = (*agent)["spec"]["template"]["spec"];
  EXPECT_EQ(pod["automountServiceAccountToken"], true);  // the driver calls the API
  std::set<std::string> mounts;
  for (const json& m : container(*agent, "agent")["volumeMounts"]) mounts.insert(m["mountPath"]);
  for (const char* dir :
       {"/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi"}) {
    EXPECT_TRUE(mounts.contains(dir)) << dir;
  }
  // The agent's service account may read claims and write slices, through a binding.
  const json* role = b.find("ClusterRole", "tessera-dra-driver");
  ASSERT_NE(role, nullptr);
  std::set<std::string> resources;
  for (const json& r : (*role)["rules"]) {
    for (const json& x : r["resources"]) resources.insert(x);
  }
  EXPECT_TRUE(resources.contains("resourceslices"));
  EXPECT_TRUE(resources.contains("resourceclaims"));
  const json* binding = b.find("ClusterRoleBinding", "tessera-dra-driver");
  ASSERT_NE(binding, nullptr);
  EXPECT_EQ((*binding)["subjects"][0]["name"], "tessera-agent");
  std::string agentYaml;
  for (const json* cm : b.ofKind("ConfigMap")) {
    if ((*cm)["data"].contains("agent.yaml")) agentYaml = (*cm)["data"]["agent.yaml"];
  }
  const auto docs = yamlDocuments(agentYaml, "agent.yaml");
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0]["draDriver"]["enabled"], true);
  EXPECT_EQ(docs[0]["devicePlugin"]["enabled"], false);
  // The control plane writes pinned claims: GPU mode dra, and the rules for it.
  std::string serveYaml;
  for (const json* cm : b.ofKind("ConfigMap")) {
    if ((*cm)["data"].contains("serve.yaml")) serveYaml = (*cm)["data"]["serve.yaml"];
  }
  auto serve = config::parseServeYaml(serveYaml, "serve.yaml");
  ASSERT_TRUE(serve) << serve.error().message;
  EXPECT_EQ(serve->gpuMode, "dra");
  const json* cpRole = b.find("ClusterRole", "tessera-control-plane-dra");
  ASSERT_NE(cpRole, nullptr);
  EXPECT_EQ((*cpRole)["rules"][0]["resources"], json::array({"resourceclaims"}));
  const json* cpBinding = b.find("ClusterRoleBinding", "tessera-control-plane-dra");
  ASSERT_NE(cpBinding, nullptr);
  EXPECT_EQ((*cpBinding)["subjects"][0]["name"], "tessera-control-plane");
}

TEST_F(KustomizeTest, DraPinsClaimsFromTemplatesThroughTheLeadersWebhook) {
  const Built b = build(sourceDir() / "deploy/overlays/dra");
  const json* config = b.find("MutatingWebhookConfiguration", "tessera-claims");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ((*config)["apiVersion"], "admissionregistration.k8s.io/v1");
  ASSERT_EQ((*config)["webhooks"].size(), 1u);
  const json& hook = (*config)["webhooks"][0];
  EXPECT_EQ(hook["admissionReviewVersions"], json::array({"v1"}));
  // The route `tessera serve` serves, through the Service that selects the leader.
  const json& service = hook["clientConfig"]["service"];
  EXPECT_EQ(service["path"], std::string(k8s::kAdmissionPath));
  const json* svc = b.find("Service", service["name"].get<std::string>());
  ASSERT_NE(svc, nullptr) << "the webhook names Service " << service["name"];
  EXPECT_EQ((*svc)["metadata"]["namespace"], service["namespace"]);
  EXPECT_EQ((*svc)["spec"]["selector"]["tessera.io/role"], "leader");
  bool port = false;
  for (const json& p : (*svc)["spec"]["ports"]) port = port || p["port"] == service["port"];
  EXPECT_TRUE(port) << "the Service has no port " << service["port"];
  // Claims only, at their creation, and only those a pod's template asks of Tessera's class.
  ASSERT_EQ(hook["rules"].size(), 1u);
  EXPECT_EQ(hook["rules"][0]["apiGroups"], json::array({"resource.k8s.io"}));
  EXPECT_EQ(hook["rules"][0]["resources"], json::array({"resourceclaims"}));
  EXPECT_EQ(hook["rules"][0]["operations"], json::array({"CREATE"}));
  std::string conditions;
  for (const json& c : hook["matchConditions"]) conditions += c["expression"].get<std::string>();
  EXPECT_NE(conditions.find("'" + std::string(k8s::kAnnotationPodClaimName) + "'"),
            std::string::npos)
      << conditions;
  EXPECT_NE(conditions.find("'" + std::string(k8s::kDeviceClassName) + "'"), std::string::npos)
      << conditions;
  // Why each setting: deploy/overlays/dra/webhook.yaml and docs/dra.md.
  EXPECT_EQ(hook["failurePolicy"], "Fail");
  EXPECT_EQ(hook["sideEffects"], "NoneOnDryRun");
  EXPECT_EQ(hook["reinvocationPolicy"], "Never");
  EXPECT_GE(hook["timeoutSeconds"].get<int>(), 1);
  EXPECT_LE(hook["timeoutSeconds"].get<int>(), 30) << "the API server's limit";
  const json& excluded = hook["namespaceSelector"]["matchExpressions"][0];
  EXPECT_EQ(excluded["operator"], "NotIn");
  for (const char* ns : {"kube-system", "tessera-system"}) {
    const json& values = excluded["values"];
    EXPECT_NE(std::find(values.begin(), values.end(), ns), values.end()) << ns;
  }
  // The CA: cert-manager's Certificate for tessera-tls (production) by its name, or the script.
  const std::string inject = (*config)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"];
  const Built production = build(sourceDir() / "deploy/overlays/production");
  const json* cert = production.find("Certificate", inject.substr(inject.find('/') + 1));
  ASSERT_NE(cert, nullptr) << inject << " is not a Certificate of the production overlay";
  EXPECT_EQ((*cert)["metadata"]["namespace"], inject.substr(0, inject.find('/')));
  EXPECT_EQ((*cert)["spec"]["secretName"], "tessera-tls");
  const json& names = (*cert)["spec"]["dnsNames"];
  const std::string host =
      service["name"].get<std::string>() + "." + service["namespace"].get<std::string>() + ".svc";
  EXPECT_NE(std::find(names.begin(), names.end(), host), names.end()) << host;
  const std::string script = readText(sourceDir() / "deploy/overlays/dra/inject-ca.sh");
  EXPECT_NE(script.find("mutatingwebhookconfiguration tessera-claims"), std::string::npos);
  EXPECT_NE(script.find("secret tessera-tls"), std::string::npos);
  // The controller watches the claims the webhook pinned.
  const json* cpRole = b.find("ClusterRole", "tessera-control-plane-dra");
  ASSERT_NE(cpRole, nullptr);
  const json& verbs = (*cpRole)["rules"][0]["verbs"];
  for (const char* verb : {"get", "list", "watch", "create", "delete"}) {
    EXPECT_NE(std::find(verbs.begin(), verbs.end(), verb), verbs.end()) << verb;
  }
}

TEST_F(KustomizeTest, ABrokenKustomizationFails) {
  // The check above can fail: kubectl refuses a kustomization naming a missing file.
  const fs::path dir =
      fs::temp_directory_path() / ("tessera-kustomize-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  { std::ofstream(dir / "kustomization.yaml") << "resources:\n  - missing.yaml\n"; }
  const CommandResult r = runCommand("'" + *kubectl_ + "' kustomize '" + dir.string() + "'");
  fs::remove_all(dir);
  EXPECT_NE(r.status, 0);
}

}  // namespace
}  // namespace tessera::deploytest
