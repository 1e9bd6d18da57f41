// `tessera validate`: configuration files checked as the commands that read them check them,
// the error naming the file and line, exit 2; valid files summarised, exit 0.

#include "cli_test_support.h"

namespace {

class ValidateCli : public CliTest {};  // a suite of its own: gtest keys fixtures by suite name

TEST_F(ValidateCli, ValidateAcceptsTheExamplesAndTheDeployedAgentConfig) {
  const Outcome r =
      tessera("validate " + example("cluster.yaml") + " " + example("requests.yaml") + " " +
              example("profile.yaml") + " " +
              quoted(std::string(TESSERA_SOURCE_DIR) + "/deploy/base/agent-config.yaml"));
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("valid Cluster (7 nodes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("valid PlacementRequests (18 requests)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("valid PlacementProfile"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("valid AgentConfig"), std::string::npos) << r.out;
  // Requests name the cluster's models: given alone, they do not resolve, whatever the order.
  const Outcome alone = tessera("validate " + example("requests.yaml"));
  EXPECT_EQ(alone.exitCode, 2);
  EXPECT_NE(alone.err.find("requests.yaml:"), std::string::npos) << alone.err;
  EXPECT_NE(alone.err.find("unknown model"), std::string::npos) << alone.err;
  const Outcome reordered =
      tessera("validate " + example("requests.yaml") + " " + example("cluster.yaml"));
  EXPECT_EQ(reordered.exitCode, 0) << reordered.err;
}

TEST_F(ValidateCli, ValidateNamesTheFileLineAndWhatIsWrong) {
  const std::string kind = write("kind.yaml", "apiVersion: tessera.io/v1alpha1\nkind: Clustr\n");
  const Outcome k = tessera("validate " + quoted(kind));
  EXPECT_EQ(k.exitCode, 2);
  EXPECT_NE(k.err.find("did you mean Cluster?"), std::string::npos) << k.err;
  const std::string type = write("type.yaml",
                                 "apiVersion: tessera.io/v1alpha1\nkind: Cluster\nnodes:\n"
                                 "  - name: a\n    gpus: [{type: H100-80G}]\n");
  const Outcome t = tessera("validate -o json " + quoted(type));
  EXPECT_EQ(t.exitCode, 2);
  const json body = json::parse(t.out, nullptr, false);
  ASSERT_TRUE(body.is_object()) << t.out;
  EXPECT_EQ(body["valid"], false);
  ASSERT_EQ(body["files"].size(), 1u);
  EXPECT_EQ(body["files"][0]["kind"], "Cluster");
  const std::string error = body["files"][0]["error"].get<std::string>();
  EXPECT_NE(error.find("type.yaml:5"), std::string::npos) << error;
  EXPECT_NE(error.find("H100-80GB"), std::string::npos) << error;  // the suggestion
  const std::string notYaml = write("broken.yaml", "kind: [Cluster\n");
  const Outcome y = tessera("validate " + quoted(notYaml));
  EXPECT_EQ(y.exitCode, 2);
  EXPECT_NE(y.err.find("broken.yaml:"), std::string::npos) << y.err;
  EXPECT_EQ(tessera("validate /no/such/file.yaml").exitCode, 2);
}

// A ServerConfig is checked as `serve --config` checks it before it opens anything, the files
// it names included: each file here is one serve refuses (found by a new user's trial, where
// validate passed them). A named file absent on this machine (mounted in the pod) is said, not
// failed: the deployed file validates off-cluster.
TEST_F(ValidateCli, AServerConfigIsCheckedAsServeChecksItWithTheFilesItNames) {
  const std::string head = "apiVersion: tessera.io/v1alpha1\nkind: ServerConfig\n";
  auto refused = [&](const std::string& name, const std::string& body, const std::string& says) {
    const Outcome r = tessera("validate " + quoted(write(name, head + body)));
    EXPECT_EQ(r.exitCode, 2) << name << ": " << r.out;
    EXPECT_NE(r.err.find(name), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << name << ": " << r.err;
  };
  const std::string shortToken = write("short-token", "abc\n");
  refused("short.yaml", "tokenFile: " + shortToken + "\n", "shorter than 16 characters");
  refused("open.yaml", "listen: 0.0.0.0:8443\n", "without a token");
  refused("https.yaml", "kubernetes: {apiServer: \"https://10.0.0.1:6443\"}\n",
          "give the CA bundle");
  const std::string badCluster =
      write("bad-cluster.yaml", "nodes:\n  - name: a\n    gpus: [{type: H100-80G}]\n");
  refused("cluster.yaml", "cluster: " + badCluster + "\n", "H100-80GB");
  refused("listen.yaml", "listen: nowhere\n", "HOST:PORT");

  const std::string token = write("token", "0123456789abcdef0123\n");
  const Outcome ok = tessera("validate " + quoted(write("ok.yaml", head + "listen: 0.0.0.0:8443\n" +
                                                                       "tokenFile: " + token +
                                                                       "\n")));
  EXPECT_EQ(ok.exitCode, 0) << ok.err;
  EXPECT_NE(ok.out.find("valid ServerConfig"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find("not checked here"), std::string::npos) << ok.out;

  const Outcome deployed =
      tessera("validate " + quoted(std::string(TESSERA_SOURCE_DIR) + "/deploy/base/serve.yaml"));
  EXPECT_EQ(deployed.exitCode, 0) << deployed.err;
  EXPECT_NE(deployed.out.find("not checked here, absent on this machine: /etc/tessera/token/token"),
            std::string::npos)
      << deployed.out;
}

// Not validate's, but the other file-less start for a new user: `simulate serving` with no
// trace replays the built-in one.
TEST_F(ValidateCli, SimulateServingRunsOnTheBuiltInTraceWithoutFiles) {
  const Outcome r = tessera("simulate serving --policy tessera -o json");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const json body = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(body.is_object()) << r.out.substr(0, 400);
  EXPECT_EQ(body["trace"], "builtin-chat");
  EXPECT_GT(body["policies"]["tessera"]["slo_attainment"].get<double>(), 0.9);
  const Outcome bad = tessera("simulate serving --format qps");
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("need --trace"), std::string::npos) << bad.err;
}

TEST_F(ValidateCli, ValidateChecksAFleetFileAsSimulateFleetReadsIt) {
  const Outcome good = tessera("validate " + example("fleet.yaml"));
  EXPECT_EQ(good.exitCode, 0) << good.err;
  EXPECT_NE(good.out.find("valid Fleet (3 deployments)"), std::string::npos) << good.out;
  const std::string bad =
      write("fleet.yaml",
            "kind: Fleet\nnodes:\n  - {gpuType: H100-80GB, count: 1}\n"
            "deployments:\n  - {name: a, model: gpt-9, traffic: {builtin: chat}}\n");
  const Outcome r = tessera("validate " + quoted(bad));
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("fleet.yaml:5: deployments[0].model: unknown model 'gpt-9'"),
            std::string::npos)
      << r.err;
}

}  // namespace
