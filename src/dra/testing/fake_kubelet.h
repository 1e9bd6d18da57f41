#pragma once
// A fake kubelet for the DRA driver's tests: the calls kubelet's plugin watcher and its DRA
// manager make, over the driver's real unix sockets (tests only).
//
// Its messages are built from kubelet's own definitions (../shared/reference/kubelet/
// dra-v1.proto, pluginregistration-v1.proto and dra-health-v1.proto, parsed at run time with
// libprotoc) and sent with gRPC's generic stub, so nothing of the repository's generated code is on
// the client side; without ../shared it falls back to the repository's definitions (fromUpstream()
// says which). Requests and answers are JSON with the proto field names.

#include <atomic>
#include <filesystem>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "common/result.h"
#include "common/testing/upstream_proto.h"
#include "dra/prepare.h"

namespace tessera::dra::testing {

class FakeKubelet {
 public:
  FakeKubelet()
      : dra_(std::make_unique<tessera::testing::Upstream>("dra-v1.proto")),
        registration_(std::make_unique<tessera::testing::Upstream>("pluginregistration-v1.proto")),
        health_(std::make_unique<tessera::testing::Upstream>("dra-health-v1.proto")) {}

  bool fromUpstream() const {
    return dra_->descriptor != nullptr && registration_->descriptor != nullptr &&
           health_->descriptor != nullptr;
  }

  // Kubelet's DRA manager's health stream: NodeWatchResources of `service`
  // ("v1.DRAResourceHealth", or "v1alpha1.DRAResourceHealth" as the 1.34 to 1.36 kubelets
  // call it) on the plugin's endpoint, read on a thread of its own until the driver ends it or
  // the watch is cancelled. Every answer is parsed as kubelet's v1 NodeWatchResourcesResponse
  // (v1alpha1's bytes are the same).
  class HealthWatch {
   public:
    ~HealthWatch() {
      cancel();
      if (thread_.joinable()) thread_.join();
    }
    std::vector<nlohmann::json> answers() const {
      std::lock_guard lock(mu_);
      return answers_;
    }
    bool ended() const { return ended_.load(); }
    // The status the stream ended with ("" while it runs, "OK" or the error).
    std::string status() const {
      std::lock_guard lock(mu_);
      return status_;
    }
    void cancel() { ctx_.TryCancel(); }

   private:
    friend class FakeKubelet;
    grpc::ClientContext ctx_;
    mutable std::mutex mu_;
    std::vector<nlohmann::json> answers_;
    std::string status_;
    std::atomic<bool> ended_{false};
    std::thread thread_;
  };

  std::unique_ptr<HealthWatch> watchHealth(const std::string& endpoint,
                                           const std::string& service) {
    auto watch = std::make_unique<HealthWatch>();
    const auto* out = find("v1.NodeWatchResourcesResponse");
    auto channel = grpc::CreateChannel("unix://" + endpoint, grpc::InsecureChannelCredentials());
    HealthWatch* w = watch.get();
    w->thread_ = std::thread([this, w, out, channel, service] {
      grpc::GenericStub stub(channel);
      grpc::CompletionQueue cq;
      void* tag = nullptr;
      bool ok = false;
      auto step = [&] { return cq.Next(&tag, &ok) && ok; };
      auto call = stub.PrepareCall(&w->ctx_, "/" + service + "/NodeWatchResources", &cq);
      call->StartCall(nullptr);
      if (step()) {
        grpc::Slice empty("");  // NodeWatchResourcesRequest has no fields
        grpc::ByteBuffer request(&empty, 1);
        call->Write(request, nullptr);
        if (step()) {
          call->WritesDone(nullptr);
          step();
        }
        for (;;) {
          grpc::ByteBuffer buf;
          call->Read(&buf, nullptr);
          if (!step()) break;
          auto answer = toJson(out, buf);
          std::lock_guard lock(w->mu_);
          w->answers_.push_back(answer ? *answer
                                       : nlohmann::json{{"unparsed", answer.error().message}});
        }
      }
      grpc::Status status;
      call->Finish(&status, nullptr);
      cq.Next(&tag, &ok);
      cq.Shutdown();
      while (cq.Next(&tag, &ok)) {
      }
      {
        std::lock_guard lock(w->mu_);
        w->status_ = status.ok() ? "OK" : status.error_message();
      }
      w->ended_ = true;
    });
    return watch;
  }

  // The plugin watcher: GetInfo on the registration socket, then (the plugin being a
  // DRAPlugin that serves v1.DRAPlugin at an endpoint that exists) NotifyRegistrationStatus
  // true; otherwise false with the reason. Returns GetInfo's answer.
  Result<nlohmann::json> registerPlugin(const std::string& registrationSocket) {
    auto info = call(registrationSocket, "pluginregistration.Registration", "GetInfo",
                     "pluginregistration.InfoRequest", "pluginregistration.PluginInfo",
                     nlohmann::json::object());
    if (!info) return info;
    std::string why;
    const auto versions = info->value("supported_versions", nlohmann::json::array());
    bool v1 = false;
    for (const auto& v : versions) v1 = v1 || v == "v1.DRAPlugin";
    if (info->value("type", "") != "DRAPlugin") why = "not a DRAPlugin";
    if (!v1) why = "no supported version kubelet knows";
    if (!std::filesystem::exists(info->value("endpoint", ""))) why = "the endpoint does not exist";
    auto notified = call(registrationSocket, "pluginregistration.Registration",
                         "NotifyRegistrationStatus", "pluginregistration.RegistrationStatus",
                         "pluginregistration.RegistrationStatusResponse",
                         {{"plugin_registered", why.empty()}, {"error", why}});
    if (!notified) return fail(notified.error());
    if (!why.empty()) return fail(Error::precondition("kubelet refused the plugin: " + why));
    return info;
  }

  Result<nlohmann::json> prepare(const std::string& endpoint, const std::vector<ClaimRef>& claims) {
    return call(endpoint, kDra, "NodePrepareResources",
                std::string(kDraPkg) + "NodePrepareResourcesRequest",
                std::string(kDraPkg) + "NodePrepareResourcesResponse", claimsJson(claims));
  }
  Result<nlohmann::json> unprepare(const std::string& endpoint,
                                   const std::vector<ClaimRef>& claims) {
    return call(endpoint, kDra, "NodeUnprepareResources",
                std::string(kDraPkg) + "NodeUnprepareResourcesRequest",
                std::string(kDraPkg) + "NodeUnprepareResourcesResponse", claimsJson(claims));
  }

 private:
  static constexpr const char* kDra = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin";
  static constexpr const char* kDraPkg = "k8s.io.kubelet.pkg.apis.dra.v1.";

  static nlohmann::json claimsJson(const std::vector<ClaimRef>& claims) {
    nlohmann::json list = nlohmann::json::array();
    for (const ClaimRef& c : claims)
      list.push_back({{"namespace", c.ns}, {"uid", c.uid}, {"name", c.name}});
    return {{"claims", list}};
  }

  const google::protobuf::Descriptor* find(const std::string& type) const {
    for (const auto* u : {dra_.get(), registration_.get(), health_.get()}) {
      if (u->descriptor == nullptr) continue;
      if (const auto* d = u->importer->pool()->FindMessageTypeByName(type)) return d;
    }
    if (fromUpstream()) return nullptr;
    return google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
  }

  std::unique_ptr<google::protobuf::Message> make(const google::protobuf::Descriptor* type) {
    if (type->file()->pool() == google::protobuf::DescriptorPool::generated_pool()) {
      return std::unique_ptr<google::protobuf::Message>(
          google::protobuf::MessageFactory::generated_factory()->GetPrototype(type)->New());
    }
    return std::unique_ptr<google::protobuf::Message>(factory_.GetPrototype(type)->New());
  }

  Result<nlohmann::json> call(const std::string& socket, const std::string& service,
                              const std::string& method, const std::string& inType,
                              const std::string& outType, const nlohmann::json& request) {
    const auto* in = find(inType);
    const auto* out = find(outType);
    if (in == nullptr || out == nullptr) return fail(Error::internal("no message type " + inType));
    auto req = make(in);
    if (const auto s = google::protobuf::util::JsonStringToMessage(request.dump(), req.get());
        !s.ok()) {
      return fail(Error::invalid("request " + request.dump() + ": " + std::string(s.message())));
    }
    const std::string bytes = req->SerializeAsString();
    grpc::Slice slice(bytes);
    grpc::ByteBuffer sendBuf(&slice, 1), recvBuf;
    auto channel = grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
    grpc::GenericStub stub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, "/" + service + "/" + method, grpc::StubOptions(), &sendBuf, &recvBuf,
                   [&done](grpc::Status s) { done.set_value(std::move(s)); });
    const grpc::Status status = done.get_future().get();
    if (!status.ok()) {
      return fail(Error::internal(method + " on " + socket + ": " + status.error_message()));
    }
    auto answer = toJson(out, recvBuf);
    if (!answer) return fail(Error::internal(method + ": " + answer.error().message));
    return answer;
  }

  // A received message of `type` as JSON with the proto field names.
  Result<nlohmann::json> toJson(const google::protobuf::Descriptor* type, grpc::ByteBuffer& buf) {
    if (type == nullptr) return fail(Error::internal("no message type to read the answer with"));
    std::vector<grpc::Slice> slices;
    if (!buf.Dump(&slices).ok()) return fail(Error::internal("unreadable answer"));
    std::string bytes;
    for (const grpc::Slice& s : slices)
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    auto res = make(type);
    if (!res->ParseFromString(bytes)) return fail(Error::internal("the answer does not parse"));
    std::string text;
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    if (const auto s = google::protobuf::util::MessageToJsonString(*res, &text, opts); !s.ok()) {
      return fail(Error::internal(std::string(s.message())));
    }
    return nlohmann::json::parse(text);
  }

  std::unique_ptr<tessera::testing::Upstream> dra_, registration_, health_;
  google::protobuf::DynamicMessageFactory factory_;
};

}  // namespace tessera::dra::testing
