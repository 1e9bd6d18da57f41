// readPod on figures at and beyond its bounds (regressions found by fuzz/pod_fuzz).

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "k8s/pod.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

json podWith(const json& containers) {
  return {{"metadata", {{"name", "p"}, {"namespace", "ns"}}},
          {"spec", {{"containers", containers}}}};
}

json container(const std::string& resource, const std::string& value) {
  return {{"name", "c"}, {"resources", {{"requests", {{resource, value}}}}}};
}

// Two containers asking for 9e18 GPUs each: the sum overflowed int64 (undefined behaviour,
// reported by UBSan).
TEST(ReadPod, RefusesCountsWhoseSumWouldOverflow) {
  auto r = readPod(podWith(json::array(
                       {container("nvidia.com/gpu", "9e18"), container("nvidia.com/gpu", "9e18")})),
                   nullptr);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "Pod.spec.containers[0].resources.requests[\"nvidia.com/gpu\"]: quantity \"9e18\": "
            "at most 1000000");
}

// 2^32 + 1 GPUs was narrowed to int before the "at most 64" check and read as 1 GPU.
TEST(ReadPod, RefusesGpuCountsBeyondAnIntInsteadOfWrappingThem) {
  auto r = readPod(podWith(json::array({container("nvidia.com/gpu", "4294967297")})), nullptr);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("at most 1000000"), std::string::npos) << r.error().message;
  auto many = readPod(podWith(json::array({container("tessera.io/gpus", "40"),
                                           container("tessera.io/gpus", "40")})),
                      nullptr);
  ASSERT_FALSE(many);
  EXPECT_EQ(many.error().message, "Pod.spec.containers: asks for 80 GPUs per replica");
  auto ok = readPod(podWith(json::array({container("nvidia.com/gpu", "64")})), nullptr);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->request.model.gpusPerReplica, 64);
}

// A per-GPU memory of 9e18 MiB overflowed when multiplied by the GPU count.
TEST(ReadPod, BoundsMemoryAndCpuFigures) {
  auto mem = readPod(podWith(json::array({container("tessera.io/gpu-memory", "9e18")})), nullptr);
  ASSERT_FALSE(mem);
  EXPECT_EQ(mem.error().message,
            "Pod.spec.containers[0].resources.requests[\"tessera.io/gpu-memory\"]: quantity "
            "\"9e18\": at most 16777216 MiB");
  auto cpu = readPod(
      podWith(json::array({container("tessera.io/gpus", "1"), container("cpu", "9e15")})), nullptr);
  ASSERT_FALSE(cpu);
  EXPECT_NE(cpu.error().message.find("at most 10000000 millicores"), std::string::npos)
      << cpu.error().message;
  auto host =
      readPod(podWith(json::array({container("tessera.io/gpus", "1"), container("memory", "4Ei")})),
              nullptr);
  ASSERT_FALSE(host);
  EXPECT_NE(host.error().message.find("MiB"), std::string::npos) << host.error().message;
}

}  // namespace
}  // namespace tessera::k8s
