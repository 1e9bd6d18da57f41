// CSV and trace readers: good files, and malformed rows reported with file, line and column.

#include "sim/trace.h"

#include <gtest/gtest.h>

#include "sim/csv.h"
#include "sim/serving_test_support.h"

namespace tessera::sim {
namespace {

using testing::servingCatalog;

TEST(Csv, SplitsQuotedFieldsAndNumbersLines) {
  auto t = parseCsv("a,b,c\r\n1,\"x,y\",3\n\n4,\"say \"\"hi\"\"\",6\n", "f.csv");
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0].line, 2);
  EXPECT_EQ(t->rows[0].fields[1], "x,y");
  EXPECT_EQ(t->rows[1].line, 4);
  EXPECT_EQ(t->rows[1].fields[1], "say \"hi\"");
  EXPECT_EQ(t->column("c"), 2);
  EXPECT_EQ(t->column("d"), -1);
}

TEST(Csv, WrongColumnCountNamesFileAndLine) {
  auto t = parseCsv("a,b\n1,2\n3\n", "f.csv");
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message, "f.csv:3: expected 2 columns, found 1");
  auto empty = parseCsv("", "e.csv");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("e.csv"), std::string::npos);
}

TEST(NodeList, ReadsNodesWithCatalogueTypes) {
  const char* text =
      "sn,cpu_milli,memory_mib,gpu,model\n"
      "openb-node-0000,64000,262144,2,P100\n"
      "openb-node-0001,96000,393216,8,G2\n"
      "openb-node-0002,32000,131072,4,V100M16\n"
      "openb-node-0003,8000,61440,0,\n";
  auto nodes = parseNodeList(text, "nodes.csv", servingCatalog());
  ASSERT_TRUE(nodes) << nodes.error().message;
  ASSERT_EQ(nodes->size(), 4u);
  const model::NodeSpec& n = (*nodes)[1];
  EXPECT_EQ(n.name, "openb-node-0001");
  EXPECT_EQ(n.cpuMilli, 96000);
  EXPECT_EQ(n.hostMemoryMib, 393216);
  ASSERT_EQ(n.gpus.size(), 8u);
  EXPECT_EQ(n.gpus[7].id, "7");
  EXPECT_EQ(servingCatalog().indexOf(n.gpus[0].type), servingCatalog().indexOf("G2"));
  EXPECT_EQ(servingCatalog().indexOf((*nodes)[2].gpus[0].type),
            servingCatalog().indexOf("V100M16"));
  EXPECT_TRUE((*nodes)[3].gpus.empty());
  EXPECT_EQ(gpuCapacityMilli(*nodes), 14000);
  for (const char* alias : {"P100", "V100M16", "V100M32", "T4", "A10", "G2", "G3"}) {
    EXPECT_NE(servingCatalog().find(alias), nullptr) << alias;
  }
}

TEST(NodeList, UnknownTypeListsTheKnownOnes) {
  auto nodes = parseNodeList("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1024,1,K80\n", "nodes.csv",
                             servingCatalog());
  ASSERT_FALSE(nodes);
  const std::string& m = nodes.error().message;
  EXPECT_EQ(m.rfind("nodes.csv:2: column model: unknown GPU type 'K80' (known: ", 0), 0u) << m;
  EXPECT_NE(m.find("V100M16"), std::string::npos) << m;
  EXPECT_NE(m.find("G3"), std::string::npos) << m;
}

TEST(NodeList, MalformedRowsNameLineAndColumn) {
  struct Case {
    const char* row;
    const char* message;
  };
  const Case cases[] = {
      {"n1,12x,1024,1,T4", "nodes.csv:2: column cpu_milli: expected an integer, got \"12x\""},
      {"n1,1000,-5,1,T4", "nodes.csv:2: column memory_mib: must be in 0..1099511627776, got -5"},
      {"n1,1000,1024,2,", "nodes.csv:2: column model: empty GPU type on a node with GPUs"},
      {",1000,1024,2,T4", "nodes.csv:2: column sn: empty node name"},
      {"n1,1000,1024,1", "nodes.csv:2: expected 5 columns, found 4"},
  };
  for (const Case& c : cases) {
    auto nodes = parseNodeList(std::string("sn,cpu_milli,memory_mib,gpu,model\n") + c.row + "\n",
                               "nodes.csv", servingCatalog());
    ASSERT_FALSE(nodes) << c.row;
    EXPECT_EQ(nodes.error().message, c.message);
  }
  auto missing = parseNodeList("sn,cpu_milli,gpu,model\n", "nodes.csv", servingCatalog());
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("missing column memory_mib"), std::string::npos);
  auto dup = parseNodeList("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,T4\nn1,1,1,1,T4\n",
                           "nodes.csv", servingCatalog());
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().message, "nodes.csv:3: column sn: duplicate node n1");
}

TEST(PodList, ReadsElevenAndFiveColumnFiles) {
  const char* eleven =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
      "openb-pod-0001,6000,12288,1,460,V100M16|V100M32,LS,Running,427061,12902960,427061\n"
      "openb-pod-0002,88000,327680,0,0,,BE,Succeeded,1,2,3\n"
      "openb-pod-0003,64000,262144,8,1000,G2,LS,Running,1,2,3\n";
  auto pods = parsePodList(eleven, "pods.csv", servingCatalog());
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 4u);
  EXPECT_EQ((*pods)[1].gpuMilli, 460);
  EXPECT_EQ((*pods)[1].gpuSpec, "V100M16|V100M32");
  ASSERT_EQ((*pods)[1].gpuTypes.size(), 2u);
  EXPECT_EQ(servingCatalog().indexOf((*pods)[1].gpuTypes[1]), servingCatalog().indexOf("V100M32"));
  EXPECT_EQ((*pods)[2].gpus, 0);
  EXPECT_EQ((*pods)[2].totalGpuMilli(), 0);
  EXPECT_EQ((*pods)[3].totalGpuMilli(), 8000);

  auto five =
      parsePodList("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nopenb-pod-9000,4000,8192,2,1000\n",
                   "multi.csv", servingCatalog());
  ASSERT_TRUE(five) << five.error().message;
  EXPECT_EQ((*five)[0].gpus, 2);
  EXPECT_TRUE((*five)[0].gpuSpec.empty());
}

TEST(PodList, MalformedRowsNameLineAndColumn) {
  const std::string header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\n";
  struct Case {
    const char* row;
    const char* message;
  };
  const Case cases[] = {
      {"p1,1000,1024,1,1001,", "pods.csv:3: column gpu_milli: must be in 0..1000, got 1001"},
      {"p1,1000,1024,one,500,", "pods.csv:3: column num_gpu: expected an integer, got \"one\""},
      {"p1,1000,1024,0,500,", "pods.csv:3: column gpu_milli: must be 0 when num_gpu is 0, got 500"},
      {"p1,1000,1024,2,500,",
       "pods.csv:3: column gpu_milli: a multi-GPU task must take whole GPUs (1000), got 500"},
      {"p1,1000,1024,1,0,",
       "pods.csv:3: column gpu_milli: must be 1..1000 when num_gpu > 0, got 0"},
      {"p1,1000,1024,1,500,T4||P100",
       "pods.csv:3: column gpu_spec: empty GPU type in \"T4||P100\""},
      {"p0,1000,1024,1,500,", "pods.csv:3: column name: duplicate pod p0"},
  };
  for (const Case& c : cases) {
    auto pods = parsePodList(header + "p0,1,1,0,0,\n" + c.row + "\n", "pods.csv", servingCatalog());
    ASSERT_FALSE(pods) << c.row;
    EXPECT_EQ(pods.error().message, c.message);
  }
  auto unknown =
      parsePodList(header + "p1,1000,1024,1,500,T4|H300\n", "pods.csv", servingCatalog());
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message.rfind(
                "pods.csv:2: column gpu_spec: unknown GPU type 'H300' (known: ", 0),
            0u);
}

TEST(PodList, MissingFileIsAnError) {
  auto pods = readPodList("/nonexistent/pods.csv", servingCatalog());
  ASSERT_FALSE(pods);
  EXPECT_EQ(pods.error().message, "/nonexistent/pods.csv: cannot open file");
}

TEST(TraceName, StripsDirectoryPrefixAndExtension) {
  EXPECT_EQ(traceNameOf("../shared/data/alibaba-gpu-2023/openb_pod_list_gpuspec33.csv"),
            "gpuspec33");
  EXPECT_EQ(traceNameOf("my_pods.csv"), "my_pods");
}

}  // namespace
}  // namespace tessera::sim
