// Runs the built `tessera` binary the way a user does and checks what the user sees: exit
// codes, the file and field named on stderr, and the shape of the JSON output.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Outcome {
  int exitCode = -1;
  std::string out;
  std::string err;
};

std::string quoted(const std::string& text) {
  std::string q = "'";
  for (char c : text) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tessera_cli_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  // `args` is passed through the shell; quote paths with quoted().
  Outcome tessera(const std::string& args) {
    const fs::path errPath = dir_ / "stderr.txt";
    const std::string command =
        quoted(TESSERA_BINARY) + " " + args + " 2>" + quoted(errPath.string()) + " </dev/null";
    Outcome run;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen failed for: " << command;
      return run;
    }
    char buffer[4096];
    std::size_t n = 0;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.out.append(buffer, n);
    const int status = ::pclose(pipe);
    run.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.err = readAll(errPath);
    return run;
  }

  static std::string example(const std::string& name) {
    return quoted(std::string(TESSERA_SOURCE_DIR) + "/examples/" + name);
  }
  static std::string examplesArgs() {
    return "place --cluster " + example("cluster.yaml") + " --requests " +
           example("requests.yaml") + " --profile " + example("profile.yaml");
  }

  fs::path dir_;
};

// A small, valid cluster and request set the error cases below each break in one place.
constexpr const char* kCluster = R"(nodes:
  - name: node-a
    gpus:
      - id: "0"
        type: A100-80GB
      - id: "1"
        type: A100-80GB
models:
  - name: small
    weightsMib: 10240
)";

constexpr const char* kRequests = R"(requests:
  - name: small
    count: 2
    model: small
  - replicaId: medium-0
    model:
      name: medium
      weightsMib: 30720
)";

::testing::AssertionResult exitedWith(const Outcome& run, int code) {
  if (run.exitCode == code) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "exit code " << run.exitCode << ", expected " << code << "\nstdout:\n"
         << run.out << "\nstderr:\n"
         << run.err;
}

TEST_F(CliTest, VersionFlagPrintsVersionAndExitsZero) {
  const Outcome run = tessera("--version");
  EXPECT_TRUE(exitedWith(run, 0));
  EXPECT_NE(run.out.find(std::string("tessera ") + TESSERA_VERSION), std::string::npos) << run.out;
}

TEST_F(CliTest, VersionSubcommandSpeaksJson) {
  const Outcome run = tessera("version -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  EXPECT_EQ(json::parse(run.out).at("version"), TESSERA_VERSION);
}

TEST_F(CliTest, HelpWorksOnEveryCommand) {
  for (const char* args :
       {"--help", "place --help", "catalog --help", "simulate fgd --help", "version --help"}) {
    const Outcome run = tessera(args);
    EXPECT_TRUE(exitedWith(run, 0)) << args;
    EXPECT_NE(run.out.find("--help"), std::string::npos) << args << ":\n" << run.out;
  }
  EXPECT_NE(tessera("place --help").out.find("--cluster"), std::string::npos);
}

TEST_F(CliTest, PlaceOnTheExamplesPrintsJsonWithAssignments) {
  const Outcome run = tessera(examplesArgs() + " -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  const json plan = json::parse(run.out);
  for (const char* key : {"assignments", "unplaceable", "evictions", "gpus"}) {
    ASSERT_TRUE(plan.contains(key) && plan.at(key).is_array()) << key;
  }
  ASSERT_FALSE(plan.at("assignments").empty());
  const json& first = plan.at("assignments").front();
  for (const char* key : {"replica", "model", "node", "gpus", "mode", "memoryReservedMib"}) {
    EXPECT_TRUE(first.contains(key)) << key;
  }
  EXPECT_FALSE(first.at("gpus").empty());
  EXPECT_EQ(plan.at("evictions").size(), plan.at("unplaceable").size());
}

TEST_F(CliTest, PlaceOnTheExamplesPrintsATable) {
  const Outcome run = tessera(examplesArgs());
  ASSERT_TRUE(exitedWith(run, 0));
  EXPECT_NE(run.out.find("Assignments"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("GPUs after the plan"), std::string::npos) << run.out;
}

TEST_F(CliTest, BatchAndSequentialPlaceTheSameSmallSet) {
  const std::string args = "place --cluster " + quoted(write("cluster.yaml", kCluster)) +
                           " --requests " + quoted(write("requests.yaml", kRequests)) + " -o json";
  for (const char* mode : {"batch", "sequential"}) {
    const Outcome run = tessera(args + " --mode " + mode);
    ASSERT_TRUE(exitedWith(run, 0)) << mode;
    const json plan = json::parse(run.out);
    EXPECT_EQ(plan.at("mode"), mode);
    EXPECT_EQ(plan.at("assignments").size(), 3u) << mode;
    EXPECT_TRUE(plan.at("unplaceable").empty()) << mode;
    for (const json& a : plan.at("assignments")) {
      EXPECT_TRUE(a.at("score").is_number()) << mode << ": " << a.dump();
    }
  }
}

TEST_F(CliTest, ExplainGivesRejectionsAndTheScoreBreakdown) {
  const std::string args = "place --cluster " + quoted(write("cluster.yaml", kCluster)) +
                           " --requests " + quoted(write("requests.yaml", kRequests));
  const Outcome run = tessera(args + " -o json --explain medium-0");
  ASSERT_TRUE(exitedWith(run, 0));
  const json explain = json::parse(run.out).at("explain");
  EXPECT_EQ(explain.at("replica"), "medium-0");
  EXPECT_TRUE(explain.at("placed").get<bool>());
  EXPECT_FALSE(explain.at("scoreBreakdown").empty());
  EXPECT_TRUE(explain.at("rejections").is_array());

  const Outcome table = tessera(args + " --explain medium-0");
  ASSERT_TRUE(exitedWith(table, 0));
  EXPECT_NE(table.out.find("Explanation for medium-0"), std::string::npos) << table.out;
}

TEST_F(CliTest, UnplaceableRequestGetsAReasonAndAdvice) {
  const std::string requests = write("requests.yaml", R"(requests:
  - replicaId: giant-0
    model:
      name: giant
      weightsMib: 409600
)");
  const Outcome run = tessera("place --cluster " + quoted(write("cluster.yaml", kCluster)) +
                              " --requests " + quoted(requests) + " -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  const json plan = json::parse(run.out);
  ASSERT_EQ(plan.at("unplaceable").size(), 1u);
  EXPECT_FALSE(plan.at("unplaceable").front().at("reason").get<std::string>().empty());
  ASSERT_EQ(plan.at("evictions").size(), 1u);
  EXPECT_EQ(plan.at("evictions").front().at("replica"), "giant-0");
  EXPECT_FALSE(plan.at("evictions").front().at("feasible").get<bool>());
  EXPECT_GT(plan.at("evictions").front().at("addGpus").get<int>(), 0);
}

TEST_F(CliTest, ExistingReplicasAreBookedBeforePlanning) {
  const std::string cluster = write("cluster.yaml", std::string(kCluster) + R"(replicas:
  - replicaId: running-0
    node: node-a
    gpus: ["0"]
    model: small
)");
  const Outcome run = tessera("place --cluster " + quoted(cluster) + " --requests " +
                              quoted(write("requests.yaml", kRequests)) + " -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  bool found = false;
  const json plan = json::parse(run.out);
  for (const json& gpu : plan.at("gpus")) {
    for (const json& replica : gpu.at("replicas")) found = found || replica == "running-0";
  }
  EXPECT_TRUE(found) << run.out;
}

TEST_F(CliTest, ExistingReplicaThatDoesNotFitIsBadInput) {
  const std::string cluster = write("cluster.yaml", std::string(kCluster) + R"(  - name: giant
    weightsMib: 409600
replicas:
  - replicaId: stuck-0
    node: node-a
    gpus: ["0"]
    model: giant
)");
  const Outcome run = tessera("place --cluster " + quoted(cluster) + " --requests " +
                              quoted(write("requests.yaml", kRequests)));
  EXPECT_TRUE(exitedWith(run, 2));
  EXPECT_NE(run.err.find("stuck-0"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("cluster.yaml"), std::string::npos) << run.err;
}

TEST_F(CliTest, MalformedYamlExitsTwoNamingTheFile) {
  const std::string cluster = write("broken.yaml", "nodes:\n  - name: node-a\n    gpus: [\n");
  const Outcome run = tessera("place --cluster " + quoted(cluster) + " --requests " +
                              quoted(write("requests.yaml", kRequests)));
  EXPECT_TRUE(exitedWith(run, 2));
  EXPECT_NE(run.err.find("broken.yaml"), std::string::npos) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

TEST_F(CliTest, UnknownGpuTypeExitsTwoNamingTheType) {
  std::string text = kCluster;
  text.replace(text.find("A100-80GB"), 9, "NoSuchGpu-9000");
  const Outcome run = tessera("place --cluster " + quoted(write("cluster.yaml", text)) +
                              " --requests " + quoted(write("requests.yaml", kRequests)));
  EXPECT_TRUE(exitedWith(run, 2));
  EXPECT_NE(run.err.find("cluster.yaml"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("NoSuchGpu-9000"), std::string::npos) << run.err;
}

TEST_F(CliTest, NegativeSizeExitsTwoNamingTheField) {
  std::string text = kRequests;
  text.replace(text.find("30720"), 5, "-5");
  const Outcome run = tessera("place --cluster " + quoted(write("cluster.yaml", kCluster)) +
                              " --requests " + quoted(write("requests.yaml", text)));
  EXPECT_TRUE(exitedWith(run, 2));
  EXPECT_NE(run.err.find("requests.yaml"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("weightsMib"), std::string::npos) << run.err;
}

TEST_F(CliTest, MissingFileExitsTwoNamingThePath) {
  const std::string missing = (dir_ / "no-such-cluster.yaml").string();
  const Outcome run = tessera("place --cluster " + quoted(missing) + " --requests " +
                              quoted(write("requests.yaml", kRequests)));
  EXPECT_TRUE(exitedWith(run, 2));
  EXPECT_NE(run.err.find("no-such-cluster.yaml"), std::string::npos) << run.err;
}

TEST_F(CliTest, UnknownFlagsAndValuesExitTwo) {
  const std::string files = " --cluster " + quoted(write("cluster.yaml", kCluster)) +
                            " --requests " + quoted(write("requests.yaml", kRequests));
  for (const std::string& args :
       {std::string("--no-such-flag"), std::string(""), std::string("no-such-command"),
        "place --no-such-flag" + files, "place" + files + " -o yaml",
        "place" + files + " --mode random", "place --cluster " + quoted(dir_ / "x.yaml"),
        "place" + files + " --explain nobody", std::string("catalog --type NoSuchGpu-9000")}) {
    const Outcome run = tessera(args);
    EXPECT_TRUE(exitedWith(run, 2)) << "tessera " << args;
    EXPECT_FALSE(run.err.empty()) << "tessera " << args;
  }
}

TEST_F(CliTest, CatalogListsTypesWithMigProfiles) {
  const Outcome run = tessera("catalog -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  bool sawMig = false;
  const json catalog = json::parse(run.out);
  for (const json& type : catalog.at("gpuTypes")) {
    EXPECT_TRUE(type.at("name").is_string());
    sawMig = sawMig || !type.at("migProfiles").empty();
  }
  EXPECT_TRUE(sawMig);

  const Outcome one = tessera("catalog --type a100-80gb");
  ASSERT_TRUE(exitedWith(one, 0));
  EXPECT_NE(one.out.find("MIG profiles"), std::string::npos) << one.out;
}

}  // namespace
