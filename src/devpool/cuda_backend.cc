// The CUDA backend, with the CUDA runtime loaded at run time: the build needs no CUDA headers
// or libraries, and a binary built here runs unchanged on machines with or without a GPU.
// The few runtime functions used are declared below with their C ABI (handles are opaque
// pointers, errors are ints, 0 = cudaSuccess).

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "devpool/backend.h"

namespace tessera::devpool {
namespace {

using CudaError = int;
using CudaStream = void*;
using CudaEvent = void*;

constexpr int kMemcpyHostToDevice = 1;
constexpr int kMemcpyDeviceToHost = 2;
constexpr unsigned kHostAllocPortable = 1;
constexpr unsigned kStreamNonBlocking = 1;
constexpr unsigned kEventDisableTiming = 2;

struct CudaApi {
  void* library = nullptr;
  std::string libraryName;
  CudaError (*getDeviceCount)(int*) = nullptr;
  CudaError (*setDevice)(int) = nullptr;
  const char* (*getErrorString)(CudaError) = nullptr;
  CudaError (*memGetInfo)(std::size_t*, std::size_t*) = nullptr;
  CudaError (*malloc)(void**, std::size_t) = nullptr;
  CudaError (*free)(void*) = nullptr;
  CudaError (*hostAlloc)(void**, std::size_t, unsigned) = nullptr;
  CudaError (*freeHost)(void*) = nullptr;
  CudaError (*memcpy)(void*, const void*, std::size_t, int) = nullptr;
  CudaError (*memcpyAsync)(void*, const void*, std::size_t, int, CudaStream) = nullptr;
  CudaError (*streamCreateWithFlags)(CudaStream*, unsigned) = nullptr;
  CudaError (*streamDestroy)(CudaStream) = nullptr;
  CudaError (*streamSynchronize)(CudaStream) = nullptr;
  CudaError (*eventCreateWithFlags)(CudaEvent*, unsigned) = nullptr;
  CudaError (*eventRecord)(CudaEvent, CudaStream) = nullptr;
  CudaError (*eventSynchronize)(CudaEvent) = nullptr;
  CudaError (*eventDestroy)(CudaEvent) = nullptr;
};

std::vector<std::string> defaultLibraryNames() {
  std::vector<std::string> names;
  for (const char* dir : {"", "/usr/local/cuda/lib64/"}) {
    for (const char* file :
         {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
      names.push_back(std::string(dir) + file);
    }
  }
  return names;
}

template <typename Fn>
bool bind(void* library, const char* symbol, Fn& out) {
  out = reinterpret_cast<Fn>(::dlsym(library, symbol));
  return out != nullptr;
}

Result<CudaApi> loadCudaApi(const std::vector<std::string>& names) {
  CudaApi api;
  std::string lastError;
  for (const auto& name : names) {
    api.library = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.library != nullptr) {
      api.libraryName = name;
      break;
    }
    if (const char* e = ::dlerror()) lastError = e;
  }
  if (api.library == nullptr) {
    std::string tried;
    for (const auto& name : names) tried += (tried.empty() ? "" : ", ") + name;
    return fail(Error::precondition(
        "libcudart.so not found: the CUDA backend needs the CUDA runtime; use the host backend "
        "(tried " +
        tried + (lastError.empty() ? "" : "; last error: " + lastError) + ")"));
  }
  const bool ok = bind(api.library, "cudaGetDeviceCount", api.getDeviceCount) &&
                  bind(api.library, "cudaSetDevice", api.setDevice) &&
                  bind(api.library, "cudaGetErrorString", api.getErrorString) &&
                  bind(api.library, "cudaMemGetInfo", api.memGetInfo) &&
                  bind(api.library, "cudaMalloc", api.malloc) &&
                  bind(api.library, "cudaFree", api.free) &&
                  bind(api.library, "cudaHostAlloc", api.hostAlloc) &&
                  bind(api.library, "cudaFreeHost", api.freeHost) &&
                  bind(api.library, "cudaMemcpy", api.memcpy) &&
                  bind(api.library, "cudaMemcpyAsync", api.memcpyAsync) &&
                  bind(api.library, "cudaStreamCreateWithFlags", api.streamCreateWithFlags) &&
                  bind(api.library, "cudaStreamDestroy", api.streamDestroy) &&
                  bind(api.library, "cudaStreamSynchronize", api.streamSynchronize) &&
                  bind(api.library, "cudaEventCreateWithFlags", api.eventCreateWithFlags) &&
                  bind(api.library, "cudaEventRecord", api.eventRecord) &&
                  bind(api.library, "cudaEventSynchronize", api.eventSynchronize) &&
                  bind(api.library, "cudaEventDestroy", api.eventDestroy);
  if (!ok) {
    const std::string name = api.libraryName;
    ::dlclose(api.library);
    return fail(Error::precondition(name + " lacks a CUDA runtime function the backend needs"));
  }
  return api;
}

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(CudaApi api, int device) : api_(std::move(api)), device_(device) {}

  ~CudaBackend() override {
    api_.setDevice(device_);
    for (auto& s : streams_) {
      api_.streamSynchronize(s.handle);
      for (auto& [seq, event] : s.pending) api_.eventDestroy(event);
      api_.streamDestroy(s.handle);
    }
    for (CudaEvent e : freeEvents_) api_.eventDestroy(e);
    if (arena_ != nullptr) api_.free(arena_);
    // The library stays loaded: the runtime's own teardown at exit expects it.
  }

  Result<void> init(int streams) {
    int count = 0;
    TESSERA_RETURN_IF_ERROR(check(api_.getDeviceCount(&count), "cudaGetDeviceCount"));
    if (device_ < 0 || device_ >= count) {
      return fail(Error::invalid("CUDA device " + std::to_string(device_) + " does not exist (" +
                                 std::to_string(count) + " devices)"));
    }
    TESSERA_RETURN_IF_ERROR(check(api_.setDevice(device_), "cudaSetDevice"));
    for (int i = 0; i < streams; ++i) {
      Stream s;
      TESSERA_RETURN_IF_ERROR(
          check(api_.streamCreateWithFlags(&s.handle, kStreamNonBlocking), "cudaStreamCreate"));
      streams_.push_back(std::move(s));
    }
    std::size_t freeBytes = 0, totalBytes = 0;
    TESSERA_RETURN_IF_ERROR(check(api_.memGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo"));
    description_ = "CUDA device " + std::to_string(device_) + " via " + api_.libraryName + ", " +
                   std::to_string(totalBytes >> 20) + " MiB (" + std::to_string(freeBytes >> 20) +
                   " MiB free), " + std::to_string(streams) + " streams";
    return {};
  }

  std::string_view name() const override { return "cuda"; }
  bool isVirtual() const override { return false; }
  int streamCount() const override { return static_cast<int>(streams_.size()); }
  std::string describe() const override { return description_; }

  Result<void> allocateArena(std::uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    if (arena_ != nullptr) return fail(Error::precondition("the arena is already allocated"));
    if (bytes == 0) return fail(Error::invalid("arena size must be positive"));
    TESSERA_RETURN_IF_ERROR(check(api_.setDevice(device_), "cudaSetDevice"));
    void* p = nullptr;
    TESSERA_RETURN_IF_ERROR(
        check(api_.malloc(&p, bytes), "cudaMalloc of " + std::to_string(bytes) + " bytes"));
    arena_ = static_cast<std::byte*>(p);
    arenaBytes_ = bytes;
    return {};
  }

  std::uint64_t arenaBytes() const override {
    std::lock_guard lock(mutex_);
    return arenaBytes_;
  }

  Result<StagingBuffer> allocateStaging(std::uint64_t bytes) override {
    if (bytes == 0) return fail(Error::invalid("staging buffer size must be positive"));
    TESSERA_RETURN_IF_ERROR(check(api_.setDevice(device_), "cudaSetDevice"));
    void* p = nullptr;
    TESSERA_RETURN_IF_ERROR(check(api_.hostAlloc(&p, bytes, kHostAllocPortable),
                                  "cudaHostAlloc of " + std::to_string(bytes) + " bytes"));
    return StagingBuffer(this, static_cast<std::byte*>(p), bytes);
  }

  Result<void> copyToArenaAsync(int stream, std::uint64_t arenaOffset, const void* src,
                                std::uint64_t bytes) override {
    TESSERA_RETURN_IF_ERROR(checkStream(stream));
    TESSERA_RETURN_IF_ERROR(checkRange(arenaOffset, bytes));
    Stream& s = streams_[static_cast<std::size_t>(stream)];
    std::lock_guard lock(*s.mutex);  // one stream's enqueue order is the order of the calls
    TESSERA_RETURN_IF_ERROR(check(api_.setDevice(device_), "cudaSetDevice"));
    return check(api_.memcpyAsync(arena_ + arenaOffset, src, bytes, kMemcpyHostToDevice, s.handle),
                 "cudaMemcpyAsync");
  }

  Result<Fence> recordFence(int stream) override {
    TESSERA_RETURN_IF_ERROR(checkStream(stream));
    Stream& s = streams_[static_cast<std::size_t>(stream)];
    std::lock_guard streamLock(*s.mutex);
    TESSERA_RETURN_IF_ERROR(check(api_.setDevice(device_), "cudaSetDevice"));
    CudaEvent event = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (!freeEvents_.empty()) {
        event = freeEvents_.back();
        freeEvents_.pop_back();
      }
    }
    if (event == nullptr) {
      TESSERA_RETURN_IF_ERROR(
          check(api_.eventCreateWithFlags(&event, kEventDisableTiming), "cudaEventCreate"));
    }
    if (auto r = check(api_.eventRecord(event, s.handle), "cudaEventRecord"); !r) {
      std::lock_guard lock(mutex_);
      freeEvents_.push_back(event);
      return fail(r.error());
    }
    const std::uint64_t seq = ++s.recorded;
    s.pending.emplace(seq, event);
    return Fence{stream, seq};
  }

  Result<void> waitFence(const Fence& fence) override {
    TESSERA_RETURN_IF_ERROR(checkStream(fence.stream));
    CudaEvent event = nullptr;
    {
      Stream& s = streams_[static_cast<std::size_t>(fence.stream)];
      std::lock_guard lock(*s.mutex);
      auto& pending = s.pending;
      auto it = pending.find(fence.sequence);
      if (it == pending.end()) return {};  // already waited for
      event = it->second;
      pending.erase(it);
    }
    api_.setDevice(device_);
    auto r = check(api_.eventSynchronize(event), "cudaEventSynchronize");
    std::lock_guard lock(mutex_);
    freeEvents_.push_back(event);
    return r;
  }

  Result<void> synchronizeAll() override {
    api_.setDevice(device_);
    for (auto& s : streams_) {
      TESSERA_RETURN_IF_ERROR(check(api_.streamSynchronize(s.handle), "cudaStreamSynchronize"));
    }
    return {};
  }

  Result<void> copyFromArena(std::uint64_t arenaOffset, void* dst, std::uint64_t bytes) override {
    TESSERA_RETURN_IF_ERROR(checkRange(arenaOffset, bytes));
    api_.setDevice(device_);
    return check(api_.memcpy(dst, arena_ + arenaOffset, bytes, kMemcpyDeviceToHost),
                 "cudaMemcpy device to host");
  }

 protected:
  void freeStaging(std::byte* data, std::uint64_t) override { api_.freeHost(data); }

 private:
  // Lock order: a stream's mutex before mutex_.
  struct Stream {
    std::unique_ptr<std::mutex> mutex = std::make_unique<std::mutex>();
    CudaStream handle = nullptr;
    std::uint64_t recorded = 0;
    std::map<std::uint64_t, CudaEvent> pending;  // recorded fences not yet waited for
  };

  Result<void> check(CudaError code, const std::string& what) const {
    if (code == 0) return {};
    const char* text = api_.getErrorString != nullptr ? api_.getErrorString(code) : nullptr;
    return fail(Error::internal(what + " failed: " + (text != nullptr ? text : "error") +
                                " (CUDA error " + std::to_string(code) + ")"));
  }
  Result<void> checkStream(int stream) const {
    if (stream < 0 || stream >= streamCount()) {
      return fail(Error::invalid("stream " + std::to_string(stream) + " out of range"));
    }
    return {};
  }
  Result<void> checkRange(std::uint64_t offset, std::uint64_t bytes) const {
    if (arena_ == nullptr) return fail(Error::precondition("the arena is not allocated"));
    if (offset > arenaBytes_ || bytes > arenaBytes_ - offset) {
      return fail(Error::invalid("arena range beyond the arena of " + std::to_string(arenaBytes_) +
                                 " bytes"));
    }
    return {};
  }

  CudaApi api_;
  int device_;
  std::string description_;
  mutable std::mutex mutex_;  // guards the arena's allocation and the free events
  std::byte* arena_ = nullptr;
  std::uint64_t arenaBytes_ = 0;
  std::vector<Stream> streams_;  // fixed after init
  std::vector<CudaEvent> freeEvents_;
};

}  // namespace

Result<std::unique_ptr<DeviceBackend>> makeCudaBackend(const CudaBackendOptions& options) {
  auto api =
      loadCudaApi(options.libraryNames.empty() ? defaultLibraryNames() : options.libraryNames);
  if (!api) return fail(api.error());
  auto backend = std::make_unique<CudaBackend>(std::move(*api), options.device);
  TESSERA_RETURN_IF_ERROR(backend->init(options.streams < 1 ? 1 : options.streams));
  return std::unique_ptr<DeviceBackend>(std::move(backend));
}

}  // namespace tessera::devpool
