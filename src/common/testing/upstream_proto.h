#pragma once
// Checks of the repository's own definitions of kubelet's gRPC APIs against kubelet's
// published files, copied unchanged into ../shared/reference/kubelet/ (tests only). The
// upstream files are read at test time with protobuf's own parser (libprotoc); a test binary
// that includes this links protoc. Without ../shared the tests skip, saying so.
//
//  - expectSameInterface: every upstream message, field (number, name, type, label, presence,
//    message type, map-ness), enum value and service method (types, streaming) has ours too;
//  - expectSameWire: bytes of a message built from the upstream descriptor read by our
//    generated class with the same values, and the other way round.

#include <filesystem>
#include <memory>
#include <string>

#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

namespace tessera::testing {

namespace pb = google::protobuf;
namespace fs = std::filesystem;

inline const fs::path kReference = fs::path(TESSERA_SHARED_DIR) / "reference" / "kubelet";

class ErrorCollector final : public pb::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int column,
                const std::string& message) override {
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

#define SKIP_WITHOUT_SHARED(upstream, file)                                               \
  if (!fs::exists(kReference / (file))) {                                                 \
    GTEST_SKIP() << "needs " << (kReference / (file)).string()                            \
                 << " (kubelet's published definitions, in ../shared/reference; a fresh " \
                    "clone has none)";                                                    \
  }                                                                                       \
  ASSERT_NE((upstream).descriptor, nullptr) << (upstream).errors.errors

// Every upstream message, field, enum and method has its counterpart in `ours`. With
// `oursPackage`, ours is the same interface under another package (an older API version).
inline void expectSameInterface(const pb::FileDescriptor& upstream, const pb::FileDescriptor& ours,
                                const std::string& oursPackage = "") {
  const std::string package = oursPackage.empty() ? upstream.package() : oursPackage;
  EXPECT_EQ(ours.package(), package);
  auto mapped = [&](const std::string& name) {
    return package + name.substr(upstream.package().size());
  };
  const pb::DescriptorPool& pool = *ours.pool();
  for (int i = 0; i < upstream.message_type_count(); ++i) {
    const pb::Descriptor& up = *upstream.message_type(i);
    const pb::Descriptor* mine = pool.FindMessageTypeByName(mapped(up.full_name()));
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
        EXPECT_EQ(mf->message_type()->full_name(), mapped(uf.message_type()->full_name()))
            << uf.full_name();
      }
      if (uf.is_map()) {
        EXPECT_TRUE(mf->is_map()) << uf.full_name();
      }
    }
  }
  for (int i = 0; i < upstream.enum_type_count(); ++i) {
    const pb::EnumDescriptor& up = *upstream.enum_type(i);
    const pb::EnumDescriptor* mine = pool.FindEnumTypeByName(mapped(up.full_name()));
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
    const pb::ServiceDescriptor* mine = pool.FindServiceByName(mapped(up.full_name()));
    ASSERT_NE(mine, nullptr) << "service " << up.full_name() << " is missing";
    EXPECT_EQ(mine->method_count(), up.method_count()) << up.full_name();
    for (int m = 0; m < up.method_count(); ++m) {
      const pb::MethodDescriptor& um = *up.method(m);
      const pb::MethodDescriptor* mm = mine->FindMethodByName(um.name());
      ASSERT_NE(mm, nullptr) << um.full_name() << " is missing";
      EXPECT_EQ(mm->input_type()->full_name(), mapped(um.input_type()->full_name()))
          << um.full_name();
      EXPECT_EQ(mm->output_type()->full_name(), mapped(um.output_type()->full_name()))
          << um.full_name();
      EXPECT_EQ(mm->client_streaming(), um.client_streaming()) << um.full_name();
      EXPECT_EQ(mm->server_streaming(), um.server_streaming()) << um.full_name();
    }
  }
}

// `text` (text format) as an upstream message, serialised, read as `ours`; then `ours`
// serialised and read back as an upstream message: the same values both ways.
inline void expectSameWire(const Upstream& upstream, const std::string& message,
                           const std::string& text, pb::Message& ours) {
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

}  // namespace tessera::testing
