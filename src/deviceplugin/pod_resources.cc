#include "deviceplugin/pod_resources.h"

#include <grpcpp/grpcpp.h>

#include "deviceplugin/proto/podresources.grpc.pb.h"

namespace tessera::deviceplugin {

Result<std::vector<ContainerDeviceIds>> listPodDevices(const std::string& socketPath,
                                                       std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel("unix://" + socketPath, grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  const grpc::Status status = stub->List(&ctx, request, &response);
  if (!status.ok()) {
    return fail(Error::internal("kubelet PodResources List on " + socketPath + ": " +
                                status.error_message() + " (gRPC status " +
                                std::to_string(static_cast<int>(status.error_code())) + ")"));
  }
  std::vector<ContainerDeviceIds> out;
  for (const v1::PodResources& pod : response.pod_resources()) {
    for (const v1::ContainerResources& c : pod.containers()) {
      for (const v1::ContainerDevices& d : c.devices()) {
        if (d.device_ids().empty()) continue;
        ContainerDeviceIds e;
        e.pod = pod.namespace_() + "/" + pod.name();
        e.container = c.name();
        e.resource = d.resource_name();
        e.deviceIds.assign(d.device_ids().begin(), d.device_ids().end());
        out.push_back(std::move(e));
      }
    }
  }
  return out;
}

}  // namespace tessera::deviceplugin
