// kill -9 under a write load: the real `tessera serve` binary with a store file is killed at
// random moments while a client places and removes replicas over HTTP; after each restart
// every acknowledged write must be there, nothing unacknowledged may be half there, and no
// GPU may be over-committed.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/serve_test_support.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using Server = tessera::testing::ServeProcess;

// `tessera serve` on a free port with the store file `db`.
Server startServer(const fs::path& db) {
  return tessera::testing::startServe(
      {"--listen", "127.0.0.1:0", "--store", db.string(), "--threads", "2"});
}

void killHard(const Server& s) {
  ::kill(s.pid, SIGKILL);
  int status = 0;
  ::waitpid(s.pid, &status, 0);
}

// Joins by appending: GCC 12 at -O3 reports a false -Wrestrict for `"x" + std::to_string(n)`.
std::string join(std::string_view a, const std::string& b) {
  std::string out(a);
  out.append(b);
  return out;
}

std::uint64_t seed() {
  if (const char* env = std::getenv("TESSERA_SEED"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  return std::random_device{}();
}

TEST(ServeCrash, KillNineUnderWriteLoadLosesNoAcknowledgedWrite) {
  const std::uint64_t s = seed();
  std::printf("seed %llu (set TESSERA_SEED to replay)\n", static_cast<unsigned long long>(s));
  std::mt19937_64 rng(s);
  const fs::path dir =
      fs::temp_directory_path() / join("tessera_crash_", std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path db = dir / "state.db";

  // Acknowledged state, as the client saw it.
  std::set<std::string> present;    // placed and acknowledged, not removed since
  std::set<std::string> absent;     // removed and acknowledged
  std::set<std::string> uncertain;  // a call without an answer when the server died
  int nodesAcked = 0;
  int acked = 0;
  int kills = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int next = 0;

  for (int round = 0; round < 12 && std::chrono::steady_clock::now() < deadline; ++round) {
    Server server = startServer(db);
    ASSERT_GT(server.port, 0) << "serve did not start (round " << round << ")";
    httplib::Client client("127.0.0.1", server.port);
    client.set_connection_timeout(2);
    client.set_read_timeout(5);

    // After a restart: everything acknowledged is there, everything removed is gone, and the
    // books hold.
    auto list = client.Get("/api/v1/replicas");
    ASSERT_TRUE(list) << "round " << round;
    std::set<std::string> seen;
    const json listed = json::parse(list->body);  // not a temporary: the loop borrows it
    for (const json& r : listed["replicas"]) seen.insert(r["replica"].get<std::string>());
    for (const std::string& id : present) {
      if (uncertain.contains(id)) continue;
      EXPECT_TRUE(seen.contains(id))
          << "acknowledged replica " << id << " lost (round " << round << ")";
    }
    for (const std::string& id : absent) {
      if (uncertain.contains(id)) continue;
      EXPECT_FALSE(seen.contains(id)) << "acknowledged removal of " << id << " undone";
    }
    uncertain.clear();
    // Writes in flight at the kill may have landed: adopt what is there.
    present = seen;
    auto nodes = client.Get("/api/v1/nodes");
    ASSERT_TRUE(nodes);
    const json nodeList = json::parse(nodes->body)["nodes"];
    EXPECT_GE(static_cast<int>(nodeList.size()), nodesAcked);
    for (const json& n : nodeList) {
      for (const json& g : n["gpus"]) {
        EXPECT_LE(g["chargedMib"].get<std::int64_t>() + g["foreignMib"].get<std::int64_t>(),
                  g["memoryMib"].get<std::int64_t>())
            << n["name"] << "/" << g["id"] << " over-committed";
        EXPECT_LE(g["bookedComputeMilli"].get<int>(), g["computeMilli"].get<int>());
      }
    }
    if (round == 0) {
      for (int i = 0; i < 4; ++i) {
        json gpus = json::array();
        for (int g = 0; g < 8; ++g) gpus.push_back({{"type", "A100-80GB"}});
        auto r = client.Post(
            "/api/v1/nodes",
            json{{"name", join("n", std::to_string(i))}, {"cpu", 128}, {"gpus", gpus}}.dump(),
            "application/json");
        ASSERT_TRUE(r);
        ASSERT_EQ(r->status, 201) << r->body;
        ++nodesAcked;
      }
    }

    // The write load runs on a thread; the kill lands at a random moment.
    std::atomic<bool> stop{false};
    std::vector<std::pair<std::string, bool>> acks;  // (id, placed?) acknowledged, in order
    std::string unanswered;                          // the call in flight when the server died
    std::thread writer([&] {
      std::mt19937_64 local(s + static_cast<std::uint64_t>(round));
      std::vector<std::string> mine(present.begin(), present.end());
      while (!stop) {
        if (!mine.empty() && (mine.size() > 60 || local() % 3 == 0)) {
          const std::size_t i = local() % mine.size();
          const std::string id = mine[i];
          auto r = client.Delete(join("/api/v1/replicas/", id));
          if (!r) {  // the server is gone; the removal may or may not have landed
            unanswered = id;
            break;
          }
          if (r->status == 200) {
            acks.emplace_back(id, false);
            mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(i));
          }
        } else {
          const std::string id = join("r", std::to_string(next++));
          const int mib = 8000 + static_cast<int>(local() % 24000);
          auto r = client.Post(
              "/api/v1/replicas",
              json{{"replicaId", id},
                   {"model", {{"name", join("m", std::to_string(mib % 7))}, {"weightsMib", mib}}}}
                  .dump(),
              "application/json");
          if (!r) {
            unanswered = id;
            break;
          }
          if (r->status == 201) {
            acks.emplace_back(id, true);
            mine.push_back(id);
          }
        }
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 300));
    killHard(server);
    ++kills;
    stop = true;
    writer.join();
    if (!unanswered.empty()) uncertain.insert(unanswered);
    for (const auto& [id, placed] : acks) {
      if (placed) {
        present.insert(id);
        absent.erase(id);
      } else {
        present.erase(id);
        absent.insert(id);
      }
      ++acked;
    }
  }
  // One last restart checks the last round's acknowledgements.
  Server server = startServer(db);
  ASSERT_GT(server.port, 0);
  httplib::Client client("127.0.0.1", server.port);
  auto list = client.Get("/api/v1/replicas");
  ASSERT_TRUE(list);
  std::set<std::string> seen;
  const json listed = json::parse(list->body);
  for (const json& r : listed["replicas"]) seen.insert(r["replica"].get<std::string>());
  for (const std::string& id : present) {
    if (!uncertain.contains(id)) {
      EXPECT_TRUE(seen.contains(id)) << id << " lost";
    }
  }
  for (const std::string& id : absent) {
    if (!uncertain.contains(id)) {
      EXPECT_FALSE(seen.contains(id)) << id << " came back";
    }
  }
  killHard(server);
  std::printf("%d kills, %d acknowledged writes verified, %zu replicas at the end\n", kills, acked,
              seen.size());
  EXPECT_GE(kills, 3);
  EXPECT_GT(acked, 0);
  fs::remove_all(dir);
}

}  // namespace
