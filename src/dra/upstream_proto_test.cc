// The repository's own definitions of kubelet's DRA APIs (proto/dra.proto: DRAPlugin v1;
// proto/pluginregistration.proto: plugin registration v1) against kubelet's published files
// in ../shared/reference/kubelet/: the same messages, field numbers, types and methods, and
// the same bytes both ways (common/testing/upstream_proto.h). Skipped without ../shared.

#include <gtest/gtest.h>

#include "common/testing/upstream_proto.h"
#include "dra/proto/dra.pb.h"
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

}  // namespace
}  // namespace tessera::dra
