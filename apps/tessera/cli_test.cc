// Runs the built `tessera` binary the way a user does and checks what the user sees: exit
// codes, the file and field named on stderr, and the shape of the JSON output.


#include <map>
#include <set>

#include "cli_test_support.h"

namespace {

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
       {"--help", "place --help", "catalog --help", "simulate fgd --help", "profile --help",
        "version --help", "serve --help", "agent run --help"}) {
    const Outcome run = tessera(args);
    EXPECT_TRUE(exitedWith(run, 0)) << args;
    EXPECT_NE(run.out.find("--help"), std::string::npos) << args << ":\n" << run.out;
    // Commands with their own footer keep the exit codes in it.
    EXPECT_NE(run.out.find("Exit codes: 0 success"), std::string::npos) << args << ":\n"
                                                                        << run.out;
  }
  EXPECT_NE(tessera("place --help").out.find("--cluster"), std::string::npos);
}

// Issue 14, usability: a missing or misspelt command is named, with what would have been.
TEST_F(CliTest, AnUnknownCommandIsNamedWithASuggestion) {
  const Outcome typo = tessera("palce");
  EXPECT_TRUE(exitedWith(typo, 2));
  EXPECT_NE(typo.err.find("unknown command 'palce' (did you mean 'place'?)"), std::string::npos)
      << typo.err;
  const Outcome nested = tessera("simulate bogus");
  EXPECT_TRUE(exitedWith(nested, 2));
  EXPECT_NE(nested.err.find("tessera simulate: unknown command 'bogus'; commands: fgd"),
            std::string::npos)
      << nested.err;
  const Outcome none = tessera("");
  EXPECT_TRUE(exitedWith(none, 2));
  EXPECT_NE(none.err.find("a command is required: one of place, catalog"), std::string::npos)
      << none.err;
  // A bound is written as one, not as the largest double in 300 digits.
  const Outcome context = tessera("profile --context 0 x");
  EXPECT_TRUE(exitedWith(context, 2));
  EXPECT_NE(context.err.find("not in range 1 to 16777216"), std::string::npos) << context.err;
  EXPECT_LT(context.err.size(), 200u) << context.err;
  // simulate's --output is shown and refused by name, not by the enum values behind it.
  const Outcome help = tessera("simulate fgd --help");
  EXPECT_NE(help.out.find("-o,--output {table,json,csv}=table"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("->"), std::string::npos) << help.out;
  const Outcome format = tessera("simulate serving -o xml");
  EXPECT_TRUE(exitedWith(format, 2));
  EXPECT_NE(format.err.find("--output: must be table, json or csv, got \"xml\""),
            std::string::npos)
      << format.err;
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

// Issue 14, bug 4: on examples/, 16 of the 18 requests fit (the 4-GPU replicas go before the
// 2-GPU one that would break an NVLink set), the replicas of one deployment never share a GPU,
// and the advice never evicts a replica the same plan placed.
TEST_F(CliTest, TheExamplesPlanPlacesSixteenSpreadsAndKeepsItsOwnReplicas) {
  const Outcome run = tessera(examplesArgs() + " -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  const json plan = json::parse(run.out);
  EXPECT_EQ(plan.at("assignments").size(), 16u) << plan.at("unplaceable").dump();
  std::set<std::string> placed;
  std::map<std::string, std::set<std::string>> gpusOf;  // deployment -> node/gpu
  for (const json& a : plan.at("assignments")) {
    placed.insert(a.at("replica").get<std::string>());
    for (const json& g : a.at("gpus")) {
      const std::string where = a.at("node").get<std::string>() + "/" + g.at("id").get<std::string>();
      EXPECT_TRUE(gpusOf[a.at("deployment").get<std::string>()].insert(where).second)
          << a.at("deployment") << " has two replicas on " << where;
    }
  }
  for (const json& e : plan.at("evictions")) {
    for (const json& v : e.at("victims")) {
      EXPECT_FALSE(placed.contains(v.get<std::string>())) << "advice evicts planned " << v;
    }
  }
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
      gpusPerReplica: 8
)");
  const Outcome run = tessera("place --cluster " + quoted(write("cluster.yaml", kCluster)) +
                              " --requests " + quoted(requests) + " -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  const json plan = json::parse(run.out);
  ASSERT_EQ(plan.at("unplaceable").size(), 1u);
  EXPECT_FALSE(plan.at("unplaceable").front().at("reason").get<std::string>().empty());
  ASSERT_EQ(plan.at("evictions").size(), 1u);
  const json& advice = plan.at("evictions").front();
  EXPECT_EQ(advice.at("replica"), "giant-0");
  EXPECT_FALSE(advice.at("feasible").get<bool>());
  EXPECT_EQ(advice.at("addGpus").get<int>(), 8);
  EXPECT_TRUE(advice.at("addGpuType").is_string()) << advice.dump();
  EXPECT_TRUE(advice.at("growNode").is_null());
}

// Refused twins share one eviction search (the books do not change between the what-ifs): each
// gets the advice a lone request of its shape gets, under its own replica id.
TEST_F(CliTest, RefusedTwinsGetTheAdviceOfOneAloneUnderTheirOwnIds) {
  const std::string cluster = write("cluster.yaml", std::string(kCluster) + R"(replicas:
  - replicaId: old-0
    node: node-a
    gpus: ["0"]
    model: small
  - replicaId: old-1
    node: node-a
    gpus: ["1"]
    model: small
)");
  auto requestsOf = [&](int count) {
    return write("requests-" + std::to_string(count) + ".yaml", R"(requests:
  - name: big
    count: )" + std::to_string(count) + R"(
    model:
      name: big
      weightsMib: 65536
      priority: 50
)");
  };
  auto adviceOf = [&](int count) {
    const Outcome run = tessera("place --cluster " + quoted(cluster) + " --requests " +
                                quoted(requestsOf(count)) + " -o json");
    EXPECT_TRUE(exitedWith(run, 0)) << run.err;
    return json::parse(run.out).at("evictions");
  };
  const json alone = adviceOf(1);
  ASSERT_EQ(alone.size(), 1u);
  ASSERT_TRUE(alone[0].at("feasible").get<bool>()) << alone.dump();
  const json twins = adviceOf(5);
  ASSERT_EQ(twins.size(), 5u) << twins.dump();
  std::set<std::string> ids;
  for (const json& advice : twins) {
    const std::string id = advice.at("replica").get<std::string>();
    ids.insert(id);
    json same = advice;
    json expected = alone[0];
    same.erase("replica");
    expected.erase("replica");
    ASSERT_TRUE(same.at("placement").is_object()) << same.dump();
    EXPECT_EQ(same["placement"].at("replica"), id) << same.dump();
    same["placement"].erase("replica");
    expected["placement"].erase("replica");
    EXPECT_EQ(same, expected) << id;
  }
  EXPECT_EQ(ids.size(), 5u);
}

// Issue 14, bug 3: no GPU type holds 480 GiB on one card, so no type is advised at all.
TEST_F(CliTest, NoFalseAdviceWhenNoGpuTypeCanHoldTheReplica) {
  const std::string requests = write("requests.yaml", R"(requests:
  - replicaId: giant-0
    model:
      name: giant
      weightsMib: 409600
)");
  const Outcome run = tessera("place --cluster " + quoted(write("cluster.yaml", kCluster)) +
                              " --requests " + quoted(requests) + " -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  const json advice = json::parse(run.out).at("evictions").at(0);
  EXPECT_EQ(advice.at("addGpus").get<int>(), 0);
  EXPECT_TRUE(advice.at("addGpuType").is_null());
  EXPECT_NE(advice.at("reason").get<std::string>().find("no added capacity"), std::string::npos)
      << advice.dump();
}

// Issue 14, bug 3: a misspelt GPU type is an error naming the line, with a suggestion.
TEST_F(CliTest, AMisspeltGpuTypeIsAnErrorWithASuggestion) {
  const std::string requests = write("requests.yaml", R"(requests:
  - replicaId: typo-0
    model: small
    gpuTypes: [L4, H100-80G]
)");
  const Outcome run = tessera("place --cluster " + quoted(write("cluster.yaml", kCluster)) +
                              " --requests " + quoted(requests));
  EXPECT_TRUE(exitedWith(run, 2)) << run.out << run.err;
  EXPECT_NE(run.err.find("requests.yaml:4: requests[0].gpuTypes[1]: unknown GPU type 'H100-80G' "
                         "(did you mean 'H100-80GB'?)"),
            std::string::npos)
      << run.err;
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

// The README's main job: the built-in synthetic default, every policy, one JSON object.
TEST_F(CliTest, SimulateDefaultComparesEveryPolicyInJson) {
  const Outcome run = tessera("simulate fgd --no-progress -o json --seeds 42-43");
  ASSERT_TRUE(exitedWith(run, 0));
  const json report = json::parse(run.out);
  EXPECT_EQ(report.at("trace"), "synthetic");
  const json& policies = report.at("policies");
  for (const char* name :
       {"random", "dotprod", "clustering", "packing", "bestfit", "fgd", "tessera"}) {
    ASSERT_TRUE(policies.contains(name)) << name;
    const json& p = policies.at(name);
    const double mean = p.at("unallocated_gpu_pct_at_100").at("mean");
    EXPECT_GT(mean, 0.0) << name;
    EXPECT_LT(mean, 100.0) << name;
    EXPECT_GE(p.at("unallocated_gpu_pct_at_100").at("sd").get<double>(), 0.0) << name;
    // One point per percent from 0 % arrived to the tuned 130 %; unallocated never negative.
    const json& curve = p.at("curve");
    ASSERT_EQ(curve.size(), 131u) << name;
    for (std::size_t i = 0; i < curve.size(); ++i) {
      EXPECT_EQ(curve[i].at("arrived_pct"), i) << name;
      EXPECT_GE(curve[i].at("unallocated_gpu_pct").get<double>(), 0) << name;
    }
  }
  // The baselines' ordering the paper reports holds on the synthetic default too.
  const auto at100 = [&](const char* name) {
    return policies.at(name).at("unallocated_gpu_pct_at_100").at("mean").get<double>();
  };
  EXPECT_LT(at100("fgd"), at100("random"));
  EXPECT_LT(at100("tessera"), at100("fgd"));
}

// --bound: the LP lower bounds in the table and the JSON, below what each policy leaves.
TEST_F(CliTest, SimulateBoundReportsLowerBounds) {
  const Outcome table =
      tessera("simulate fgd --no-progress --seeds 42 --policy fgd,tessera --bound");
  ASSERT_TRUE(exitedWith(table, 0));
  EXPECT_NE(table.out.find("LP BOUND"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("no policy leaves fewer than"), std::string::npos) << table.out;
  const Outcome run =
      tessera("simulate fgd --no-progress -o json --seeds 42 --policy fgd,tessera --bound");
  ASSERT_TRUE(exitedWith(run, 0));
  const json report = json::parse(run.out);
  const double placeAll = report.at("place_all_lower_bound_pct_at_100").at("mean");
  EXPECT_GT(placeAll, 0.0);
  for (const char* name : {"fgd", "tessera"}) {
    const json& p = report.at("policies").at(name);
    const double bound = p.at("unallocated_gpu_pct_lower_bound_at_100").at("mean");
    const double actual = p.at("unallocated_gpu_pct_at_100").at("mean");
    EXPECT_GE(bound, 0.0) << name;
    EXPECT_LE(bound, actual + 0.01) << name;
    EXPECT_TRUE(p.at("runs").at(0).contains("unallocated_gpu_pct_lower_bound_at_100")) << name;
  }
  const Outcome plain = tessera("simulate fgd --no-progress -o json --seeds 42 --policy fgd");
  ASSERT_TRUE(exitedWith(plain, 0));
  EXPECT_FALSE(json::parse(plain.out).contains("place_all_lower_bound_pct_at_100"));
}

TEST_F(CliTest, SimulateIsDeterministicForAGivenSeed) {
  const std::string args = "simulate fgd --no-progress -o json --seeds 44 --policy random,fgd";
  const Outcome a = tessera(args + " --jobs 1");
  const Outcome b = tessera(args + " --jobs 2");
  ASSERT_TRUE(exitedWith(a, 0));
  ASSERT_TRUE(exitedWith(b, 0));
  // Everything but the measured run times is the same, whatever the parallelism.
  const auto results = [](const Outcome& run) {
    json policies = json::parse(run.out).at("policies");
    for (auto& [name, p] : policies.items()) {
      for (json& r : p.at("runs")) r.erase("seconds");
    }
    return policies;
  };
  EXPECT_TRUE(results(a) == results(b)) << "runs differ between --jobs 1 and --jobs 2";
  const Outcome other = tessera("simulate fgd --no-progress -o json --seeds 45 --policy random");
  ASSERT_TRUE(exitedWith(other, 0));
  EXPECT_FALSE(json::parse(a.out).at("policies").at("random").at("curve") ==
               json::parse(other.out).at("policies").at("random").at("curve"))
      << "seeds 44 and 45 gave the same random curve";
}

TEST_F(CliTest, SimulateWritesCsvSummaryCurvesAndPlots) {
  const fs::path out = dir_ / "out";
  const Outcome run = tessera(
      "simulate fgd --no-progress -o csv --seeds 42 --policy fgd,bestfit "
      "--out-dir " +
      quoted(out.string()));
  ASSERT_TRUE(exitedWith(run, 0));
  EXPECT_EQ(run.out.substr(0, run.out.find('\n')),
            "trace,policy,seeds,unallocated_gpu_pct_at_100_mean,unallocated_gpu_pct_at_100_sd");
  EXPECT_NE(run.out.find("\nsynthetic,fgd,1,"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("\nsynthetic,bestfit,1,"), std::string::npos) << run.out;
  int csvs = 0;
  int svgs = 0;
  for (const auto& entry : fs::directory_iterator(out)) {
    const std::string text = readAll(entry.path());
    if (entry.path().extension() == ".csv") {
      ++csvs;
      EXPECT_NE(text.find("fgd"), std::string::npos) << entry.path();
    } else if (entry.path().extension() == ".svg") {
      ++svgs;
      EXPECT_TRUE(text.starts_with("<svg") || text.starts_with("<?xml")) << entry.path();
      EXPECT_NE(text.find("</svg>"), std::string::npos) << entry.path();
    }
  }
  EXPECT_GE(csvs, 1);
  EXPECT_GE(svgs, 1);
}

constexpr const char* kNodeCsv =
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "node-0,64000,262144,2,V100M16\n"
    "node-1,96000,393216,8,G2\n";
constexpr const char* kPodCsv =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
    "pod-0,8000,16384,1,1000,,LS,Running,0,10,0\n"
    "pod-1,4000,8192,1,500,,LS,Running,1,10,1\n"
    "pod-2,16000,32768,2,1000,,LS,Running,2,10,2\n";

TEST_F(CliTest, SimulateRunsOnATraceGivenAsFiles) {
  const Outcome run = tessera(
      "simulate fgd --no-progress -o json --seeds 42 --policy bestfit"
      " --nodes " +
      quoted(write("nodes.csv", kNodeCsv)) + " --pods " + quoted(write("pods.csv", kPodCsv)));
  ASSERT_TRUE(exitedWith(run, 0));
  const json report = json::parse(run.out);
  EXPECT_EQ(report.at("trace"), "pods");
  EXPECT_EQ(report.at("gpus"), 10);
}

TEST_F(CliTest, SimulateBadTracesExitTwoNamingFileLineAndColumn) {
  const std::string nodes = quoted(write("nodes.csv", kNodeCsv));
  std::string badPods = kPodCsv;
  badPods += "pod-3,4000,8192,x,500,,LS,Running,3,10,3\n";
  const Outcome pods = tessera("simulate fgd --no-progress --nodes " + nodes + " --pods " +
                               quoted(write("pods.csv", badPods)));
  EXPECT_TRUE(exitedWith(pods, 2));
  EXPECT_NE(pods.err.find("pods.csv:5"), std::string::npos) << pods.err;
  EXPECT_NE(pods.err.find("num_gpu"), std::string::npos) << pods.err;

  const Outcome type =
      tessera("simulate fgd --no-progress --pods " + quoted(write("p.csv", kPodCsv)) + " --nodes " +
              quoted(write("n.csv", std::string(kNodeCsv) + "node-2,64000,262144,4,K80\n")));
  EXPECT_TRUE(exitedWith(type, 2));
  EXPECT_NE(type.err.find("n.csv:4"), std::string::npos) << type.err;
  EXPECT_NE(type.err.find("K80"), std::string::npos) << type.err;
  EXPECT_NE(type.err.find("known:"), std::string::npos) << type.err;
  EXPECT_NE(type.err.find("V100M16"), std::string::npos) << type.err;
}

TEST_F(CliTest, SimulateBadFlagsExitTwo) {
  const std::string nodes = quoted(write("nodes.csv", kNodeCsv));
  for (const std::string& args :
       {std::string("simulate fgd --policy fgd,nosuch"), std::string("simulate fgd --seeds 51-42"),
        "simulate fgd --nodes " + nodes, std::string("simulate fgd --jobs -3"),
        std::string("simulate fgd --tune-ratio 0"), std::string("simulate nosuch"),
        "simulate fgd --nodes " + nodes + " --pods " + quoted(dir_ / "missing.csv")}) {
    const Outcome run = tessera(args + " --no-progress");
    EXPECT_TRUE(exitedWith(run, 2)) << "tessera " << args;
    EXPECT_FALSE(run.err.empty()) << "tessera " << args;
    EXPECT_TRUE(run.out.empty()) << "tessera " << args;
  }
  const Outcome policy = tessera("simulate fgd --no-progress --policy fgd,nosuch");
  EXPECT_NE(policy.err.find("nosuch"), std::string::npos) << policy.err;
  EXPECT_NE(policy.err.find("tessera"), std::string::npos) << policy.err;
}

}  // namespace

namespace {


// ---- tessera profile -----------------------------------------------------------------------

// A safetensors file: one BF16 tensor of `elements` elements (zeros).
std::string safetensorsFile(std::uint64_t elements) {
  std::string header = "{\"w\":{\"dtype\":\"BF16\",\"shape\":[" + std::to_string(elements) +
                       "],\"data_offsets\":[0," + std::to_string(elements * 2) + "]}}";
  std::string length(8, '\0');
  for (std::uint64_t n = header.size(), i = 0; i < 8; ++i, n >>= 8) {
    length[i] = static_cast<char>(n & 0xff);
  }
  return length + header + std::string(elements * 2, '\0');
}

constexpr const char* kTinyConfig = R"({"num_hidden_layers": 2, "num_attention_heads": 4,
  "num_key_value_heads": 2, "hidden_size": 64, "max_position_embeddings": 1024,
  "torch_dtype": "bfloat16"})";

TEST_F(CliTest, ProfileDirectoryPrintsTheModelsBody) {
  fs::create_directories(dir_ / "tiny-llama");
  write("tiny-llama/config.json", kTinyConfig);
  write("tiny-llama/model.safetensors", safetensorsFile(512 * 1024));  // 1 MiB
  const std::string model = quoted((dir_ / "tiny-llama").string());
  // KV: 2 layers × 2 heads × (16 + 16) × 2 B = 256 B per token; × 1024 × 4 = 1 MiB.
  Outcome run = tessera("profile " + model + " --concurrency 4 -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  EXPECT_EQ(json::parse(run.out),
            json::parse(R"({"name": "tiny-llama", "weightsMib": 1, "kvCacheMib": 1,
                            "overheadMib": 1025, "gpusPerReplica": 1})"));
  run = tessera("profile " + model + " --tp 2 --name llama -o json");
  ASSERT_TRUE(exitedWith(run, 0));
  EXPECT_EQ(json::parse(run.out).at("gpusPerReplica"), 2);
  EXPECT_EQ(json::parse(run.out).at("overheadMib"), 2049);
  EXPECT_EQ(json::parse(run.out).at("name"), "llama");
  run = tessera("profile " + model);
  ASSERT_TRUE(exitedWith(run, 0));
  EXPECT_NE(run.out.find("256 B per token"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("BF16"), std::string::npos) << run.out;
}

TEST_F(CliTest, ProfileBadInputExitsTwoNamingTheFile) {
  std::string bytes = safetensorsFile(1024);
  const std::string truncated = write("cut.safetensors", bytes.substr(0, bytes.size() - 1));
  Outcome run = tessera("profile " + quoted(truncated));
  EXPECT_TRUE(exitedWith(run, 2));
  EXPECT_TRUE(run.out.empty());
  EXPECT_NE(run.err.find("tessera profile: " + truncated + ": tensor \"w\""), std::string::npos)
      << run.err;
  const std::string gguf = write("m.gguf", std::string("GGUF\x01\0\0\0", 8) + std::string(16, '\0'));
  run = tessera("profile " + quoted(gguf));
  EXPECT_TRUE(exitedWith(run, 2));
  EXPECT_NE(run.err.find("m.gguf: GGUF version 1 is not supported"), std::string::npos) << run.err;
  for (const std::string& args :
       {"profile " + quoted((dir_ / "missing").string()), "profile " + quoted(truncated) + " --tp 0",
        "profile " + quoted(truncated) + " --kv-dtype fp7", std::string("profile"),
        // 0 is not "the default" (it used to be taken as the model's maximum).
        "profile " + quoted(truncated) + " --context 0",
        "profile " + quoted(truncated) + " --context -5",
        std::string("profile x -o yaml")}) {
    run = tessera(args);
    EXPECT_TRUE(exitedWith(run, 2)) << args;
    EXPECT_FALSE(run.err.empty()) << args;
  }
}

}  // namespace
