// Readers of the FGD artifact's reference orders, ranks and cached results.

#include "sim/reference.h"

#include <gtest/gtest.h>

#include "sim/test_support.h"

namespace tessera::sim {
namespace {

TEST(ArrivalOrders, ReadsSeedColumnsWithShorterSequences) {
  const std::string path =
      testing::writeTempFile("arrival.csv", "seq,seed42,seed43\n0,5,1\n1,3,2\n2,5,\n");
  auto orders = readArrivalOrders(path);
  ASSERT_TRUE(orders) << orders.error().message;
  EXPECT_EQ(orders->seeds, (std::vector<int>{42, 43}));
  auto s42 = orders->forSeed(42);
  ASSERT_TRUE(s42);
  EXPECT_EQ(std::vector<int>(s42->begin(), s42->end()), (std::vector<int>{5, 3, 5}));
  auto s43 = orders->forSeed(43);
  ASSERT_TRUE(s43);
  EXPECT_EQ(s43->size(), 2u);
  auto missing = orders->forSeed(44);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no arrival order for seed 44 (seeds: 42, 43)"),
            std::string::npos);
}

TEST(ArrivalOrders, MalformedCellsNameLineAndColumn) {
  const std::string path = testing::writeTempFile("bad-arrival.csv", "seq,seed42\n0,5\n1,x\n");
  auto orders = readArrivalOrders(path);
  ASSERT_FALSE(orders);
  EXPECT_EQ(orders.error().message, path + ":3: column seed42: expected an integer, got \"x\"");
  const std::string gap = testing::writeTempFile("gap-arrival.csv", "seq,seed42\n0,\n1,4\n");
  auto gapped = readArrivalOrders(gap);
  ASSERT_FALSE(gapped);
  EXPECT_NE(gapped.error().message.find(":3: column seed42: sequence has a gap"),
            std::string::npos);
  const std::string header = testing::writeTempFile("hdr-arrival.csv", "seq,s42\n0,1\n");
  auto badHeader = readArrivalOrders(header);
  ASSERT_FALSE(badHeader);
  EXPECT_EQ(badHeader.error().message, header + ":1: column s42: expected seed<N>");
}

TEST(NodeRanks, MapsNodeNamesToRanks) {
  const std::string path =
      testing::writeTempFile("ranks.csv", "node,seed42,seed43\nn0,2,0\nn1,0,1\nn2,1,2\n");
  auto ranks = readNodeRanks(path);
  ASSERT_TRUE(ranks) << ranks.error().message;
  const std::vector<std::string> names = {"n2", "n0", "n1"};
  auto r = ranks->forSeed(42, names);
  ASSERT_TRUE(r);
  EXPECT_EQ(*r, (std::vector<std::int64_t>{1, 2, 0}));
  const std::vector<std::string> unknown = {"n9"};
  auto bad = ranks->forSeed(42, unknown);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("node n9 of the node list has no rank"), std::string::npos);
}

TEST(ExpectedResults, ReadsRunsAndBuckets) {
  std::string header = "workload,sc_policy,tune,seed,total_gpus";
  std::string row = "openb_pod_list_default,06-FGD,1.3,42,6212";
  for (int k = 0; k < kBuckets; ++k) {
    header += ',';
    header += std::to_string(k);
    row += ',';
    if (k != 7) {
      row += std::to_string(k);
      row += ".5";
    }
  }
  const std::string path = testing::writeTempFile("expected.csv", header + "\n" + row + "\n");
  auto runs = readExpectedResults(path);
  ASSERT_TRUE(runs) << runs.error().message;
  ASSERT_EQ(runs->size(), 1u);
  const ExpectedRun& r = (*runs)[0];
  EXPECT_EQ(r.workload, "openb_pod_list_default");
  EXPECT_EQ(r.policy, "06-FGD");
  EXPECT_DOUBLE_EQ(r.tune, 1.3);
  EXPECT_EQ(r.seed, 42);
  EXPECT_DOUBLE_EQ(*r.values[100], 100.5);
  EXPECT_FALSE(r.values[7]);
}

TEST(ExpectedResults, PolicyIdsAndPaths) {
  EXPECT_EQ(artifactPolicyId("fgd"), "06-FGD");
  EXPECT_EQ(artifactPolicyId("clustering"), "03-GpuClustering");
  EXPECT_EQ(artifactPolicyId("tessera"), "");
  EXPECT_EQ(arrivalOrderPath("/r", "default"), "/r/arrival_order/openb_pod_list_default.csv");
  EXPECT_EQ(nodeRankPath("/r", "cpu050"), "/r/node_tiebreak_rank/openb_pod_list_cpu050.csv");
}

TEST(SharedReference, DefaultTraceFilesParse) {
  TESSERA_SKIP_WITHOUT_SHARED_DATA();
  auto orders = readArrivalOrders(arrivalOrderPath(testing::referenceDir(), "default"));
  ASSERT_TRUE(orders) << orders.error().message;
  auto s42 = orders->forSeed(42);
  ASSERT_TRUE(s42);
  EXPECT_EQ(s42->size(), 10866u);  // tuning_summary.csv
  auto ranks = readNodeRanks(nodeRankPath(testing::referenceDir(), "default"));
  ASSERT_TRUE(ranks) << ranks.error().message;
  EXPECT_EQ(ranks->nodes.size(), 1213u);
  auto runs = readExpectedResults(testing::expectedDir() + "/analysis_allo_discrete.csv");
  ASSERT_TRUE(runs) << runs.error().message;
  EXPECT_EQ(runs->size(), 17u * 6u * 10u);
}

}  // namespace
}  // namespace tessera::sim
