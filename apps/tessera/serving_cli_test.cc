// `tessera simulate serving` and `serving-matrix` as a user runs them: traces in every format
// (and broken ones, named by file, line and field), flags out of range, JSON and timelines.

#include "cli_test_support.h"

namespace {

class ServingCli : public CliTest {};  // a suite of its own: gtest keys fixtures by suite name

// An Azure LLM 2023 style trace: `rate` requests per second for `seconds`, then a burst of
// four times that for a minute; the last line without a newline, as published.
std::string azureTrace(int seconds = 240, int rate = 2) {
  std::string csv = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  int t = 0;
  auto row = [&](int ms, int prompt, int output) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "2023-11-16 18:%02d:%02d.%03d0000,%d,%d\n", 15 + ms / 60000,
                  ms / 1000 % 60, ms % 1000, prompt, output);
    csv += buf;
  };
  for (; t < seconds * 1000; t += 1000 / rate) row(t, 800 + t % 700, 40 + t % 200);
  for (int end = t + 60'000; t < end; t += 250 / rate) row(t, 1200, 150);
  csv.pop_back();
  return csv;
}

constexpr const char* kMooncakeTrace =
    "{\"timestamp\": 0, \"input_length\": 6000, \"output_length\": 20, \"hash_ids\": [0, 1]}\n"
    "{\"timestamp\": 500, \"input_length\": 12000, \"output_length\": 5, \"hash_ids\": [0]}\n"
    "{\"timestamp\": 1500, \"input_length\": 300, \"output_length\": 80, \"hash_ids\": []}\n";

TEST_F(ServingCli, SimulateServingJsonHasEveryPolicyAndField) {
  const Outcome run =
      tessera("simulate serving -o json --trace " + quoted(write("azure.csv", azureTrace())));
  ASSERT_TRUE(exitedWith(run, 0));
  const json report = json::parse(run.out);
  EXPECT_EQ(report.at("trace"), "azure");
  EXPECT_EQ(report.at("requests"), 480 + 480);
  const json& policies = report.at("policies");
  for (const char* name :
       {"static-peak", "hpa", "weighted", "littles-law", "kpa", "tessera", "clairvoyant"}) {
    ASSERT_TRUE(policies.contains(name)) << name;
    const json& p = policies.at(name);
    for (const char* field : {"slo_attainment", "gpu_hours", "ttft_p99_ms", "queue_p99_ms"}) {
      EXPECT_TRUE(p.at(field).is_number()) << name << " " << field;
    }
    for (const char* field : {"scale_events", "cold_starts"}) {
      EXPECT_TRUE(p.at(field).is_number_integer()) << name << " " << field;
    }
    EXPECT_GE(p.at("slo_attainment").get<double>(), 0);
    EXPECT_LE(p.at("slo_attainment").get<double>(), 1);
    EXPECT_GT(p.at("gpu_hours").get<double>(), 0);
    // Every request is accounted for.
    EXPECT_EQ(p.at("served").get<int>() + p.at("unserved").get<int>() + p.at("rejected").get<int>(),
              960)
        << name;
  }
  EXPECT_EQ(policies.at("static-peak").at("cold_starts"), 0);
  const json& clairvoyant = policies.at("clairvoyant");
  EXPECT_TRUE(clairvoyant.at("meets_target").get<bool>());
  EXPECT_LE(clairvoyant.at("gpu_hours").get<double>(),
            policies.at("static-peak").at("gpu_hours").get<double>());
  EXPECT_DOUBLE_EQ(clairvoyant.at("vs_clairvoyant").get<double>(), 1.0);
  ASSERT_TRUE(report.at("lower_bound_gpu_hours").is_number());
  const double bound = report.at("lower_bound_gpu_hours").get<double>();
  EXPECT_GT(bound, 0);
  for (const auto& [name, p] : policies.items()) {
    if (p.at("meets_target").get<bool>()) {
      EXPECT_LE(bound, p.at("gpu_hours").get<double>()) << name;
    }
  }
}

TEST_F(ServingCli, SimulateServingIsDeterministicAcrossJobs) {
  const std::string trace = quoted(write("azure.csv", azureTrace()));
  const Outcome one = tessera("simulate serving -o csv -j 1 --trace " + trace);
  const Outcome many = tessera("simulate serving -o csv -j 4 --trace " + trace);
  ASSERT_TRUE(exitedWith(one, 0));
  ASSERT_TRUE(exitedWith(many, 0));
  EXPECT_EQ(one.out, many.out);
  EXPECT_EQ(one.out.rfind("trace,policy,requests,slo_attainment,gpu_hours,", 0), 0u) << one.out;
  EXPECT_EQ(std::count(one.out.begin(), one.out.end(), '\n'), 8);  // header + 7 policies
}

TEST_F(ServingCli, SimulateServingReadsMooncakeAndWritesTimelines) {
  const fs::path out = dir_ / "out";
  const Outcome run = tessera(
      "simulate serving --policy static-peak,clairvoyant --time-scale 0.5"
      " --out-dir " +
      quoted(out.string()) + " --trace " + quoted(write("mooncake.jsonl", kMooncakeTrace)));
  ASSERT_TRUE(exitedWith(run, 0));
  EXPECT_NE(run.out.find("static-peak"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("SLO ATTAINMENT"), std::string::npos) << run.out;
  const std::string timeline = readAll(out / "mooncake-clairvoyant-timeline.csv");
  EXPECT_EQ(timeline.rfind("time_s,arrivals_per_s,queue,running,replicas_loading,replicas_ready,"
                           "replicas_draining",
                           0),
            0u)
      << timeline;
  EXPECT_TRUE(fs::exists(out / "mooncake-static-peak-timeline.csv"));
  const std::string svg = readAll(out / "mooncake-timeline.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  EXPECT_TRUE(fs::exists(out / "mooncake-summary.csv"));
}

// --token-scale reshapes the trace the policies see: answers eight times as long hold more
// requests in flight, and the static peak sizes for them.
TEST_F(ServingCli, SimulateServingTokenScaleReshapesTheTrace) {
  const std::string trace = quoted(write("azure.csv", azureTrace()));
  const auto peak = [&](const std::string& flags) {
    const Outcome run =
        tessera("simulate serving --policy static-peak -o json " + flags + " --trace " + trace);
    EXPECT_TRUE(exitedWith(run, 0)) << run.err;
    return json::parse(run.out).at("policies").at("static-peak").at("peak_replicas").get<int>();
  };
  const int asRecorded = peak("");
  EXPECT_GT(peak("--token-scale 1,8"), asRecorded);
  EXPECT_EQ(peak("--token-scale 1,1"), asRecorded);  // the default: the trace as recorded
}

TEST_F(ServingCli, SimulateReplicaSweepsConcurrency) {
  const Outcome run = tessera(
      "simulate replica --gpu A100-40GB --input-tokens 512 --output-tokens 32 --concurrency 1,8 "
      "-o json");
  ASSERT_TRUE(exitedWith(run, 0)) << run.err;
  const json report = json::parse(run.out);
  EXPECT_EQ(report.at("gpu"), "A100-40GB");
  const json& points = report.at("points");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].at("concurrency"), 1);
  EXPECT_EQ(points[1].at("requests"), 160);
  EXPECT_GT(points[1].at("output_tokens_per_s").get<double>(),
            points[0].at("output_tokens_per_s").get<double>());
  const Outcome bad = tessera("simulate replica --concurrency 1,2.5");
  EXPECT_TRUE(exitedWith(bad, 2));
  EXPECT_NE(bad.err.find("--concurrency"), std::string::npos) << bad.err;
  const Outcome gpu = tessera("simulate replica --gpu K80");
  EXPECT_TRUE(exitedWith(gpu, 2));
  EXPECT_NE(gpu.err.find("K80"), std::string::npos) << gpu.err;
}

TEST_F(ServingCli, SimulateServingMatrixWithoutTracesExitsTwo) {
  const Outcome run = tessera("simulate serving-matrix --data " + quoted((dir_ / "none").string()));
  EXPECT_TRUE(exitedWith(run, 2));
  EXPECT_NE(run.err.find("no trace under"), std::string::npos) << run.err;
  const Outcome rates = tessera("simulate serving-matrix --rates 1,x");
  EXPECT_TRUE(exitedWith(rates, 2));
  EXPECT_NE(rates.err.find("--rates"), std::string::npos) << rates.err;
  const Outcome arg = tessera("simulate serving-matrix --policy-arg static-peak.minReplicas=2");
  EXPECT_TRUE(exitedWith(arg, 2));
  EXPECT_NE(arg.err.find("not an autoscaled policy"), std::string::npos) << arg.err;
  const Outcome value = tessera("simulate serving-matrix --policy-arg tessera.targetUtilization");
  EXPECT_TRUE(exitedWith(value, 2));
  EXPECT_NE(value.err.find("POLICY.KEY=NUMBER"), std::string::npos) << value.err;
  // A rate so low that a trace would span years is refused before any cell runs.
  const std::filesystem::path data = dir_ / "data";
  std::filesystem::create_directories(data / "azure-llm-inference-2023");
  std::ofstream(data / "azure-llm-inference-2023" / "AzureLLMInferenceTrace_conv.csv")
      << azureTrace(10);
  const Outcome slow =
      tessera("simulate serving-matrix --rates 1e-9 --data " + quoted(data.string()));
  EXPECT_TRUE(exitedWith(slow, 2)) << slow.err;
  EXPECT_NE(slow.err.find("azure-conv at rate 1e-09 spans"), std::string::npos) << slow.err;
}

// --traces picks the matrix's traces: builtin-chat needs no data (the built-in hour, whole at each
// rate), a trace read for another's lengths is not run itself, and an unknown name exits 2.
TEST_F(ServingCli, SimulateServingMatrixTracesPicksTheShapes) {
  const std::string base =
      "simulate serving-matrix -o json --gpus H100-80GB --warm-start on --cold-start node-cache "
      "--clairvoyant-runs 2";
  const Outcome unknown = tessera(base + " --traces azure-conv,sharegpt");
  EXPECT_TRUE(exitedWith(unknown, 2)) << unknown.err;
  EXPECT_NE(unknown.err.find("unknown trace 'sharegpt'"), std::string::npos) << unknown.err;
  const Outcome none = tessera(base + " --traces ,");
  EXPECT_TRUE(exitedWith(none, 2)) << none.err;
  EXPECT_NE(none.err.find("--traces: nothing named"), std::string::npos) << none.err;

  const Outcome builtin = tessera(base + " --rates 4 --minutes 1 --traces builtin-chat --data " +
                                  quoted((dir_ / "none").string()));
  ASSERT_TRUE(exitedWith(builtin, 0)) << builtin.err;
  const json report = json::parse(builtin.out);
  const json& cells = report.at("cells");
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].at("trace"), "builtin-chat");
  // The whole hour at 4×, --minutes notwithstanding: the burst at minute 40 is at 600 s, and the
  // last request comes at about 900 s.
  const json& p = cells[0].at("policies").at("static-peak");
  EXPECT_GT(p.at("horizon_s").get<double>(), 850) << p.dump();
  EXPECT_GT(p.at("served").get<int>(), 15000) << p.dump();

  // gentd26-qps alone still reads the Azure trace for its lengths, and runs only itself.
  const std::filesystem::path data = dir_ / "qps-only";
  std::filesystem::create_directories(data / "azure-llm-inference-2023");
  std::ofstream(data / "azure-llm-inference-2023" / "AzureLLMInferenceTrace_conv.csv")
      << azureTrace(10);
  const Outcome qps =
      tessera(base + " --rates 1 --traces gentd26-qps --data " + quoted(data.string()));
  EXPECT_TRUE(exitedWith(qps, 2)) << qps.err;  // no QPS series there: nothing left to run
  EXPECT_NE(qps.err.find("skipping the GenTD26 QPS shape"), std::string::npos) << qps.err;
  EXPECT_EQ(qps.err.find("skipping azure-conv"), std::string::npos) << qps.err;
}

// --skip-minutes takes a held-out window of each recorded trace: minutes 4 to 5 of the test
// trace are its burst alone (480 requests at 8 per second), and a window past the trace's end
// leaves no trace to run, which is refused naming the window.
TEST_F(ServingCli, SimulateServingMatrixSkipMinutesTakesALaterWindow) {
  const std::filesystem::path data = dir_ / "held-out";
  std::filesystem::create_directories(data / "azure-llm-inference-2023");
  std::ofstream(data / "azure-llm-inference-2023" / "AzureLLMInferenceTrace_conv.csv")
      << azureTrace();
  const std::string base =
      "simulate serving-matrix -o json --rates 1 --gpus H100-80GB "
      "--warm-start on --cold-start node-cache --clairvoyant-runs 2 --data " +
      quoted(data.string());
  const Outcome run = tessera(base + " --minutes 1 --skip-minutes 4");
  ASSERT_TRUE(exitedWith(run, 0)) << run.err;
  const json report = json::parse(run.out);
  EXPECT_EQ(report.at("summary").at("skip_minutes"), 4.0);
  const json& cells = report.at("cells");
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(cells[0].at("trace"), "azure-conv");
  const json& p = cells[0].at("policies").at("static-peak");
  EXPECT_EQ(p.at("served").get<int>() + p.at("unserved").get<int>() + p.at("rejected").get<int>(),
            480);
  // Moved to start at 0: the last answer comes before 240 s, where the minute started unmoved.
  EXPECT_LT(p.at("horizon_s").get<double>(), 240) << p.dump();
  const Outcome past = tessera(base + " --minutes 1 --skip-minutes 10");
  EXPECT_TRUE(exitedWith(past, 2)) << past.err;
  EXPECT_NE(past.err.find("no request in minutes 10 to 11"), std::string::npos) << past.err;
  const Outcome negative = tessera(base + " --skip-minutes -1");
  EXPECT_TRUE(exitedWith(negative, 2)) << negative.err;
  EXPECT_NE(negative.err.find("--skip-minutes"), std::string::npos) << negative.err;
  const Outcome tokens = tessera(base + " --qps-tokens sharegpt");
  EXPECT_TRUE(exitedWith(tokens, 2)) << tokens.err;
  EXPECT_NE(tokens.err.find("--qps-tokens"), std::string::npos) << tokens.err;
  // Asked for by name, the long-prompt shape is not skipped quietly when its inputs are absent.
  const Outcome mooncake = tessera(base + " --qps-tokens mooncake");
  EXPECT_TRUE(exitedWith(mooncake, 2)) << mooncake.err;
  EXPECT_NE(mooncake.err.find("--qps-tokens mooncake needs"), std::string::npos) << mooncake.err;
  const Outcome month = tessera(base + " --skip-minutes 1e300");
  EXPECT_TRUE(exitedWith(month, 2)) << month.err;
  EXPECT_NE(month.err.find("at most 44640 (31 days)"), std::string::npos) << month.err;
  // A window past the trace's end is named on stderr (the test trace ends at minute 5).
  const Outcome longer = tessera(base + " --minutes 2 --skip-minutes 4");
  ASSERT_TRUE(exitedWith(longer, 0)) << longer.err;
  EXPECT_NE(longer.err.find("azure-conv ends at minute 5.0"), std::string::npos) << longer.err;
}

TEST_F(ServingCli, SimulateServingBadTracesExitTwoNamingFileLineAndField) {
  std::string csv = azureTrace(10);
  csv += "\n2023-11-16 18:20:00.0000000,12,many";
  const Outcome azure = tessera("simulate serving --trace " + quoted(write("bad.csv", csv)) +
                                " --policy static-peak");
  EXPECT_TRUE(exitedWith(azure, 2));
  EXPECT_NE(azure.err.find("bad.csv:" + std::to_string(2 + 20 + 480)), std::string::npos)
      << azure.err;
  EXPECT_NE(azure.err.find("GeneratedTokens"), std::string::npos) << azure.err;
  EXPECT_TRUE(azure.out.empty());

  const Outcome mooncake =
      tessera("simulate serving --policy static-peak --trace " +
              quoted(write("bad.jsonl", std::string(kMooncakeTrace) +
                                            "{\"timestamp\": 9, \"input_length\": -3, "
                                            "\"output_length\": 1}\n")));
  EXPECT_TRUE(exitedWith(mooncake, 2));
  EXPECT_NE(mooncake.err.find("bad.jsonl:4: field input_length"), std::string::npos)
      << mooncake.err;
}

// --clairvoyant-runs bounds the reference's search: each share's search stops at that many
// simulations, and a shorter search never finds a cheaper plan than a longer one (it is the
// same deterministic search, stopped earlier).
TEST_F(ServingCli, SimulateServingClairvoyantRunsBoundTheSearch) {
  const std::string trace = quoted(write("azure.csv", azureTrace()));
  auto clairvoyant = [&](int runs) {
    const Outcome run = tessera("simulate serving -o json --policy clairvoyant --trace " + trace +
                                " --clairvoyant-runs " + std::to_string(runs));
    EXPECT_TRUE(exitedWith(run, 0)) << run.err;
    return json::parse(run.out).at("policies").at("clairvoyant");
  };
  const json shortSearch = clairvoyant(2);
  const json longSearch = clairvoyant(60);
  // "<share> GPU shares, <n> simulations": at most 2 per share the model fits on (0.5, 0.75
  // and 1 on the H100).
  const std::string detail = shortSearch.at("detail").get<std::string>();
  const std::size_t comma = detail.find(", ");
  ASSERT_NE(comma, std::string::npos) << detail;
  EXPECT_LE(std::stoi(detail.substr(comma + 2)), 2 * 3) << detail;
  EXPECT_GE(shortSearch.at("gpu_hours").get<double>(),
            longSearch.at("gpu_hours").get<double>() - 1e-9);
}

TEST_F(ServingCli, SimulateServingBadFlagsExitTwo) {
  const std::string trace = quoted(write("azure.csv", azureTrace(10)));
  for (const std::string& args :
       {"--policy hpa,nosuch --trace " + trace, "--time-scale 0 --trace " + trace,
        "--gpu K80 --trace " + trace, "--format xml --trace " + trace,
        "--slo-ttft-ms -5 --trace " + trace, "--router-queue-depth -1 --trace " + trace,
        "--clairvoyant-runs 0 --trace " + trace, "--trace " + quoted(dir_ / "missing.csv"),
        "--token-scale 2 --trace " + trace, "--token-scale 1,0 --trace " + trace,
        "--token-scale 1e6,1 --trace " + trace,
        "--model " + quoted(write("m.yaml", "name: x\nlayrs: 3\n")) + " --trace " + trace,
        std::string("--policy hpa --format qps")}) {  // (no --trace: the built-in trace)
    const Outcome run = tessera("simulate serving " + args);
    EXPECT_TRUE(exitedWith(run, 2)) << args;
    EXPECT_FALSE(run.err.empty()) << args;
    EXPECT_TRUE(run.out.empty()) << args;
  }
  const Outcome policy = tessera("simulate serving --policy nosuch --trace " + trace);
  EXPECT_NE(policy.err.find("nosuch"), std::string::npos) << policy.err;
  EXPECT_NE(policy.err.find("littles-law"), std::string::npos) << policy.err;
  const Outcome model =
      tessera("simulate serving --model " + quoted(write("m.yaml", "name: x\nlayrs: 3\n")) +
              " --trace " + trace);
  EXPECT_NE(model.err.find("m.yaml:2"), std::string::npos) << model.err;
  const Outcome percent = tessera(
      "simulate serving --policy tessera --policy-arg "
      "tessera.scaleDownPercent=150 --trace " +
      trace);
  EXPECT_TRUE(exitedWith(percent, 2)) << percent.err;
  EXPECT_NE(percent.err.find("scaleDownPercent must be a whole number in [1, 100]"),
            std::string::npos)
      << percent.err;
  // A valid one runs: all at once, as HPA does by default.
  const Outcome allAtOnce = tessera(
      "simulate serving --policy tessera --policy-arg "
      "tessera.scaleDownPercent=100 --policy-arg "
      "tessera.scaleDownPeriodSeconds=15 -o json --trace " +
      trace);
  EXPECT_TRUE(exitedWith(allAtOnce, 0)) << allAtOnce.err;
}

// Figures so large that the replay would overflow its clock or exhaust memory are refused up
// front, naming what is out of range (they once crashed or died of bad_alloc).
TEST_F(ServingCli, SimulateServingRefusesSpansAndTargetsBeyondItsRange) {
  const std::string trace = quoted(write("azure.csv", azureTrace(10)));
  const std::string series = quoted(write("q.csv", "timestamp,value\n0,1\n10,1\n"));
  const struct {
    std::string args, says;
  } cases[] = {
      {"--time-scale 1e308 --trace " + trace, "azure.csv at time scale 1e+308 spans endless days"},
      {"--time-scale 1e20 --trace " + trace, "at most 31 days"},
      {"--time-scale 1e308", "--time-scale: the built-in trace spans endless days"},
      {"--time-scale 1e4", "--time-scale: the built-in trace spans 417 days"},
      {"--time-scale inf --trace " + trace, "--time-scale must be a number > 0"},
      {"--slo-ttft-ms 1e20 --trace " + trace, "--slo-ttft-ms must be in (0, 3600000]"},
      {"--slo-prefill-factor 1e300 --trace " + trace, "--slo-prefill-factor must be in [0, 1000]"},
      {"--format qps --trace " + series + " --tokens-from " + trace + " --qps-mean 1e12",
       "would hold about 3.6e+15 requests"},
      {"--format qps --trace " + series + " --tokens-from " + trace + " --qps-span 1e15",
       "the shaped QPS series spans 1.16e+10 days"},
      {"--format qps --trace " + series + " --tokens-from " + trace + " --time-scale 1e9",
       "--time-scale: the shaped QPS series spans"},
  };
  for (const auto& c : cases) {
    const Outcome run = tessera("simulate serving --policy hpa " + c.args);
    EXPECT_TRUE(exitedWith(run, 2)) << c.args << "\n" << run.err;
    EXPECT_NE(run.err.find(c.says), std::string::npos) << c.args << "\n" << run.err;
    EXPECT_TRUE(run.out.empty()) << c.args;
  }
  // A long stretch inside the range still runs: the 70-s trace over most of a day.
  const Outcome stretched =
      tessera("simulate serving --policy hpa --time-scale 1000 --trace " + trace + " -o json");
  EXPECT_TRUE(exitedWith(stretched, 0)) << stretched.err;
}

TEST_F(ServingCli, SimulateServingHelp) {
  const Outcome run = tessera("simulate serving --help");
  EXPECT_TRUE(exitedWith(run, 0));
  for (const char* flag : {"--trace", "--format", "--policy", "--gpu", "--model", "--slo-ttft-ms",
                           "--time-scale", "--out-dir"}) {
    EXPECT_NE(run.out.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
