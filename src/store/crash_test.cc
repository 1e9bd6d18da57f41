// The crash test: store_crash_writer commits batches in a loop and reports each acknowledged
// one; this test kills it with SIGKILL at random moments, reopens the database after every kill
// and checks that every acknowledged batch is there, intact, and that no batch is torn (each
// batch writes two documents and one event: all three are there or none is). The writer also
// compacts the log now and then, so kills land in compactions too; the log must then start at
// a compaction point the writer chose, never below one it saw committed.
//
// Prints its seed; TESSERA_SEED=<seed> replays the same kill schedule (the moments are
// wall-clock, so a replay is close, not exact). TESSERA_CRASH_ROUNDS sets the number of kills.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "store/store.h"
#include "store/testing/crash_payload.h"
#include "store/testing/seed.h"
#include "store/testing/temp_dir.h"

extern char** environ;

namespace tessera::store {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Ack {
  std::int64_t revision = 0;
  std::int64_t seq = 0;
};

// One run of the writer, killed with SIGKILL when `stop` says so.
class Victim {
 public:
  explicit Victim(const std::string& db) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      ADD_FAILURE() << "pipe failed";
      return;
    }
    readFd_ = fds[0];
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::string program = TESSERA_STORE_CRASH_WRITER;
    std::string dbArg = db;
    char* argv[] = {program.data(), dbArg.data(), nullptr};
    const int rc = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
      ADD_FAILURE() << "cannot start " << program << ": " << rc;
      pid_ = -1;
    }
  }
  ~Victim() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (readFd_ >= 0) ::close(readFd_);
  }
  Victim(const Victim&) = delete;
  Victim& operator=(const Victim&) = delete;

  bool started() const { return pid_ > 0; }

  // Reads acknowledgements until `until` passes or `acks` lines were read (0: no count).
  void readUntil(Clock::time_point until, std::size_t acks) {
    while (Clock::now() < until && (acks == 0 || lines_ < acks)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
      pollfd p{readFd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0))) <= 0) continue;
      if (!readSome()) return;  // EOF: the writer died on its own
    }
  }

  // SIGKILL, then everything it had written before dying. Returns its wait status.
  int kill() {
    ::kill(pid_, SIGKILL);
    while (readSome()) {
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // Complete lines only: a line cut short by the kill was not acknowledged.
  const std::string& output() const { return output_; }

 private:
  bool readSome() {
    char buffer[4096];
    const ssize_t n = ::read(readFd_, buffer, sizeof buffer);
    if (n <= 0) return false;
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] == '\n') ++lines_;
    }
    output_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int readFd_ = -1;
  std::string output_;
  std::size_t lines_ = 0;
};

struct Acknowledged {
  std::map<std::int64_t, Ack> batches;
  std::int64_t compactedBefore = 1;  // the highest acknowledged compaction point
};

// Parses "ack <batch> <revision> <seq>" and "compact <seq>" lines into `into`; a trailing
// partial line is ignored. Returns how many batches these lines acknowledged.
std::size_t parseOutput(const std::string& output, Acknowledged& into) {
  std::size_t batches = 0;
  std::size_t start = 0;
  for (std::size_t end; (end = output.find('\n', start)) != std::string::npos; start = end + 1) {
    std::istringstream line(output.substr(start, end - start));
    std::string word;
    line >> word;
    if (word == "compact") {
      std::int64_t before = 0;
      line >> before;
      EXPECT_TRUE(line) << "bad line: " << output.substr(start, end - start);
      into.compactedBefore = std::max(into.compactedBefore, before);
      continue;
    }
    std::int64_t batch = 0;
    Ack ack;
    line >> batch >> ack.revision >> ack.seq;
    EXPECT_TRUE(line && word == "ack") << "bad line: " << output.substr(start, end - start);
    into.batches[batch] = ack;
    ++batches;
  }
  return batches;
}

// Checks the database against every acknowledgement so far; returns the number of batches in it.
std::int64_t verify(const std::string& db, const Acknowledged& acked) {
  auto store = Store::open(db);  // also runs SQLite's quick_check
  EXPECT_TRUE(store) << store.error().message;
  if (!store) return -1;
  auto snap = (*store)->loadAll();
  EXPECT_TRUE(snap) << snap.error().message;
  if (!snap) return -1;

  std::map<std::int64_t, const Document*> items;
  const Document* head = nullptr;
  for (const auto& doc : snap->documents) {
    if (doc.kind == testing::kHeadKind && doc.name == testing::kHeadName) {
      head = &doc;
      continue;
    }
    EXPECT_EQ(doc.kind, testing::kItemKind) << doc.name;
    const std::int64_t batch = std::stoll(doc.name.substr(2));
    EXPECT_EQ(doc.name, testing::itemName(batch));
    EXPECT_EQ(doc.json, testing::itemJson(batch)) << "item " << batch << " is not intact";
    items[batch] = &doc;
  }
  const auto batches = static_cast<std::int64_t>(items.size());
  // Commits are sequential, so what survived is a prefix 1..M; batch n is the n-th commit.
  for (std::int64_t n = 1; n <= batches; ++n) {
    EXPECT_TRUE(items.contains(n)) << "batch " << n << " missing below batch " << batches;
    if (items.contains(n)) {
      EXPECT_EQ(items[n]->revision, n);
    }
  }
  // No torn batch: the head document and the log agree with the items.
  if (batches == 0) {
    EXPECT_EQ(head, nullptr) << "head without any item";
  } else if (head == nullptr) {
    ADD_FAILURE() << "items without the head document";
  } else {
    EXPECT_EQ(testing::headBatch(head->json), batches);
    EXPECT_EQ(head->revision, batches);
  }
  EXPECT_EQ(snap->revision, batches);
  EXPECT_EQ(snap->lastEventSeq, batches);
  // The log: every event from the compaction point on, intact; the point is one the writer
  // chose, and not below one it saw committed.
  const std::int64_t floor = snap->firstRetainedSeq;
  EXPECT_GE(floor, acked.compactedBefore);
  EXPECT_TRUE(floor == 1 || (floor - 1 + testing::kKeepEvents) % testing::kCompactEvery == 0)
      << "compaction point " << floor;
  EXPECT_LE(floor, batches + 1);
  EXPECT_EQ(static_cast<std::int64_t>(snap->events.size()), batches - floor + 1);
  for (std::size_t i = 0; i < snap->events.size(); ++i) {
    const Event& e = snap->events[i];
    EXPECT_EQ(e.seq, floor + static_cast<std::int64_t>(i));
    EXPECT_EQ(e.kind, testing::kEventKind);
    EXPECT_EQ(testing::headBatch(e.json), e.seq) << "event " << e.seq << " is not intact";
  }
  // Every acknowledged write is there, with what the writer was told (events before the
  // compaction point were removed on purpose).
  for (const auto& [batch, ack] : acked.batches) {
    EXPECT_LE(batch, batches) << "acknowledged batch " << batch << " was lost";
    if (batch <= batches && items.contains(batch)) {
      EXPECT_EQ(ack.revision, items[batch]->revision) << "batch " << batch;
    }
    EXPECT_EQ(ack.seq, batch) << "batch " << batch;  // one event per batch, seqs from 1
  }
  return batches;
}

TEST(StoreCrash, AcknowledgedWritesSurviveKill9AndNoBatchIsTorn) {
  const std::uint64_t seed = testing::fuzzSeed();
  const int rounds = static_cast<int>(testing::envNumber("TESSERA_CRASH_ROUNDS", 24));
  std::printf("StoreCrash seed: TESSERA_SEED=%llu (%d rounds)\n",
              static_cast<unsigned long long>(seed), rounds);
  testing::Rng rng(seed);
  testing::TempDir dir;
  const std::string db = dir.file("crash.db");

  // Stop starting rounds after this, so a slow machine still finishes in about 20 s.
  const auto budgetEnd = Clock::now() + 15s;
  Acknowledged acked;
  std::int64_t present = 0;
  int kills = 0;
  int killsUnderLoad = 0;
  std::int64_t unacknowledgedButDurable = 0;
  for (int round = 0; round < rounds && (round < 4 || Clock::now() < budgetEnd); ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + " of seed " + std::to_string(seed));
    Victim victim(db);
    ASSERT_TRUE(victim.started());
    if (rng.chance(0.3)) {
      // Anywhere, including while it starts, opens or migrates.
      victim.readUntil(Clock::now() + std::chrono::milliseconds(rng.between(0, 150)), 0);
    } else {
      // Under write load: after some acknowledgements, at a random point of a commit.
      victim.readUntil(Clock::now() + 10s, static_cast<std::size_t>(rng.between(1, 120)));
      std::this_thread::sleep_for(std::chrono::microseconds(rng.between(0, 5000)));
    }
    const int status = victim.kill();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the writer ended on its own (status " << status << "), not by the kill; output:\n"
        << victim.output();
    ++kills;
    std::int64_t maxAck = present;
    if (parseOutput(victim.output(), acked) > 0) {
      ++killsUnderLoad;
      maxAck = std::max(maxAck, acked.batches.rbegin()->first);
    }
    const std::int64_t now = verify(db, acked);
    ASSERT_FALSE(HasFailure());
    // At most the one commit in flight at the kill may be durable without an acknowledgement.
    EXPECT_LE(now, maxAck + 1);
    EXPECT_GE(now, maxAck);
    unacknowledgedButDurable += now - maxAck;
    present = now;
  }
  std::printf(
      "StoreCrash: %d kills (%d under write load), %zu acknowledged batches verified; the "
      "database holds %lld batches (%lld item documents, the head document, the log compacted "
      "before seq %lld or later); %lld batches were durable but not yet acknowledged at a kill\n",
      kills, killsUnderLoad, acked.batches.size(), static_cast<long long>(present),
      static_cast<long long>(present), static_cast<long long>(acked.compactedBefore),
      static_cast<long long>(unacknowledgedButDurable));
  RecordProperty("kills", kills);
  RecordProperty("acknowledged", static_cast<int>(acked.batches.size()));
  EXPECT_GT(killsUnderLoad, 0);
  EXPECT_GT(acked.batches.size(), 0u);
  EXPECT_GT(acked.compactedBefore, 1) << "no compaction was acknowledged";
}

}  // namespace
}  // namespace tessera::store
