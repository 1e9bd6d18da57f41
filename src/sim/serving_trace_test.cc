#include "sim/serving_trace.h"

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "sim/serving_model.h"
#include "sim/test_support.h"

namespace tessera::sim {
namespace {

constexpr const char* kAzure =
    "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    "2023-11-16 18:15:46.6805900,374,44\n"
    "2023-11-16 18:15:50.9951690,396,109\n"
    "2023-11-16 18:16:00.0000000,10,0";  // the last line without newline, as published

TEST(ServingTrace, AzureRowsBecomeRequestsRelativeToTheFirst) {
  auto t = parseAzureLlmTrace(kAzure, "dir/AzureLLMInferenceTrace_conv.csv");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->name, "AzureLLMInferenceTrace_conv");
  ASSERT_EQ(t->requests.size(), 3u);
  EXPECT_EQ(t->requests[0].arrivalUs, 0);
  EXPECT_EQ(t->requests[0].inputTokens, 374);
  EXPECT_EQ(t->requests[0].outputTokens, 44);
  EXPECT_EQ(t->requests[1].arrivalUs, 4'314'579);  // 50.9951690 - 46.6805900, to the microsecond
  EXPECT_EQ(t->requests[2].arrivalUs, 13'319'410);
  EXPECT_EQ(t->requests[2].outputTokens, 0);
  EXPECT_EQ(t->requests[2].line, 4);
}

TEST(ServingTrace, AzureAcrossMidnightAndMonthEnds) {
  auto t = parseAzureLlmTrace(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2023-12-31 23:59:59.5,1,1\n"
      "2024-01-01 00:00:00.25,1,1\n",
      "t.csv");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->requests[1].arrivalUs, 750'000);
}

TEST(ServingTrace, AzureTimesWithAUtcOffsetAsThe2024TracesWriteThem) {
  // The Azure 2024 week traces end every time with +00:00 and drop the fraction when it is 0.
  auto t = parseAzureLlmTrace(
      "TIMESTAMP,ContextTokens,GeneratedTokens\n"
      "2024-05-10 00:00:00.009930+00:00,2048,28\n"
      "2024-05-10 00:00:01+00:00,10,5\n"
      "2024-05-10 02:00:02.5+02:00,10,5\n"  // 00:00:02.5 UTC
      "2024-05-09T19:00:03-0500,10,5\n"     // 00:00:03 UTC
      "2024-05-10 00:00:04z,10,5\n",
      "AzureLLMInferenceTrace_conv_1week.csv");
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->requests.size(), 5u);
  EXPECT_EQ(t->requests[0].inputTokens, 2048);
  EXPECT_EQ(t->requests[1].arrivalUs, 990'070);
  EXPECT_EQ(t->requests[2].arrivalUs, 2'490'070);
  EXPECT_EQ(t->requests[3].arrivalUs, 2'990'070);
  EXPECT_EQ(t->requests[4].arrivalUs, 3'990'070);
  for (const char* bad :
       {"2024-05-10 00:00:00+0", "2024-05-10 00:00:00+25:00", "2024-05-10 00:00:00+00:00x",
        "2024-05-10 00:00:00 UTC", "2024-05-10 00:00:00.+00:00", "2024-05-10 00:00:00+00:60"}) {
    auto b = parseAzureLlmTrace(
        std::string("TIMESTAMP,ContextTokens,GeneratedTokens\n") + bad + ",1,1\n", "t.csv");
    ASSERT_FALSE(b) << bad;
    EXPECT_NE(b.error().message.find("t.csv:2: column TIMESTAMP"), std::string::npos)
        << b.error().message;
  }
}

TEST(ServingTrace, TimeScaleStretchesInterArrivalTimes) {
  auto half = parseAzureLlmTrace(kAzure, "t.csv", 0.5);
  ASSERT_TRUE(half) << half.error().message;
  EXPECT_EQ(half->requests[1].arrivalUs, 2'157'290);  // 4'314'579 / 2, rounded
  EXPECT_EQ(half->requests[2].arrivalUs, 6'659'705);
  auto twice = parseMooncakeTrace(
      "{\"timestamp\": 1000, \"input_length\": 5, \"output_length\": 2, \"hash_ids\": [0]}\n"
      "{\"timestamp\": 1500, \"input_length\": 7, \"output_length\": 3, \"hash_ids\": []}\n",
      "m.jsonl", 2.0);
  ASSERT_TRUE(twice) << twice.error().message;
  EXPECT_EQ(twice->requests[0].blockHashes, std::vector<std::uint32_t>{0});
  EXPECT_TRUE(twice->requests[1].blockHashes.empty());
  EXPECT_EQ(twice->requests[0].arrivalUs, 0);
  EXPECT_EQ(twice->requests[1].arrivalUs, 1'000'000);
  EXPECT_FALSE(parseAzureLlmTrace(kAzure, "t.csv", 0));
  EXPECT_FALSE(parseAzureLlmTrace(kAzure, "t.csv", -1));
}

TEST(ServingTrace, TokenScaleReshapesLengthsAndKeepsThePrefixWithinThePrompt) {
  auto azure = parseAzureLlmTrace(kAzure, "conv.csv");
  ASSERT_TRUE(azure) << azure.error().message;
  ServingTrace t = *azure;
  ASSERT_TRUE(scaleTokenLengths(t, 2, 0.125));
  // 374 x 2, 44 / 8 = 5.5 rounds to 6; 109 / 8 = 13.6 → 14; a recorded 0 output stays 0.
  EXPECT_EQ(t.requests[0].inputTokens, 748);
  EXPECT_EQ(t.requests[0].outputTokens, 6);
  EXPECT_EQ(t.requests[1].outputTokens, 14);
  EXPECT_EQ(t.requests[2].outputTokens, 0);
  // A length never rounds to 0: 10 x 0.01 is 1 token.
  ServingTrace tiny = *azure;
  ASSERT_TRUE(scaleTokenLengths(tiny, 0.01, 1));
  EXPECT_EQ(tiny.requests[2].inputTokens, 1);
  EXPECT_EQ(tiny.requests[0].arrivalUs, azure->requests[0].arrivalUs);

  // Mooncake: 1,200 tokens in 3 blocks of 512; halved to 600 tokens its prompt lies in 2.
  ServingTrace mooncake;
  mooncake.name = "m";
  mooncake.requests.push_back({0, 1200, 10, 1, {7, 8, 9}});
  ServingTrace shorter = mooncake;
  ASSERT_TRUE(scaleTokenLengths(shorter, 0.5, 10));
  EXPECT_EQ(shorter.requests[0].inputTokens, 600);
  EXPECT_EQ(shorter.requests[0].outputTokens, 100);
  EXPECT_EQ(shorter.requests[0].blockHashes, (std::vector<std::uint32_t>{7, 8}));
  ServingTrace longer = mooncake;
  ASSERT_TRUE(scaleTokenLengths(longer, 3, 1));
  EXPECT_EQ(longer.requests[0].blockHashes, (std::vector<std::uint32_t>{7, 8, 9}));

  // Refused, the trace untouched: multiples that are not > 0, and lengths past any context.
  for (const auto& [p, o] : {std::pair{0.0, 1.0}, {1.0, -2.0}, {std::nan(""), 1.0}}) {
    ServingTrace same = *azure;
    const auto bad = scaleTokenLengths(same, p, o);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("> 0"), std::string::npos) << bad.error().message;
    EXPECT_EQ(same.requests[0].inputTokens, 374);
  }
  // 1,1 is the trace as read, whatever its lengths (the default of both commands).
  ServingTrace asRead = *azure;
  asRead.requests[0].inputTokens = 20'000'000;
  ASSERT_TRUE(scaleTokenLengths(asRead, 1, 1));
  EXPECT_EQ(asRead.requests[0].inputTokens, 20'000'000);
  ServingTrace huge = *azure;
  const auto tooLong = scaleTokenLengths(huge, 1e5, 1);
  ASSERT_FALSE(tooLong);
  EXPECT_NE(tooLong.error().message.find("line 2"), std::string::npos) << tooLong.error().message;
  EXPECT_EQ(huge.requests[0].inputTokens, 374);
}

TEST(ServingTrace, MooncakeTimestampsKeepAFractionOfAMillisecond) {
  auto fraction = parseMooncakeTrace(
      "{\"timestamp\": 0.25, \"input_length\": 5, \"output_length\": 2}\n"
      "{\"timestamp\": 12.0, \"input_length\": 5, \"output_length\": 2}\n"
      "{\"timestamp\": 1500.5, \"input_length\": 7, \"output_length\": 3}\n",
      "m.jsonl");
  ASSERT_TRUE(fraction) << fraction.error().message;
  EXPECT_EQ(fraction->requests[1].arrivalUs, 11'750);
  EXPECT_EQ(fraction->requests[2].arrivalUs, 1'500'250);
  auto huge = parseMooncakeTrace(
      "{\"timestamp\": 1e300, \"input_length\": 5, \"output_length\": 2}\n", "m.jsonl");
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message.find("m.jsonl:1: field timestamp"), std::string::npos)
      << huge.error().message;
  auto text = parseMooncakeTrace(
      "{\"timestamp\": \"12\", \"input_length\": 5, \"output_length\": 2}\n", "m.jsonl");
  ASSERT_FALSE(text);
  EXPECT_NE(text.error().message.find("expected a non-negative number of milliseconds"),
            std::string::npos)
      << text.error().message;
}

TEST(ServingTrace, AzureMalformedRowsNameFileLineAndColumn) {
  const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  struct Case {
    std::string row;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {"2023-11-16 18:15:46.6805900,x,44", "t.csv:3: column ContextTokens"},
           {"2023-11-16 18:15:46.6805900,12,-1", "t.csv:3: column GeneratedTokens"},
           {"2023-11-16 25:15:46,12,1", "t.csv:3: column TIMESTAMP"},
           {"yesterday,12,1", "t.csv:3: column TIMESTAMP"},
           {"2023-11-16 18:15:46.,12,1", "t.csv:3: column TIMESTAMP"},
           {"2023-11-16 18:15:46,12", "t.csv:3: expected 3 columns, found 2"},
       }) {
    auto t = parseAzureLlmTrace(header + "2023-11-16 18:15:40,1,1\n" + c.row + "\n", "t.csv");
    ASSERT_FALSE(t) << c.row;
    EXPECT_NE(t.error().message.find(c.expected), std::string::npos) << t.error().message;
  }
  auto missing = parseAzureLlmTrace("TIMESTAMP,Tokens\n2023-11-16 18:15:40,1\n", "t.csv");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("missing column ContextTokens"), std::string::npos);
  EXPECT_FALSE(parseAzureLlmTrace(header, "t.csv"));  // no requests
}

TEST(ServingTrace, MooncakeMalformedLinesNameFileLineAndField) {
  const std::string good =
      "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2, \"hash_ids\": [0]}\n";
  struct Case {
    std::string line;
    std::string expected;
  };
  for (const Case& c : std::vector<Case>{
           {"{\"timestamp\": 1, \"input_length\": 5}", "m.jsonl:2: field output_length: missing"},
           {"{\"timestamp\": 1, \"input_length\": \"5\", \"output_length\": 1}",
            "m.jsonl:2: field input_length: expected a non-negative integer"},
           {"{\"timestamp\": -4, \"input_length\": 5, \"output_length\": 1}",
            "m.jsonl:2: field timestamp"},
           {"{\"timestamp\": -0.5, \"input_length\": 5, \"output_length\": 1}",
            "m.jsonl:2: field timestamp: expected a non-negative number of milliseconds"},
           {"{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1.5}",
            "m.jsonl:2: field output_length"},
           {"{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": 3}",
            "m.jsonl:2: field hash_ids"},
           {"{\"timestamp\": 1, \"input_length\": 5, \"output_length\": 1, \"hash_ids\": [-1]}",
            "m.jsonl:2: field hash_ids: expected non-negative integers"},
           {"{\"timestamp\": 1, \"input_length\": 5,", "m.jsonl:2: not a JSON object"},
           {"[1, 2]", "m.jsonl:2: expected a JSON object"},
       }) {
    auto t = parseMooncakeTrace(good + c.line + "\n" + good, "m.jsonl");
    ASSERT_FALSE(t) << c.line;
    EXPECT_NE(t.error().message.find(c.expected), std::string::npos) << t.error().message;
  }
}

TEST(ServingTrace, MooncakeSortsByArrivalKeepingFileOrderAmongEqualTimes) {
  auto t = parseMooncakeTrace(
      "{\"timestamp\": 30, \"input_length\": 1, \"output_length\": 1}\n"
      "\n"
      "{\"timestamp\": 10, \"input_length\": 2, \"output_length\": 1}\n"
      "{\"timestamp\": 10, \"input_length\": 3, \"output_length\": 1}",
      "m.jsonl");
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->requests.size(), 3u);
  EXPECT_EQ(t->requests[0].inputTokens, 2);
  EXPECT_EQ(t->requests[1].inputTokens, 3);
  EXPECT_EQ(t->requests[2].inputTokens, 1);
  EXPECT_EQ(t->requests[2].arrivalUs, 20'000);
  EXPECT_EQ(t->requests[2].line, 1);
}

TEST(ServingTrace, FormatFromTheFileName) {
  EXPECT_EQ(*servingTraceFormatOf("a/b.csv"), ServingTraceFormat::kAzure);
  EXPECT_EQ(*servingTraceFormatOf("b.jsonl"), ServingTraceFormat::kMooncake);
  EXPECT_FALSE(servingTraceFormatOf("b.txt"));
  auto missing = readServingTrace("/nonexistent/x.csv", ServingTraceFormat::kAzure);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/x.csv"), std::string::npos);
}

TEST(ServingTrace, SharedTracesReadWhole) {
  const std::string azure =
      testing::sharedDir() + "/data/azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv";
  const std::string mooncake =
      testing::sharedDir() + "/data/mooncake-fast25-traces/synthetic_trace.jsonl";
  if (!std::filesystem::exists(azure) || !std::filesystem::exists(mooncake)) {
    GTEST_SKIP() << "the serving traces are not under " << testing::sharedDir()
                 << "/data (configure with -DTESSERA_SHARED_DIR=... to run this test)";
  }
  auto a = readServingTrace(azure, ServingTraceFormat::kAzure);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->requests.size(), 19366u);  // every row, the unterminated last one included
  EXPECT_GT(a->spanUs(), Micros{3500} * 1'000'000);
  auto m = readServingTrace(mooncake, ServingTraceFormat::kMooncake);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->requests.size(), 3993u);
  EXPECT_EQ(m->spanUs(), Micros{1'022'025} * 1000);
}

TEST(QpsSeries, SumsContainersPerTimestampInOrder) {
  const std::string csv =
      "timestamp_anon,value,container_ip,request_type\n"
      "160.0,1.5,a,API Requests\n"
      "100.0,2,a,API Requests\n"
      "100.0,0.5,b,Generative Requests\n"
      "220.0,0,,API Requests\n";
  auto s = parseQpsSeries(csv, "qps.csv");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->size(), 3u);
  EXPECT_DOUBLE_EQ((*s)[0].timeS, 0);
  EXPECT_DOUBLE_EQ((*s)[0].qps, 2.5);
  EXPECT_DOUBLE_EQ((*s)[1].timeS, 60);
  EXPECT_DOUBLE_EQ((*s)[1].qps, 1.5);
  EXPECT_DOUBLE_EQ((*s)[2].timeS, 120);
}

TEST(QpsSeries, MalformedRowsNameFileLineAndColumn) {
  auto bad = parseQpsSeries("timestamp,value\n1,2\n2,-1\n", "q.csv");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("q.csv:3: column value"), std::string::npos)
      << bad.error().message;
  auto when = parseQpsSeries("timestamp,value\nsoon,2\n", "q.csv");
  ASSERT_FALSE(when);
  EXPECT_NE(when.error().message.find("q.csv:2: column timestamp"), std::string::npos)
      << when.error().message;
  auto none = parseQpsSeries("time,value\n1,2\n", "q.csv");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no timestamp_anon or timestamp column"), std::string::npos);
  EXPECT_FALSE(parseQpsSeries("timestamp,value\n1,2\n", "q.csv"));  // one point
  EXPECT_FALSE(readQpsSeries("/nonexistent/qps.tar.gz"));
}

TEST(QpsSeries, ShapedTraceFollowsTheSeriesAtTheMeanRateAndIsDeterministic) {
  // 1 for the first half of the span, 3 for the second: scaled to a mean of 4/s over 1,000 s,
  // the halves run at 2/s and 6/s.
  const std::vector<QpsPoint> series = {{0, 1}, {500, 3}, {1000, 3}};
  ServingTrace tokens;
  tokens.requests.push_back({0, 100, 10, 2});
  tokens.requests.push_back({0, 2000, 50, 3});
  QpsShapeOptions o;
  o.spanSeconds = 1000;
  o.meanRatePerSec = 4;
  o.seed = 7;
  auto t = shapeTrace(series, tokens, o, "shape");
  ASSERT_TRUE(t) << t.error().message;
  int first = 0, second = 0;
  for (const auto& r : t->requests) {
    (r.arrivalUs < 500'000'000 ? first : second) += 1;
    EXPECT_TRUE(r.inputTokens == 100 || r.inputTokens == 2000);
  }
  // Poisson counts: 1,000 and 3,000 expected; 5 standard deviations either way.
  EXPECT_NEAR(first, 1000, 5 * std::sqrt(1000.0));
  EXPECT_NEAR(second, 3000, 5 * std::sqrt(3000.0));
  auto again = shapeTrace(series, tokens, o, "shape");
  ASSERT_TRUE(again);
  ASSERT_EQ(again->requests.size(), t->requests.size());
  EXPECT_EQ(again->requests.back().arrivalUs, t->requests.back().arrivalUs);
  o.meanRatePerSec = 0;
  EXPECT_FALSE(shapeTrace(series, tokens, o, "shape"));
  o.meanRatePerSec = 4;
  EXPECT_FALSE(shapeTrace({{0, 0}, {10, 0}}, tokens, o, "shape"));
  EXPECT_FALSE(shapeTrace(series, ServingTrace{}, o, "shape"));
}

TEST(QpsSeries, GenTd26ArchiveReadThroughTar) {
  const std::string path = testing::sharedDir() + "/data/alibaba-gentd26-genai-serving/qps.tar.gz";
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " is not there (configure with -DTESSERA_SHARED_DIR=...)";
  }
  auto s = readQpsSeries(path);
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->size(), 1145u);  // distinct timestamps of the published qps.csv
  EXPECT_GT(s->back().timeS, 20 * 3600);
}

TEST(ServingModelFile, ReadsKeysAndNamesBadOnes) {
  auto m = parseServingModelYaml(
      "kind: ServingModel\nname: small\nweights: 2Gi\nkvBytesPerToken: 65536\n"
      "parametersB: 1\nlayers: 16\nhiddenSize: 2048\n",
      "m.yaml");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->name, "small");
  EXPECT_EQ(m->weightsMib, 2048);
  EXPECT_EQ(m->kvBytesPerToken, 65536);
  EXPECT_DOUBLE_EQ(m->flopsPerToken(), 2e9);
  EXPECT_DOUBLE_EQ(m->attentionFlopsPerPair(), 4.0 * 16 * 2048);
  EXPECT_EQ(m->maxNumSeqs, 256);  // not given: the default's

  auto typo = parseServingModelYaml("name: x\nkvBytesPerTokn: 5\n", "m.yaml");
  ASSERT_FALSE(typo);
  EXPECT_NE(typo.error().message.find("m.yaml:2"), std::string::npos) << typo.error().message;
  EXPECT_NE(typo.error().message.find("kvBytesPerToken"), std::string::npos);
  auto bad = parseServingModelYaml("name: x\nlayers: -3\n", "m.yaml");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("layers"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(parseServingModelYaml("kind: PlacementProfile\nname: x\n", "m.yaml"));
}

TEST(ServingModelFile, DefaultModelOnTheCatalogue) {
  const auto catalog = model::GpuCatalog::builtin();
  auto perf = replicaPerf(ServingModel{}, *catalog.find("H100-80GB"));
  ASSERT_TRUE(perf) << perf.error().message;
  // 0.9 x 81920 MiB - 15317 - 4096 = 54315 MiB of KV cache at 128 KiB per token.
  EXPECT_EQ(perf->kvCapacityTokens, 434520);
  EXPECT_NEAR(perf->flopsPerSec, 989.5e12 * 0.4, 1);
  EXPECT_NEAR(perf->bytesPerSec, 3350e9 * 0.7, 1);
  // A 70B model in BF16 does not fit one 80 GB card.
  ServingModel big;
  big.weightsMib = 140 * 1024;
  EXPECT_FALSE(replicaPerf(big, *catalog.find("H100-80GB")));
  EXPECT_FALSE(replicaPerf(ServingModel{}, *catalog.find("G2")));  // figures unknown
}

}  // namespace
}  // namespace tessera::sim
