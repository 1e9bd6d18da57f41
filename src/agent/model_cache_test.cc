#include "agent/model_cache.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/testing/agent_testing.h"
#include "profile/safetensors_writer.h"

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;
using testing::readFile;
using testing::TempDir;
using testing::writeFile;

constexpr std::int64_t kKi = 1024;

// A model source folder: each model a folder of `files` files of the given sizes.
void addModel(const fs::path& root, const std::string& model, std::vector<std::int64_t> sizes) {
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    std::string bytes(static_cast<std::size_t>(sizes[i]), '\0');
    for (std::size_t b = 0; b < bytes.size(); ++b)
      bytes[b] = static_cast<char>((b * 31 + i + model.size()) & 0xFF);
    writeFile(root / model / ("shard-" + std::to_string(i) + ".bin"), bytes);
  }
}

std::int64_t bytesOnDisk(const fs::path& models) {
  std::int64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(models)) {
    if (e.is_regular_file() && e.path().filename() != ".tessera-entry.json") {
      total += static_cast<std::int64_t>(e.file_size());
    }
  }
  return total;
}

class ModelCacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<ModelCache> open(std::int64_t diskBytes, std::int64_t hostBytes = 0) {
    ModelCacheOptions o;
    o.dir = (dir_.path() / "cache").string();
    o.diskCapacityBytes = diskBytes;
    o.hostCapacityBytes = hostBytes;
    o.warnAtFraction = 0.9;
    o.onWarning = [this](const std::string& w) { warnings_.push_back(w); };
    auto cache = ModelCache::open(o, clock_);
    EXPECT_TRUE(cache) << cache.error().message;
    return cache ? std::move(*cache) : nullptr;
  }
  std::vector<ModelSource*> sources() { return {source_.get()}; }

  TempDir dir_;
  fs::path models_ = dir_.path() / "source";
  std::unique_ptr<ModelSource> source_ = makeDirectorySource("local", models_.string());
  ManualClock clock_{1'000'000};
  std::vector<std::string> warnings_;
};

TEST_F(ModelCacheTest, StagesFromADirectoryAndSurvivesARestart) {
  addModel(models_, "llama-8b", {40 * kKi, 3 * kKi});
  writeFile(models_ / "single.bin", std::string(5000, 'x'));  // a model that is one file
  auto cache = open(1 << 20);
  auto staged = cache->stage("llama-8b", sources());
  ASSERT_TRUE(staged) << staged.error().message;
  EXPECT_EQ(staged->diskBytes, 43 * kKi);
  EXPECT_EQ(readFile(fs::path(cache->pathOf("llama-8b")) / "shard-0.bin"),
            readFile(models_ / "llama-8b" / "shard-0.bin"));
  ASSERT_TRUE(cache->stage("single.bin", sources()));
  EXPECT_EQ(readFile(fs::path(cache->pathOf("single.bin")) / "single.bin"), std::string(5000, 'x'));
  auto missing = cache->stage("nope", sources());
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("no model source has nope"), std::string::npos);
  auto bad = cache->stage("../etc", sources());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);

  // A crash mid-copy leaves a staging folder; a damaged entry fails its record's sizes.
  const fs::path root = dir_.path() / "cache";
  writeFile(root / "staging" / "qwen.7" / "shard-0.bin", "half");
  fs::resize_file(fs::path(cache->pathOf("single.bin")) / "single.bin", 10);
  cache.reset();
  warnings_.clear();
  cache = open(1 << 20);
  EXPECT_EQ(cache->models(), (std::vector<std::string>{"llama-8b"}));
  EXPECT_EQ(cache->status().diskUsedBytes, 43 * kKi);
  EXPECT_FALSE(fs::exists(root / "staging" / "qwen.7"));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("single.bin"), std::string::npos);
}

TEST_F(ModelCacheTest, NeverEvictsAPinnedModelAndSaysWhatHoldsTheRoom) {
  for (const char* m : {"a", "b", "c", "d"}) addModel(models_, m, {40 * kKi});
  auto cache = open(100 * kKi);
  ASSERT_TRUE(cache->stage("a", sources()));
  clock_.advance(10);
  ASSERT_TRUE(cache->stage("b", sources()));
  ASSERT_TRUE(cache->pin("a"));
  clock_.advance(10);
  ASSERT_TRUE(cache->stage("c", sources()));  // b goes: a is pinned although older
  EXPECT_EQ(cache->models(), (std::vector<std::string>{"a", "c"}));
  ASSERT_TRUE(cache->pin("c"));
  auto refused = cache->stage("d", sources());
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(refused.error().message.find("a (40.0 KiB"), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("c ("), std::string::npos);
  EXPECT_EQ(cache->models(), (std::vector<std::string>{"a", "c"}));
  EXPECT_FALSE(cache->remove("a"));  // in use
  ASSERT_TRUE(cache->unpin("c"));
  ASSERT_TRUE(cache->stage("d", sources()));
  EXPECT_EQ(cache->models(), (std::vector<std::string>{"a", "d"}));
  EXPECT_FALSE(cache->unpin("d"));  // not pinned
  // Larger than the whole cache.
  addModel(models_, "huge", {200 * kKi});
  auto huge = cache->stage("huge", sources());
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().message.find("more than the whole disk capacity"), std::string::npos);
}

TEST_F(ModelCacheTest, EvictsTheLargestAgeTimesSizeFirst) {
  addModel(models_, "big-old", {60 * kKi});
  addModel(models_, "small-older", {10 * kKi});
  addModel(models_, "new", {40 * kKi});
  auto cache = open(100 * kKi);
  ASSERT_TRUE(cache->stage("small-older", sources()));
  clock_.advance(100);
  ASSERT_TRUE(cache->stage("big-old", sources()));
  clock_.advance(100);
  // Ages 200 and 100 ms: 10 KiB x 201 < 60 KiB x 101, so the big one goes although the small
  // one was used longer ago (a plain LRU would have dropped the small one, and still lacked room).
  ASSERT_TRUE(cache->stage("new", sources()));
  EXPECT_EQ(cache->models(), (std::vector<std::string>{"new", "small-older"}));
  EXPECT_EQ(cache->status().evictions, 1);
}

TEST_F(ModelCacheTest, HostTierHoldsHotModelsWithinItsCapacity) {
  addModel(models_, "a", {30 * kKi});
  addModel(models_, "b", {30 * kKi});
  auto cache = open(1 << 20, 50 * kKi);
  ASSERT_TRUE(cache->stage("a", sources()));
  ASSERT_TRUE(cache->stage("b", sources()));
  auto hostA = cache->loadToHost("a");
  ASSERT_TRUE(hostA) << hostA.error().message;
  const std::string original = readFile(models_ / "a" / "shard-0.bin");
  EXPECT_EQ((*hostA)->files.at("shard-0.bin"), std::vector<char>(original.begin(), original.end()));
  EXPECT_EQ(cache->status().hostUsedBytes, 30 * kKi);
  ASSERT_TRUE(cache->pin("a"));
  auto refused = cache->loadToHost("b");  // a is pinned and b does not fit beside it
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kResourceExhausted);
  ASSERT_TRUE(cache->unpin("a"));
  ASSERT_TRUE(cache->loadToHost("b"));
  EXPECT_EQ(cache->status().hostUsedBytes, 30 * kKi);
  // The evicted host copy stays readable by whoever holds it.
  EXPECT_EQ((*hostA)->files.size(), 1u);
  EXPECT_FALSE(cache->loadToHost("c"));
}

TEST_F(ModelCacheTest, WarnsOnceAboveTheWarningFraction) {
  addModel(models_, "a", {50 * kKi});
  addModel(models_, "b", {45 * kKi});
  auto cache = open(100 * kKi);
  ASSERT_TRUE(cache->stage("a", sources()));
  EXPECT_TRUE(warnings_.empty());
  ASSERT_TRUE(cache->stage("b", sources()));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("above cache.warnAtFraction (90 %)"), std::string::npos)
      << warnings_[0];
  EXPECT_EQ(cache->status().warnings.size(), 1u);
  ASSERT_TRUE(cache->pin("a"));
  ASSERT_TRUE(cache->unpin("a"));
  EXPECT_EQ(warnings_.size(), 1u);
  ASSERT_TRUE(cache->remove("b"));
  EXPECT_TRUE(cache->status().warnings.empty());
}

TEST_F(ModelCacheTest, StagesOverHttpAndRejectsAShortDownload) {
  addModel(models_, "org/llama", {20 * kKi, 1000});
  addModel(models_, "liar", {1000});
  httplib::Server server;
  server.set_mount_point("/weights", models_.string());
  server.Get(R"(/weights/(.+)/manifest\.json)",
             [&](const httplib::Request& req, httplib::Response& res) {
               const std::string model = req.matches[1].str();
               nlohmann::json files = nlohmann::json::array();
               for (const auto& e : fs::directory_iterator(models_ / model)) {
                 // The liar's manifest promises more bytes than it serves.
                 const std::int64_t bytes =
                     static_cast<std::int64_t>(e.file_size()) + (model == "liar" ? 7 : 0);
                 files.push_back({{"path", e.path().filename().string()}, {"bytes", bytes}});
               }
               res.set_content(nlohmann::json{{"files", files}}.dump(), "application/json");
             });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serving([&] { server.listen_after_bind(); });
  auto http = makeHttpSource("hub", "http://127.0.0.1:" + std::to_string(port) + "/weights/");
  ASSERT_TRUE(http) << http.error().message;
  std::vector<ModelSource*> list{http->get()};
  auto cache = open(1 << 20);
  auto staged = cache->stage("org/llama", list);
  EXPECT_TRUE(staged) << (staged ? "" : staged.error().message);
  EXPECT_EQ(readFile(fs::path(cache->pathOf("org/llama")) / "shard-1.bin"),
            readFile(models_ / "org/llama" / "shard-1.bin"));
  auto liar = cache->stage("liar", list);
  EXPECT_FALSE(liar);
  if (!liar) {
    EXPECT_NE(liar.error().message.find("expected 1007 bytes, got 1000"), std::string::npos);
  }
  auto none = cache->stage("absent", list);
  EXPECT_FALSE(none);
  if (!none) {
    EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  }
  server.stop();
  serving.join();
  EXPECT_EQ(cache->models(), (std::vector<std::string>{"org/llama"}));
  EXPECT_TRUE(fs::is_empty(dir_.path() / "cache" / "staging"));
  EXPECT_EQ(cache->status().diskUsedBytes, 21 * kKi - 24);
}

// Random stages, pins, host loads, removals and restarts; after every step the capacities
// hold, pinned models are present, and the index matches the files on disk.
TEST_F(ModelCacheTest, RandomisedInvariants) {
  std::uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("TESSERA_SEED")) seed = std::stoull(s);
  std::cout << "ModelCacheTest.RandomisedInvariants seed " << seed << " (TESSERA_SEED to replay)\n";
  std::mt19937_64 rng(seed);
  constexpr int kModels = 12;
  std::vector<std::string> names;
  for (int m = 0; m < kModels; ++m) {
    names.push_back("m" + std::to_string(m));
    std::vector<std::int64_t> sizes;
    const int files = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < files; ++f)
      sizes.push_back(1 + static_cast<std::int64_t>(rng() % (12 * kKi)));
    addModel(models_, names.back(), sizes);
  }
  const std::int64_t disk = 40 * kKi + static_cast<std::int64_t>(rng() % (40 * kKi));
  const std::int64_t host = 20 * kKi + static_cast<std::int64_t>(rng() % (20 * kKi));
  auto cache = open(disk, host);
  std::map<std::string, int> pins;
  for (int step = 0; step < 300; ++step) {
    const std::string& m = names[rng() % kModels];
    clock_.advance(static_cast<Millis>(rng() % 50));
    switch (rng() % 7) {
      case 0:
      case 1: {
        auto r = cache->stage(m, sources());
        if (!r) {
          ASSERT_EQ(r.error().code, ErrorCode::kResourceExhausted) << r.error().message;
        }
        break;
      }
      case 2:
        if (cache->pin(m)) ++pins[m];
        break;
      case 3:
        if (pins[m] > 0) {
          ASSERT_TRUE(cache->unpin(m));
          --pins[m];
        }
        break;
      case 4: {
        auto r = cache->loadToHost(m);
        if (!r) {
          ASSERT_NE(r.error().code, ErrorCode::kInternal) << r.error().message;
        }
        break;
      }
      case 5:
        (void)cache->remove(m);
        break;
      case 6:
        if (rng() % 8 == 0) {  // restart: pins belong to the process and go with it
          cache.reset();
          cache = open(disk, host);
          pins.clear();
        }
        break;
    }
    const CacheStatus s = cache->status();
    ASSERT_LE(s.diskUsedBytes, disk) << "step " << step;
    ASSERT_LE(s.hostUsedBytes, host) << "step " << step;
    for (const auto& [name, n] : pins) {
      if (n > 0) {
        ASSERT_TRUE(cache->contains(name)) << "pinned " << name << " evicted at step " << step;
      }
    }
    ASSERT_EQ(bytesOnDisk(dir_.path() / "cache" / "models"), s.diskUsedBytes) << "step " << step;
    std::set<std::string> folders;
    for (const auto& e : fs::directory_iterator(dir_.path() / "cache" / "models")) {
      folders.insert(e.path().filename().string());
    }
    const auto listed = cache->models();
    ASSERT_EQ(folders, std::set<std::string>(listed.begin(), listed.end())) << "step " << step;
  }
}

TEST_F(ModelCacheTest, ChecksSafetensorsHeadersWhenStaging) {
  fs::create_directories(models_ / "good");
  fs::create_directories(models_ / "bad");
  ASSERT_TRUE(
      profile::writeSyntheticModel((models_ / "good" / "model.safetensors").string(), 64 * kKi, 4));
  ASSERT_TRUE(
      profile::writeSyntheticModel((models_ / "bad" / "model.safetensors").string(), 64 * kKi, 4));
  // Cut the data section short: the header's byte ranges no longer fit the file.
  fs::resize_file(models_ / "bad" / "model.safetensors", 32 * kKi);
  auto cache = open(1 << 20);
  auto good = cache->stage("good", sources());
  ASSERT_TRUE(good) << good.error().message;
  auto bad = cache->stage("bad", sources());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find(
                "bad/model.safetensors from source local is not a valid safetensors file"),
            std::string::npos)
      << bad.error().message;
  EXPECT_EQ(cache->models(), (std::vector<std::string>{"good"}));
  EXPECT_TRUE(fs::is_empty(dir_.path() / "cache" / "staging"));
}

// The directory source, counting the files it hands out.
class CountingSource final : public ModelSource {
 public:
  explicit CountingSource(ModelSource& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  Result<std::vector<SourceFile>> list(const std::string& model) override {
    return inner_.list(model);
  }
  Result<std::int64_t> fetch(const std::string& model, const SourceFile& file, int fd) override {
    ++fetches;
    return inner_.fetch(model, file, fd);
  }
  std::atomic<int> fetches{0};

 private:
  ModelSource& inner_;
};

// Several threads staging, pinning and loading at once: requests for one model share one
// copy, and the capacities hold throughout.
TEST_F(ModelCacheTest, ConcurrentStagesShareOneCopyAndKeepTheCapacity) {
  for (int m = 0; m < 6; ++m) addModel(models_, "m" + std::to_string(m), {20 * kKi, 10 * kKi});
  CountingSource counting(*source_);
  std::vector<ModelSource*> list{&counting};
  auto cache = open(100 * kKi, 40 * kKi);
  std::vector<std::thread> threads;
  std::atomic<int> staged{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      if (cache->stage("m0", list)) ++staged;
    });
  }
  for (auto& t : threads) t.join();
  threads.clear();
  EXPECT_EQ(staged, 4);
  EXPECT_EQ(counting.fetches, 2);  // two files, copied once
  std::atomic<bool> overCapacity{false};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const std::string m = "m" + std::to_string((t + i) % 6);
        if (cache->stage(m, list) && cache->pin(m)) {
          (void)cache->loadToHost(m);
          (void)cache->unpin(m);
        }
        const CacheStatus s = cache->status();
        if (s.diskUsedBytes > 100 * kKi || s.hostUsedBytes > 40 * kKi) overCapacity = true;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_FALSE(overCapacity);
  EXPECT_EQ(bytesOnDisk(dir_.path() / "cache" / "models"), cache->status().diskUsedBytes);
  for (const CacheEntry& e : cache->status().entries) EXPECT_EQ(e.pins, 0) << e.model;
}

TEST(ModelNames, AreCheckedAndEncoded) {
  EXPECT_TRUE(checkModelName("meta-llama/Llama-3-8B"));
  EXPECT_TRUE(checkModelName("qwen:7b@v2"));
  for (const char* bad : {"", "/abs", "a//b", "a/../b", "..", "a b", "a\\b"}) {
    EXPECT_FALSE(checkModelName(bad)) << bad;
  }
  EXPECT_EQ(encodeModelName("meta-llama/Llama-3-8B"), "meta-llama%2FLlama-3-8B");
  EXPECT_EQ(encodeModelName("qwen:7b"), "qwen%3A7b");
}

}  // namespace
}  // namespace tessera::agent
