// The repository's own definitions of kubelet's gRPC APIs (proto/api.proto: the device plugin
// API v1beta1; proto/podresources.proto: PodResources v1) against kubelet's published files,
// copied unchanged into ../shared/reference/kubelet/. The upstream files are read at test
// time with protobuf's own parser (libprotoc), so:
//  - every message, field (number, name, type, label, message type) and enum value upstream
//    has ours too, and the services have the same methods, types and streaming;
//  - bytes written by a message built from the upstream descriptor are read by our generated
//    classes with the same values, and the other way round: the wire interface is the same.
// Without ../shared the tests skip, saying so.

#include "common/testing/upstream_proto.h"
#include "deviceplugin/proto/api.pb.h"
#include "deviceplugin/proto/podresources.pb.h"

namespace tessera::deviceplugin {
namespace {

using tessera::testing::expectSameInterface;
using tessera::testing::expectSameWire;
using tessera::testing::kReference;
using tessera::testing::Upstream;
namespace fs = std::filesystem;

TEST(UpstreamProto, PodResourcesMatchesKubeletsDefinition) {
  Upstream upstream("podresources-v1.proto");
  SKIP_WITHOUT_SHARED(upstream, "podresources-v1.proto");
  expectSameInterface(*upstream.descriptor, *v1::ListPodResourcesResponse::descriptor()->file());
  v1::ListPodResourcesResponse list;
  expectSameWire(upstream, "v1.ListPodResourcesResponse", R"(
      pod_resources {
        name: "chat-7f9c" namespace: "serving"
        containers {
          name: "engine"
          devices { resource_name: "tessera.io/gpus" device_ids: "tessera-gpu1-0"
                    device_ids: "tessera-gpu1-1" topology { nodes { ID: 1 } } }
          cpu_ids: 4 cpu_ids: 5
          memory { memory_type: "memory" size: 1073741824 }
          dynamic_resources {
            claim_name: "gpu" claim_namespace: "serving"
            claim_resources { driver_name: "gpu.tessera.io" pool_name: "node-a"
                              device_name: "gpu-0" share_id: "s1"
                              cdi_devices { name: "tessera.io/gpu=gpu-0" } }
          }
        }
        cpu_ids: 4
      })",
                 list);
  ASSERT_EQ(list.pod_resources_size(), 1);
  EXPECT_EQ(list.pod_resources(0).containers(0).devices(0).device_ids(1), "tessera-gpu1-1");
  v1::GetPodResourcesRequest get;
  expectSameWire(upstream, "v1.GetPodResourcesRequest",
                 R"(pod_name: "chat-7f9c" pod_namespace: "serving")", get);
}

TEST(UpstreamProto, DevicePluginApiMatchesKubeletsDefinition) {
  Upstream upstream("deviceplugin-v1beta1.proto");
  SKIP_WITHOUT_SHARED(upstream, "deviceplugin-v1beta1.proto");
  expectSameInterface(*upstream.descriptor, *v1beta1::AllocateRequest::descriptor()->file());
  v1beta1::AllocateResponse allocate;
  expectSameWire(upstream, "v1beta1.AllocateResponse", R"(
      container_responses {
        envs { key: "NVIDIA_VISIBLE_DEVICES" value: "GPU-0" }
        mounts { container_path: "/c" host_path: "/h" read_only: true }
        devices { container_path: "/dev/nvidia0" host_path: "/dev/nvidia0" permissions: "rw" }
        annotations { key: "a" value: "b" }
        cdi_devices { name: "nvidia.com/gpu=0" }
      })",
                 allocate);
  ASSERT_EQ(allocate.container_responses_size(), 1);
  EXPECT_EQ(allocate.container_responses(0).envs().at("NVIDIA_VISIBLE_DEVICES"), "GPU-0");
  v1beta1::ListAndWatchResponse devices;
  expectSameWire(upstream, "v1beta1.ListAndWatchResponse", R"(
      devices { ID: "tessera-gpu0-0" health: "Healthy" topology { nodes { ID: 0 } } })",
                 devices);
  v1beta1::RegisterRequest reg;
  expectSameWire(upstream, "v1beta1.RegisterRequest", R"(
      version: "v1beta1" endpoint: "tessera.sock" resource_name: "tessera.io/gpus"
      options { get_preferred_allocation_available: true })",
                 reg);
}

}  // namespace
}  // namespace tessera::deviceplugin
