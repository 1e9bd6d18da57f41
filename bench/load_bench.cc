// Weight loading into the device memory pool (docs/benchmarks.md, "Weight loading"; design in
// docs/devpool.md). A plain executable, not a Google Benchmark suite: the cold-cache cases
// must drop the file from the page cache before every timed run, and every number is a ratio
// against a baseline timed in the same run, on the same file, with the same cache state.
//
// Per file size (a synthetic safetensors file from profile::writeSyntheticModel):
//
//   memcpy          plain single-threaded memcpy of the model's bytes, host to host (baseline)
//   raw copy        the backend's own copy of a pinned buffer into the arena on every stream,
//                   no loader (host: parallel memcpy; cuda: pinned host→device bandwidth)
//   cache → pool    the loader placing the bytes from a host buffer (a host cache tier)
//   pinned cache    (cuda only) the same from a pinned host buffer, copied without staging
//   warm read       plain sequential read() of the file in 16 MiB blocks, file in page cache
//   warm → pool     the loader on the same file, file in page cache
//   cold read       the same read, after fsync + posix_fadvise(DONTNEED) dropped the file
//   cold → pool     the loader after the same drop
//   cold → pool, O_DIRECT   the same with LoaderOptions::directIo (past the page cache)
//   cold naive      read the whole file into memory, then place it (no overlap)
//
// Repetitions are interleaved (one of each, then again) and the median is reported.
//
// Usage: devpool_load_bench [--backend host|cuda] [--sizes-gib 1,2] [--dir D] [--repeat N]
//                           [--threads T] [--chunk-mib C] [--streams S] [--block-mib B]
//                           [--cold-only] [--keep] [--json out.json]

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devpool/loader.h"
#include "profile/safetensors.h"
#include "profile/safetensors_writer.h"

namespace {

using namespace tessera;
using namespace tessera::devpool;
using Mono = std::chrono::steady_clock;

struct Options {
  std::string backend = "host";
  std::vector<double> sizesGib{1, 2};
  std::string dir;
  int repeat = 3;
  int threads = 0;  // the loader's default: one per hardware thread, at most 4
  int streams = 0;  // backend default
  std::uint64_t chunkMib = 16;
  std::uint64_t blockMib = 2;
  bool coldOnly = false;
  bool keep = false;
  std::string json;
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "devpool_load_bench: %s\n", message.c_str());
  std::exit(1);
}

template <typename T>
T orDie(Result<T> r) {
  if (!r) die(r.error().message);
  return std::move(*r);
}
void orDie(Result<void> r) {
  if (!r) die(r.error().message);
}

double seconds(Mono::time_point start) {
  return std::chrono::duration<double>(Mono::now() - start).count();
}

// fsync, then ask the kernel to drop the file's pages; returns the fraction still resident.
double dropFromPageCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) die("open " + path + ": " + std::strerror(errno));
  ::fsync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  struct stat st {};
  ::fstat(fd, &st);
  const auto size = static_cast<std::size_t>(st.st_size);
  double resident = 0;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map != MAP_FAILED) {
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> v((size + page - 1) / page);
    if (::mincore(map, size, v.data()) == 0) {
      std::size_t n = 0;
      for (unsigned char c : v) n += c & 1;
      resident = v.empty() ? 0 : static_cast<double>(n) / static_cast<double>(v.size());
    }
    ::munmap(map, size);
  }
  ::close(fd);
  return resident;
}

// dd-style: read() the whole file sequentially in 16 MiB blocks into one buffer.
double sequentialRead(const std::string& path, std::byte* buffer, std::uint64_t bufferBytes,
                      bool wholeFile) {
  const auto start = Mono::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) die("open " + path);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::uint64_t done = 0;
  constexpr std::uint64_t kBlock = 16ull << 20;
  for (;;) {
    // wholeFile: the naive loader's read, into consecutive memory; otherwise dd's reuse of
    // one block-sized buffer.
    std::byte* to = wholeFile ? buffer + done : buffer;
    const std::uint64_t want = wholeFile ? std::min(kBlock, bufferBytes - done) : kBlock;
    if (want == 0) break;
    const ssize_t n = ::read(fd, to, want);
    if (n < 0) die("read " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    done += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
  return seconds(start);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Spot-checks the first tensor of a loaded model against the writer's pattern.
void verify(const LoadedModel& model, DeviceBackend& backend) {
  const auto& source = model.sources.at(0);
  if (source.tensors.empty()) return;
  const auto& t = source.tensors.front();
  const std::uint64_t n = std::min<std::uint64_t>(t.bytes(), 1 << 20);
  std::vector<std::byte> buf(n);
  orDie(model.readBack(backend, source.logicalOffset + t.begin, buf.data(), n));
  if (profile::tensorPatternMismatch(profile::tensorPatternSeed(t.name), 0, buf.data(), n) != -1) {
    die("loaded bytes differ from the file (" + t.name + ")");
  }
}

struct Row {
  std::string name;
  std::vector<double> secs;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Device pool load benchmark (docs/benchmarks.md, Weight loading)"};
  app.add_option("--backend", o.backend, "host or cuda");
  app.add_option("--sizes-gib", o.sizesGib, "file sizes in GiB")->delimiter(',');
  app.add_option("--dir", o.dir, "where the files go (default: $TMPDIR or /var/tmp)");
  app.add_option("--repeat", o.repeat, "repetitions (median reported)");
  app.add_option("--threads", o.threads, "loader reader threads (0: one per core, at most 4)");
  app.add_option("--streams", o.streams, "backend copy streams (0: backend default)");
  app.add_option("--chunk-mib", o.chunkMib, "loader chunk size");
  app.add_option("--block-mib", o.blockMib, "pool block size");
  app.add_flag("--cold-only", o.coldOnly,
               "only the file cases (no host buffers of the model's size)");
  app.add_flag("--keep", o.keep, "keep the generated files");
  app.add_option("--json", o.json, "write the results here too");
  CLI11_PARSE(app, argc, argv);
  if (o.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    o.dir = tmp != nullptr && *tmp ? tmp : "/var/tmp";
  }
  if (o.repeat < 1) die("--repeat must be at least 1");

  nlohmann::json out;
  out["backend"] = o.backend;
  out["threads"] = o.threads;
  out["chunk_mib"] = o.chunkMib;
  out["block_mib"] = o.blockMib;
  out["results"] = nlohmann::json::array();

  for (double gib : o.sizesGib) {
    const auto bytes = static_cast<std::uint64_t>(gib * static_cast<double>(1ull << 30));
    struct statvfs vfs {};
    if (::statvfs(o.dir.c_str(), &vfs) == 0 &&
        static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize) <
            1.2 * static_cast<double>(bytes)) {
      die("not enough free disk in " + o.dir + " for " + std::to_string(gib) + " GiB");
    }
    // The backend first: without a device, fail before writing gigabytes.
    auto backend = orDie(makeBackend(o.backend, o.streams));
    std::printf("== %.2f GiB, backend: %s\n", gib, backend->describe().c_str());
    const std::string path =
        o.dir + "/tessera-load-bench-" + std::to_string(bytes) + ".safetensors";
    std::printf("   writing %s\n", path.c_str());
    std::fflush(stdout);
    const auto writeStart = Mono::now();
    orDie(profile::writeSyntheticModel(path, bytes, 64));
    std::printf("   written in %.1f s\n", seconds(writeStart));
    const auto header = orDie(profile::readSafetensors(path));
    const std::uint64_t dataBytes = header.dataBytes();

    const std::uint64_t blockBytes = o.blockMib << 20;
    auto pool =
        orDie(BlockPool::create(*backend, {(dataBytes / blockBytes + 2) * blockBytes, blockBytes}));
    LoaderOptions lo;
    lo.readerThreads = o.threads;
    lo.chunkBytes = o.chunkMib << 20;
    auto loader = orDie(Loader::create(*pool, lo));
    lo.directIo = true;
    auto directLoader = orDie(Loader::create(*pool, lo));

    // Host buffers of the model's size: the "host cache" holding the data section, and a
    // memcpy destination (also the naive loader's whole-file buffer).
    std::vector<std::byte> cache, scratch;
    if (!o.coldOnly) {
      cache.resize(dataBytes);
      scratch.resize(header.fileSize);
      const int fd = ::open(path.c_str(), O_RDONLY);
      std::uint64_t done = 0;
      while (done < dataBytes) {
        const ssize_t n = ::pread(fd, cache.data() + done, dataBytes - done,
                                  static_cast<off_t>(header.dataOffset + done));
        if (n <= 0) die("reading " + path + " into the host cache");
        done += static_cast<std::uint64_t>(n);
      }
      ::close(fd);
    }
    // On a real device, also a host cache kept in pinned memory: copied to the device directly.
    StagingBuffer pinnedCache;
    if (!o.coldOnly && !backend->isVirtual()) {
      pinnedCache = orDie(backend->allocateStaging(dataBytes));
      std::memcpy(pinnedCache.data(), cache.data(), dataBytes);
    }
    std::vector<std::byte> ddBuffer(16ull << 20);
    auto rawStaging = orDie(backend->allocateStaging(64ull << 20));
    std::memset(rawStaging.data(), 0x5a, rawStaging.bytes());

    std::map<std::string, std::vector<double>> t;
    std::vector<double> residentAfterDrop;
    auto poolLoad = [&](const LoadSource& source, Loader* with = nullptr) {
      auto model = orDie((with != nullptr ? with : loader.get())->load({"bench", "v1", {source}}));
      verify(model, *backend);
      return model.stats.seconds;
    };
    auto memcpyCase = [&] {
      const auto start = Mono::now();
      std::memcpy(scratch.data(), cache.data(), dataBytes);
      t["memcpy"].push_back(seconds(start));
    };
    auto cacheCase = [&] {
      t["cache_to_pool"].push_back(
          poolLoad(LoadSource::hostMemory("cache", std::span(cache), false)));
    };
    auto pinnedCase = [&] {
      t["pinned_cache_to_pool"].push_back(poolLoad(
          LoadSource::hostMemory("pinned cache", std::span(pinnedCache.data(), dataBytes), true)));
    };
    auto rawCase = [&] {
      // The backend alone: the pinned buffer copied over the arena, all streams at once.
      const auto start = Mono::now();
      std::uint64_t off = 0;
      int stream = 0;
      while (off < dataBytes) {
        const std::uint64_t n = std::min(rawStaging.bytes(), dataBytes - off);
        orDie(backend->copyToArenaAsync(stream, off, rawStaging.data(), n));
        off += n;
        stream = (stream + 1) % backend->streamCount();
      }
      orDie(backend->synchronizeAll());
      t["raw_copy"].push_back(seconds(start));
    };
    auto warmReadCase = [&] {
      sequentialRead(path, ddBuffer.data(), ddBuffer.size(), false);  // make sure it is cached
      t["warm_read"].push_back(sequentialRead(path, ddBuffer.data(), ddBuffer.size(), false));
    };
    auto warmPoolCase = [&] {
      sequentialRead(path, ddBuffer.data(), ddBuffer.size(), false);
      t["warm_to_pool"].push_back(poolLoad(LoadSource::safetensors(path)));
    };
    auto coldReadCase = [&] {
      residentAfterDrop.push_back(dropFromPageCache(path));
      t["cold_read"].push_back(sequentialRead(path, ddBuffer.data(), ddBuffer.size(), false));
    };
    auto coldPoolCase = [&] {
      residentAfterDrop.push_back(dropFromPageCache(path));
      t["cold_to_pool"].push_back(poolLoad(LoadSource::safetensors(path)));
    };
    auto coldDirectCase = [&] {
      residentAfterDrop.push_back(dropFromPageCache(path));
      t["cold_to_pool_odirect"].push_back(
          poolLoad(LoadSource::safetensors(path), directLoader.get()));
    };
    auto naiveCase = [&] {
      residentAfterDrop.push_back(dropFromPageCache(path));
      const double read = sequentialRead(path, scratch.data(), scratch.size(), true);
      const std::span<const std::byte> data(scratch.data() + header.dataOffset, dataBytes);
      const double copy = poolLoad(LoadSource::hostMemory("naive", data, false));
      t["cold_naive"].push_back(read + copy);
      t["cold_naive_read"].push_back(read);
    };
    // Each case runs next to its baseline, and the pair's order alternates between
    // repetitions, so that a change in the machine's load hits both sides alike.
    auto pair = [](int rep, const std::function<void()>& a, const std::function<void()>& b) {
      if (rep % 2 == 0) {
        a();
        b();
      } else {
        b();
        a();
      }
    };
    for (int rep = 0; rep < o.repeat; ++rep) {
      if (!o.coldOnly) {
        pair(rep, memcpyCase, cacheCase);
        if (pinnedCache.data() != nullptr) pinnedCase();
      }
      rawCase();
      pair(rep, warmReadCase, warmPoolCase);
      pair(rep, coldReadCase, coldPoolCase);
      coldDirectCase();
      if (!o.coldOnly) naiveCase();
      std::printf("   repetition %d done\n", rep + 1);
      std::fflush(stdout);
    }

    const double gb = static_cast<double>(dataBytes) / 1e9;
    auto bw = [&](const std::string& k) { return t.count(k) ? gb / median(t[k]) : 0.0; };
    nlohmann::json r;
    r["file_gib"] = gib;
    r["backend"] = backend->describe();
    r["data_bytes"] = dataBytes;
    r["max_resident_after_drop"] =
        *std::max_element(residentAfterDrop.begin(), residentAfterDrop.end());
    for (const auto& [k, v] : t) {
      r["median_s"][k] = median(v);
      r["gb_per_s"][k] = bw(k);
    }
    std::printf("   %-14s %10s %10s\n", "case", "median s", "GB/s");
    for (const auto& [k, v] : t)
      std::printf("   %-14s %10.3f %10.2f\n", k.c_str(), median(v), bw(k));
    // Bandwidth of a over bandwidth of b: the ratio of the medians, and the median and range
    // of the per-repetition ratios (each repetition's pair ran back to back).
    auto ratio = [&](const char* name, const std::string& a, const std::string& b) {
      if (!t.count(a) || !t.count(b)) return;
      const double x = median(t[b]) / median(t[a]);
      std::vector<double> paired;
      for (std::size_t i = 0; i < std::min(t[a].size(), t[b].size()); ++i) {
        paired.push_back(t[b][i] / t[a][i]);
      }
      const auto [lo, hi] = std::minmax_element(paired.begin(), paired.end());
      r["ratios"][name] = x;
      r["paired_ratio_median"][name] = median(paired);
      r["paired_ratio_min"][name] = *lo;
      r["paired_ratio_max"][name] = *hi;
      std::printf("   %-34s %6.1f %%   paired: median %6.1f %%, range %5.1f-%5.1f %%\n", name,
                  100 * x, 100 * median(paired), 100 * *lo, 100 * *hi);
    };
    ratio("cache_to_pool / memcpy", "cache_to_pool", "memcpy");
    ratio("cache_to_pool / raw_copy", "cache_to_pool", "raw_copy");
    ratio("pinned_cache_to_pool / raw_copy", "pinned_cache_to_pool", "raw_copy");
    ratio("warm_to_pool / warm_read", "warm_to_pool", "warm_read");
    ratio("cold_to_pool / cold_read", "cold_to_pool", "cold_read");
    ratio("cold_to_pool / cold_naive", "cold_to_pool", "cold_naive");
    ratio("cold_to_pool_odirect / cold_read", "cold_to_pool_odirect", "cold_read");
    if (t.count("cold_read") && t.count("cache_to_pool")) {
      // The naive loader at its best: a dd-speed read followed by the pool's own copy.
      const double ideal = median(t["cold_read"]) + median(t["cache_to_pool"]);
      const double x = ideal / median(t["cold_to_pool"]);
      r["ratios"]["cold_to_pool / (cold_read + cache_to_pool)"] = x;
      std::printf("   %-34s %6.1f %%\n", "cold_to_pool / (cold_read+cache)", 100 * x);
    }
    std::printf("   page cache after each drop: at most %.1f %% of the file resident\n",
                100 * r["max_resident_after_drop"].get<double>());
    out["results"].push_back(r);
    if (!o.keep) std::filesystem::remove(path);
  }
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << out.dump(2) << "\n";
  }
  return 0;
}
