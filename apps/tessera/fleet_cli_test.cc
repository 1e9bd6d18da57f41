// `tessera simulate fleet` and `tessera plan` as a user runs them: the built-in synthetic fleet
// (no traces), JSON with every policy's fields, the plots, and bad flags as exit 2.

#include "cli_test_support.h"

namespace {

class FleetCli : public CliTest {};  // a suite of its own: gtest keys fixtures by suite name

constexpr const char* kTraffic = " --data /nonexistent --minutes 10 --checkpoints 3";
const std::string kSmall = std::string(kTraffic) + " --nodes 2";

TEST_F(FleetCli, SimulateFleetJsonHasEveryPolicyAndWritesItsPlots) {
  const fs::path out = dir_ / "out";
  const Outcome run =
      tessera(std::string("simulate fleet -o json -j 2") + kSmall + " --out-dir " + quoted(out));
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const json report = json::parse(run.out);
  EXPECT_NE(report.at("source").get<std::string>().find("built-in synthetic"), std::string::npos);
  EXPECT_EQ(report.at("gpus"), 16);
  for (const char* policy : {"whole-gpu", "time-slicing", "binpack", "tessera"}) {
    const json& p = report.at("policies").at(policy);
    for (const char* key : {"gpu_hours", "slo_attainment", "mean_gpu_memory_utilization",
                            "mean_gpu_compute_utilization", "cold_starts", "cost", "peak_gpus",
                            "cold_starts_by_tier", "cold_start_seconds", "evictions"}) {
      EXPECT_TRUE(p.contains(key)) << policy << "." << key;
    }
    EXPECT_EQ(p.at("deployments").size(), report.at("deployments").size());
  }
  EXPECT_TRUE(report.contains("savings"));
  for (const char* file : {"fleet.json", "fleet_timeline.csv", "fleet_utilization.svg"}) {
    EXPECT_TRUE(fs::exists(out / file)) << file;
  }
  EXPECT_EQ(readAll(out / "fleet_utilization.svg").rfind("<svg", 0), 0u);
  EXPECT_EQ(readAll(out / "fleet_timeline.csv").rfind("time_s,policy,", 0), 0u);
}

TEST_F(FleetCli, SimulateFleetRefusesBadFlags) {
  const Outcome policy = tessera(std::string("simulate fleet --policies hami") + kSmall);
  EXPECT_EQ(policy.exitCode, 2);
  EXPECT_NE(policy.err.find("unknown policy 'hami'"), std::string::npos) << policy.err;
  const Outcome price = tessera(std::string("simulate fleet --price H100-80GB=cheap") + kSmall);
  EXPECT_EQ(price.exitCode, 2);
  EXPECT_NE(price.err.find("--price H100-80GB=cheap"), std::string::npos) << price.err;
  const Outcome type = tessera(std::string("simulate fleet --price B300=9") + kSmall);
  EXPECT_EQ(type.exitCode, 2);
  EXPECT_NE(type.err.find("unknown GPU type 'B300'"), std::string::npos) << type.err;
  const Outcome minutes = tessera("simulate fleet --data /nonexistent --minutes 2");
  EXPECT_EQ(minutes.exitCode, 2);
  EXPECT_NE(minutes.err.find("--minutes"), std::string::npos) << minutes.err;
}

TEST_F(FleetCli, PlanReportsTheFewestGpusPerTypeAndWhyATypeCannotServe) {
  const Outcome run = tessera(std::string("plan -o json --gpu-types H100-80GB,L40S") + kTraffic +
                              " --price H100-80GB=3");
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const json report = json::parse(run.out);
  for (const char* policy : {"tessera", "whole-gpu"}) {
    const json& plan = report.at("plans").at(policy);
    ASSERT_EQ(plan.at("options").size(), 2u);
    const json& h100 = plan.at("options")[0];
    EXPECT_TRUE(h100.at("feasible").get<bool>());
    EXPECT_GT(h100.at("gpus").get<int>(), 0);
    EXPECT_DOUBLE_EQ(h100.at("cost_per_hour").get<double>(), 3.0 * h100.at("gpus").get<int>());
    EXPECT_GE(h100.at("slo_attainment").get<double>(), 0.99);
    const json& l40s = plan.at("options")[1];
    EXPECT_FALSE(l40s.at("feasible").get<bool>());
    EXPECT_NE(l40s.at("why").get<std::string>().find("does not fit"), std::string::npos);
    EXPECT_EQ(plan.at("best"), "H100-80GB");
  }
  // Sharing cannot need more cards than a whole GPU per replica on this traffic.
  EXPECT_LE(report["plans"]["tessera"]["options"][0]["gpus"].get<int>(),
            report["plans"]["whole-gpu"]["options"][0]["gpus"].get<int>());
  const Outcome bad = tessera(std::string("plan --gpu-types H100-80GB,X1") + kTraffic);
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("unknown GPU type 'X1'"), std::string::npos) << bad.err;
}

TEST_F(FleetCli, AFleetFileReplacesTheDefaultExperiment) {
  const Outcome run = tessera("simulate fleet -o json --policies tessera,whole-gpu --fleet " +
                              example("fleet.yaml"));
  ASSERT_EQ(run.exitCode, 0) << run.err;
  const json report = json::parse(run.out);
  EXPECT_EQ(report.at("fleet"), "example");
  EXPECT_EQ(report.at("deployments").size(), 3u);
  EXPECT_EQ(report.at("policies").size(), 2u);
  const Outcome both = tessera("simulate fleet --nodes 3 --fleet " + example("fleet.yaml"));
  EXPECT_EQ(both.exitCode, 2);
  EXPECT_NE(both.err.find("--fleet excludes --nodes"), std::string::npos) << both.err;
  const Outcome bad = tessera("plan --fleet " + quoted(write("f.yaml", "nodes: 3\n")));
  EXPECT_EQ(bad.exitCode, 2);
  EXPECT_NE(bad.err.find("f.yaml:1: nodes"), std::string::npos) << bad.err;
}

}  // namespace
