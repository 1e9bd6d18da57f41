// The repository's own definitions of kubelet's DRA APIs (proto/dra.proto: DRAPlugin v1;
// proto/pluginregistration.proto: plugin registration v1; proto/dra_health.proto and
// dra_health_v1alpha1.proto: DRAResourceHealth v1 and the same under v1alpha1) against kubelet's
// published files in ../shared/reference/kubelet/: the same messages, field numbers, types and
// methods, and the same bytes both ways (common/testing/upstream_proto.h). Skipped without
// ../shared.

#include <gtest/gtest.h>

#include "common/testing/upstream_proto.h"
#include "dra/proto/dra.pb.h"
#include "dra/proto/dra_health.pb.h"
#include "dra/proto/dra_health_v1alpha1.pb.h"
#include "dra/proto/pluginregistration.pb.h"

namespace tessera::dra {
namespace {

using tessera::testing::expectSameInterface;
using tessera::testing::expectSameWire;
using tessera::testing::kReference;
using tessera::testing::Upstream;
namespace fs = std::filesystem;
namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;

TEST(UpstreamProto, DraPluginMatchesKubeletsDefinition) {
  Upstream upstream("dra-v1.proto");
  SKIP_WITHOUT_SHARED(upstream, "dra-v1.proto");
  expectSameInterface(*upstream.descriptor, *drapb::Device::descriptor()->file());
  drapb::NodePrepareResourcesResponse prepared;
  expectSameWire(upstream, "k8s.io.kubelet.pkg.apis.dra.v1.NodePrepareResourcesResponse", R"(
      claims {
        key: "uid-1"
        value {
          devices { request_names: "gpu" pool_name: "node-a" device_name: "gpu-0"
                    cdi_device_ids: "gpu.tessera.io/claim=uid-1-gpu" share_id: "s-1" }
        }
      }
      claims { key: "uid-2" value { error: "not allocated" } })",
                 prepared);
  ASSERT_EQ(prepared.claims().size(), 2u);
  EXPECT_EQ(prepared.claims().at("uid-1").devices(0).share_id(), "s-1");
  EXPECT_TRUE(prepared.claims().at("uid-1").devices(0).has_share_id());
  drapb::NodePrepareResourcesRequest request;
  expectSameWire(upstream, "k8s.io.kubelet.pkg.apis.dra.v1.NodePrepareResourcesRequest",
                 R"(claims { namespace: "serving" uid: "uid-1" name: "chat" })", request);
  EXPECT_EQ(request.claims(0).namespace_(), "serving");
  drapb::NodeUnprepareResourcesResponse unprepared;
  expectSameWire(upstream, "k8s.io.kubelet.pkg.apis.dra.v1.NodeUnprepareResourcesResponse",
                 R"(claims { key: "uid-1" value { error: "busy" } })", unprepared);
}

TEST(UpstreamProto, PluginRegistrationMatchesKubeletsDefinition) {
  Upstream upstream("pluginregistration-v1.proto");
  SKIP_WITHOUT_SHARED(upstream, "pluginregistration-v1.proto");
  expectSameInterface(*upstream.descriptor,
                      *::pluginregistration::PluginInfo::descriptor()->file());
  ::pluginregistration::PluginInfo info;
  expectSameWire(upstream, "pluginregistration.PluginInfo", R"(
      type: "DRAPlugin" name: "gpu.tessera.io"
      endpoint: "/var/lib/kubelet/plugins/gpu.tessera.io/dra.sock"
      supported_versions: "v1.DRAPlugin")",
                 info);
  EXPECT_EQ(info.supported_versions(0), "v1.DRAPlugin");
  ::pluginregistration::RegistrationStatus status;
  expectSameWire(upstream, "pluginregistration.RegistrationStatus",
                 R"(plugin_registered: false error: "version not supported")", status);
}

// One answer of the health stream as the driver writes it (two devices, one unhealthy).
constexpr const char* kHealthAnswer = R"(
    devices { device { pool_name: "node-a" device_name: "gpu-0" } health: HEALTHY
              last_updated_time: 1764806400 health_check_timeout_seconds: 30 }
    devices { device { pool_name: "node-a" device_name: "gpu-1-mig-1g-10gb-0" } health: UNHEALTHY
              last_updated_time: 1764806400 health_check_timeout_seconds: 30
              message: "the node agent reports GPU GPU-1001 unhealthy" })";

TEST(UpstreamProto, DraHealthMatchesKubeletsDefinition) {
  Upstream upstream("dra-health-v1.proto");
  SKIP_WITHOUT_SHARED(upstream, "dra-health-v1.proto");
  expectSameInterface(*upstream.descriptor, *::v1::DeviceHealth::descriptor()->file());
  ::v1::NodeWatchResourcesResponse answer;
  expectSameWire(upstream, "v1.NodeWatchResourcesResponse", kHealthAnswer, answer);
  ASSERT_EQ(answer.devices_size(), 2);
  EXPECT_EQ(answer.devices(1).health(), ::v1::UNHEALTHY);
  ::v1::NodeWatchResourcesRequest request;
  expectSameWire(upstream, "v1.NodeWatchResourcesRequest", "", request);
}

// The 1.34 to 1.36 kubelets call the same API as v1alpha1: the same messages, numbers and
// bytes under that package.
TEST(UpstreamProto, DraHealthV1alpha1IsTheSameInterfaceUnderItsPackage) {
  Upstream upstream("dra-health-v1.proto");
  SKIP_WITHOUT_SHARED(upstream, "dra-health-v1.proto");
  expectSameInterface(*upstream.descriptor, *::v1alpha1::DeviceHealth::descriptor()->file(),
                      "v1alpha1");
  ::v1alpha1::NodeWatchResourcesResponse answer;
  expectSameWire(upstream, "v1.NodeWatchResourcesResponse", kHealthAnswer, answer);
  ASSERT_EQ(answer.devices_size(), 2);
  EXPECT_EQ(answer.devices(0).device().device_name(), "gpu-0");
  EXPECT_EQ(answer.devices(1).health(), ::v1alpha1::UNHEALTHY);
}

}  // namespace
}  // namespace tessera::dra
