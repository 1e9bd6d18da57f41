// Random sequences of batches, compactions and restarts against an in-memory model of what the
// store must hold. Prints its seed; TESSERA_SEED=<seed> TESSERA_FUZZ_ITERATIONS=1 reproduces a
// failing case alone.

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "store/store.h"
#include "store/testing/seed.h"
#include "store/testing/temp_dir.h"

namespace tessera::store {
namespace {

using testing::Rng;

struct Model {
  std::map<std::pair<std::string, std::string>, Document> documents;
  std::vector<Event> events;  // retained
  std::int64_t revision = 0;
  std::int64_t lastEventSeq = 0;
  std::int64_t firstRetainedSeq = 1;

  std::int64_t revisionOf(const std::string& kind, const std::string& name) const {
    const auto it = documents.find({kind, name});
    return it == documents.end() ? 0 : it->second.revision;
  }
};

const std::vector<std::string> kKinds = {"node", "replica", "reservation"};
const std::vector<std::string> kNames = {"a", "b", "c", "d", "e", "f"};

// Built by appending: GCC 12 warns (-Wrestrict, falsely) on "literal" + std::string at -O3.
std::string randomJson(Rng& rng) {
  std::string out;
  switch (rng.between(0, 3)) {
    case 0:
      out = "{\"v\":";
      out += std::to_string(rng.between(-1000, 1000));
      out += "}";
      break;
    case 1:
      out = "[";
      out += std::to_string(rng.between(0, 9));
      out += ",true,null]";
      break;
    case 2:
      out = "\"s";
      out += std::to_string(rng.next() % 100000);
      out += "\"";
      break;
    default:
      out = "{\"nested\":{\"k\":[1,2,{\"x\":\"y\"}]},\"n\":";
      out += std::to_string(rng.next() % 7);
      out += "}";
      break;
  }
  return out;
}

// A random batch; `conflict` says whether the model says it must be refused as a conflict.
Batch randomBatch(Rng& rng, const Model& model, bool& conflict) {
  Batch batch;
  conflict = false;
  std::set<std::pair<std::string, std::string>> used;
  const int ops = static_cast<int>(rng.between(1, 4));
  for (int i = 0; i < ops; ++i) {
    std::string kind = kKinds[static_cast<std::size_t>(rng.between(0, 2))];
    std::string name = kNames[static_cast<std::size_t>(rng.between(0, 5))];
    if (!used.emplace(kind, name).second) continue;
    const std::int64_t current = model.revisionOf(kind, name);
    if (rng.chance(0.7)) {
      std::optional<std::int64_t> expected;
      switch (rng.between(0, 5)) {
        case 0:
        case 1:
          break;
        case 2:
        case 3:
          expected = current;
          break;  // right (kMustNotExist when absent)
        case 4:
          expected = current + 1 + rng.between(0, 2);
          break;
        default:
          expected = kMustNotExist;
          break;
      }
      if (expected && *expected != current) conflict = true;
      batch.upsert(kind, name, randomJson(rng), expected);
    } else {
      std::optional<std::int64_t> expected;
      const auto pick = rng.between(0, 5);
      if (pick >= 2 && pick <= 4 && current > 0) expected = current;
      if (pick == 5) expected = current + 1;
      if (expected && *expected != current) conflict = true;
      batch.remove(kind, name, expected);
    }
  }
  const int events = static_cast<int>(rng.between(0, 2));
  for (int i = 0; i < events; ++i) {
    std::optional<Millis> time;
    if (rng.chance(0.3)) time = rng.between(0, 1'000'000);
    batch.appendEvent(rng.chance(0.5) ? "Placed" : "Unloaded", randomJson(rng), time);
  }
  return batch;
}

void applyToModel(const Batch& batch, Model& model, Millis now) {
  ++model.revision;
  for (const auto& u : batch.upserts()) {
    model.documents[{u.kind, u.name}] =
        Document{u.kind, u.name, u.json, model.revision, now, std::to_string(model.revision)};
  }
  for (const auto& d : batch.deletes()) model.documents.erase({d.kind, d.name});
  for (const auto& e : batch.events()) {
    model.events.push_back({++model.lastEventSeq, e.timeMs.value_or(now), e.kind, e.json});
  }
}

void expectMatches(const Store& store, const Model& model, Rng& rng, const std::string& where) {
  SCOPED_TRACE(where);
  auto snap = store.loadAll();
  ASSERT_TRUE(snap) << snap.error().message;
  std::vector<Document> docs;
  for (const auto& [key, doc] : model.documents) docs.push_back(doc);
  ASSERT_EQ(snap->documents, docs);
  ASSERT_EQ(snap->events, model.events);
  ASSERT_EQ(snap->revision, model.revision);
  ASSERT_EQ(snap->lastEventSeq, model.lastEventSeq);
  ASSERT_EQ(snap->firstRetainedSeq, model.firstRetainedSeq);

  for (const auto& kind : kKinds) {
    auto listed = store.list(kind);
    ASSERT_TRUE(listed);
    std::vector<Document> expected;
    for (const auto& [key, doc] : model.documents) {
      if (key.first == kind) expected.push_back(doc);
    }
    ASSERT_EQ(*listed, expected);
  }
  const std::string kind = kKinds[static_cast<std::size_t>(rng.between(0, 2))];
  const std::string name = kNames[static_cast<std::size_t>(rng.between(0, 5))];
  auto got = store.get(kind, name);
  const auto it = model.documents.find({kind, name});
  ASSERT_TRUE(got) << got.error().message;
  if (it == model.documents.end()) {
    ASSERT_FALSE(*got);
  } else {
    ASSERT_TRUE(*got);
    ASSERT_EQ(**got, it->second);
  }

  // A random page of the log, optionally of one kind.
  const std::int64_t after = rng.between(0, model.lastEventSeq + 1);
  const int limit = static_cast<int>(rng.between(1, 5));
  const std::string eventKind = rng.chance(0.3) ? "Placed" : "";
  auto page = store.eventsAfter(after, limit, eventKind);
  if (after + 1 < model.firstRetainedSeq) {
    ASSERT_FALSE(page);
    ASSERT_EQ(page.error().code, ErrorCode::kFailedPrecondition);
    return;
  }
  ASSERT_TRUE(page) << page.error().message;
  std::vector<Event> matching;
  for (const auto& e : model.events) {
    if (e.seq > after && (eventKind.empty() || e.kind == eventKind)) matching.push_back(e);
  }
  const std::size_t shown = std::min<std::size_t>(matching.size(), static_cast<std::size_t>(limit));
  ASSERT_EQ(page->events, std::vector<Event>(matching.begin(), matching.begin() + shown));
  ASSERT_EQ(page->more, matching.size() > shown);
}

void runCase(std::uint64_t seed, int steps) {
  Rng rng(seed);
  testing::TempDir dir;
  const std::string path = dir.file("random.db");
  ManualClock clock(static_cast<Millis>(rng.between(0, 1'000'000)));
  auto opened = Store::open(path, {.clock = &clock});
  ASSERT_TRUE(opened) << opened.error().message;
  std::unique_ptr<Store> store = std::move(*opened);
  Model model;

  for (int step = 0; step < steps; ++step) {
    clock.advance(rng.between(0, 50));
    const std::string where = "step " + std::to_string(step);
    const auto action = rng.between(0, 19);
    if (action < 15) {
      bool conflict = false;
      Batch batch = randomBatch(rng, model, conflict);
      if (batch.empty()) continue;
      auto result = store->commit(batch);
      if (conflict) {
        ASSERT_FALSE(result) << where;
        ASSERT_EQ(result.error().code, ErrorCode::kFailedPrecondition) << where;
      } else {
        ASSERT_TRUE(result) << where << ": " << result.error().message;
        const std::int64_t firstSeq = model.lastEventSeq + 1;
        applyToModel(batch, model, clock.nowMs());
        ASSERT_EQ(result->revision, model.revision) << where;
        if (batch.events().empty()) {
          ASSERT_EQ(result->firstEventSeq, 0) << where;
        } else {
          ASSERT_EQ(result->firstEventSeq, firstSeq) << where;
          ASSERT_EQ(result->lastEventSeq, model.lastEventSeq) << where;
        }
      }
    } else if (action < 16) {
      // A bad batch: valid writes beside one unparsable document.
      bool conflict = false;
      Batch batch = randomBatch(rng, model, conflict);
      batch.upsert("bad", "json", "{\"unterminated\":");
      auto result = store->commit(batch);
      ASSERT_FALSE(result) << where;
      ASSERT_EQ(result.error().code, ErrorCode::kInvalidArgument) << where;
    } else if (action < 18) {
      const std::int64_t before = rng.between(1, model.lastEventSeq + 1);
      auto removed = store->compactEventsBefore(before);
      ASSERT_TRUE(removed) << where << ": " << removed.error().message;
      std::int64_t expectedRemoved = 0;
      if (before > model.firstRetainedSeq) {
        std::vector<Event> kept;
        for (const auto& e : model.events) {
          if (e.seq >= before) {
            kept.push_back(e);
          } else {
            ++expectedRemoved;
          }
        }
        model.events = std::move(kept);
        model.firstRetainedSeq = before;
      }
      ASSERT_EQ(*removed, expectedRemoved) << where;
    } else {
      store.reset();  // a clean restart
      auto reopened = Store::open(path, {.clock = &clock});
      ASSERT_TRUE(reopened) << where << ": " << reopened.error().message;
      store = std::move(*reopened);
    }
    expectMatches(*store, model, rng, where);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(StoreRandom, MatchesAModelAcrossBatchesCompactionsAndRestarts) {
  const std::uint64_t master = testing::fuzzSeed();
  const int cases = testing::fuzzIterations(8);
  std::printf("StoreRandom seed: TESSERA_SEED=%llu (%d cases)\n",
              static_cast<unsigned long long>(master), cases);
  Rng seeds(master);
  for (int i = 0; i < cases; ++i) {
    const std::uint64_t seed = i == 0 ? master : seeds.next();
    SCOPED_TRACE("case seed TESSERA_SEED=" + std::to_string(seed) + " TESSERA_FUZZ_ITERATIONS=1");
    runCase(seed, 100);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace tessera::store
