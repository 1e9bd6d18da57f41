// The repository's own definitions of kubelet's gRPC APIs (proto/api.proto: the device plugin
// API v1beta1; proto/podresources.proto: PodResources v1) against kubelet's published files,
// copied unchanged into ../shared/reference/kubelet/. The upstream files are read at test
// time with protobuf's own parser (libprotoc), so:
//  - every message, field (number, name, type, label, message type) and enum value upstream
//    has ours too, and the services have the same methods, types and streaming;
//  - bytes written by a message built from the upstream descriptor are read by our generated
//    classes with the same values, and the other way round: the wire interface is the same.
// Without ../shared the tests skip, saying so.

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>

#include "deviceplugin/proto/api.pb.h"
#include "deviceplugin/proto/podresources.pb.h"

namespace tessera::deviceplugin {
namespace {

namespace pb = google::protobuf;
namespace fs = std::filesystem;

const fs::path kReference = fs::path(TESSERA_SHARED_DIR) / "reference" / "kubelet";

class ErrorCollector final : public pb::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column, const std::string& message) override {
    errors += file + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
              message + "\n";
  }
  std::string errors;
};

// Kubelet's file, parsed; nullptr (and the test skipped by the caller) without ../shared.
struct Upstream {
  explicit Upstream(const std::string& file) {
    if (!fs::exists(kReference / file)) return;
    tree.MapPath("", kReference.string());
    importer = std::make_unique<pb::compiler::Importer>(&tree, &errors);
    descriptor = importer->Import(file);
  }
  pb::compiler::DiskSourceTree tree;
  ErrorCollector errors;
  std::unique_ptr<pb::compiler::Importer> importer;
  const pb::FileDescriptor* descriptor = nullptr;
};

#define SKIP_WITHOUT_SHARED(upstream, file)                                                   \
  if (!fs::exists(kReference / (file))) {                                                     \
    GTEST_SKIP() << "needs " << (kReference / (file)).string()                                \
                 << " (kubelet's published definitions, in ../shared/reference; a fresh "     \
                    "clone has none)";                                                        \
  }                                                                                           \
  ASSERT_NE((upstream).descriptor, nullptr) << (upstream).errors.errors

// Every upstream message, field, enum and method has its counterpart in `ours`.
void expectSameInterface(const pb::FileDescriptor& upstream, const pb::FileDescriptor& ours) {
  EXPECT_EQ(upstream.package(), ours.package());
  const pb::DescriptorPool& pool = *ours.pool();
  for (int i = 0; i < upstream.message_type_count(); ++i) {
    const pb::Descriptor& up = *upstream.message_type(i);
    const pb::Descriptor* mine = pool.FindMessageTypeByName(up.full_name());
    ASSERT_NE(mine, nullptr) << "message " << up.full_name() << " is missing";
    EXPECT_EQ(mine->field_count(), up.field_count()) << up.full_name();
    for (int f = 0; f < up.field_count(); ++f) {
      const pb::FieldDescriptor& uf = *up.field(f);
      const pb::FieldDescriptor* mf = mine->FindFieldByNumber(uf.number());
      ASSERT_NE(mf, nullptr) << up.full_name() << " field " << uf.number() << " (" << uf.name()
                             << ") is missing";
      EXPECT_EQ(mf->name(), uf.name()) << up.full_name() << " field " << uf.number();
      EXPECT_EQ(mf->type(), uf.type()) << uf.full_name();
      EXPECT_EQ(mf->label(), uf.label()) << uf.full_name();
      EXPECT_EQ(mf->has_presence(), uf.has_presence()) << uf.full_name();
      if (uf.message_type() != nullptr) {
        ASSERT_NE(mf->message_type(), nullptr) << uf.full_name();
        EXPECT_EQ(mf->message_type()->full_name(), uf.message_type()->full_name())
            << uf.full_name();
      }
      if (uf.is_map()) {
        EXPECT_TRUE(mf->is_map()) << uf.full_name();
      }
    }
  }
  for (int i = 0; i < upstream.enum_type_count(); ++i) {
    const pb::EnumDescriptor& up = *upstream.enum_type(i);
    const pb::EnumDescriptor* mine = pool.FindEnumTypeByName(up.full_name());
    ASSERT_NE(mine, nullptr) << "enum " << up.full_name() << " is missing";
    for (int v = 0; v < up.value_count(); ++v) {
      const pb::EnumValueDescriptor* mv = mine->FindValueByNumber(up.value(v)->number());
      ASSERT_NE(mv, nullptr) << up.value(v)->full_name();
      EXPECT_EQ(mv->name(), up.value(v)->name());
    }
  }
  EXPECT_EQ(ours.service_count(), upstream.service_count());
  for (int i = 0; i < upstream.service_count(); ++i) {
    const pb::ServiceDescriptor& up = *upstream.service(i);
    const pb::ServiceDescriptor* mine = pool.FindServiceByName(up.full_name());
    ASSERT_NE(mine, nullptr) << "service " << up.full_name() << " is missing";
    EXPECT_EQ(mine->method_count(), up.method_count()) << up.full_name();
    for (int m = 0; m < up.method_count(); ++m) {
      const pb::MethodDescriptor& um = *up.method(m);
      const pb::MethodDescriptor* mm = mine->FindMethodByName(um.name());
      ASSERT_NE(mm, nullptr) << um.full_name() << " is missing";
      EXPECT_EQ(mm->input_type()->full_name(), um.input_type()->full_name()) << um.full_name();
      EXPECT_EQ(mm->output_type()->full_name(), um.output_type()->full_name()) << um.full_name();
      EXPECT_EQ(mm->client_streaming(), um.client_streaming()) << um.full_name();
      EXPECT_EQ(mm->server_streaming(), um.server_streaming()) << um.full_name();
    }
  }
}

// `text` (text format) as an upstream message, serialised, read as `ours`; then `ours`
// serialised and read back as an upstream message: the same values both ways.
void expectSameWire(const Upstream& upstream, const std::string& message, const std::string& text,
                    pb::Message& ours) {
  const pb::Descriptor* type = upstream.importer->pool()->FindMessageTypeByName(message);
  ASSERT_NE(type, nullptr) << message;
  pb::DynamicMessageFactory factory(upstream.importer->pool());
  std::unique_ptr<pb::Message> theirs(factory.GetPrototype(type)->New());
  ASSERT_TRUE(pb::TextFormat::ParseFromString(text, theirs.get())) << text;
  std::string bytes;
  ASSERT_TRUE(theirs->SerializeToString(&bytes));
  ASSERT_TRUE(ours.ParseFromString(bytes)) << message;
  std::string oursText;
  pb::TextFormat::PrintToString(ours, &oursText);
  std::string theirsText;
  pb::TextFormat::PrintToString(*theirs, &theirsText);
  EXPECT_EQ(oursText, theirsText) << message;
  std::unique_ptr<pb::Message> back(factory.GetPrototype(type)->New());
  ASSERT_TRUE(back->ParseFromString(ours.SerializeAsString()));
  std::string backText;
  pb::TextFormat::PrintToString(*back, &backText);
  EXPECT_EQ(backText, theirsText) << message;
}

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
