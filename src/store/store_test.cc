#include "store/store.h"
#include "store/event_sink.h"

#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "store/testing/temp_dir.h"

namespace tessera::store {
namespace {

using testing::TempDir;

std::unique_ptr<Store> openOrDie(const std::string& path, const StoreOptions& options = {}) {
  auto store = Store::open(path, options);
  EXPECT_TRUE(store.has_value()) << (store ? "" : store.error().message);
  return store ? std::move(*store) : nullptr;
}

TEST(Store, NewStoreIsEmptyAtTheLatestSchema) {
  auto store = openOrDie(":memory:");
  ASSERT_TRUE(store);
  EXPECT_EQ(store->schemaVersion(), Store::latestSchemaVersion());
  auto snap = store->loadAll();
  ASSERT_TRUE(snap) << snap.error().message;
  EXPECT_TRUE(snap->documents.empty());
  EXPECT_TRUE(snap->events.empty());
  EXPECT_EQ(snap->revision, 0);
  EXPECT_EQ(snap->lastEventSeq, 0);
  EXPECT_EQ(snap->firstRetainedSeq, 1);
}

TEST(Store, UpsertGetListRoundTrip) {
  ManualClock clock(1000);
  auto store = openOrDie(":memory:", {.clock = &clock});
  ASSERT_TRUE(store);
  Batch b;
  b.upsert("node", "n1", R"({"gpus":8})").upsert("node", "n0", "[1,2]").upsert("model", "m", "3");
  auto c = store->commit(b);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->revision, 1);
  EXPECT_EQ(c->firstEventSeq, 0);
  EXPECT_EQ(c->lastEventSeq, 0);

  auto n1 = store->get("node", "n1");
  ASSERT_TRUE(n1 && *n1);
  EXPECT_EQ(**n1, (Document{"node", "n1", R"({"gpus":8})", 1, 1000, "1"}));
  auto nodes = store->list("node");
  ASSERT_TRUE(nodes);
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "n0");  // ordered by name
  EXPECT_EQ((*nodes)[1].name, "n1");
  EXPECT_TRUE(store->list("deployment")->empty());

  clock.advance(5);
  auto c2 = store->commit(Batch().upsert("node", "n1", R"({"gpus":4})"));
  ASSERT_TRUE(c2);
  EXPECT_EQ(c2->revision, 2);
  EXPECT_EQ(store->get("node", "n1").value(),
            (Document{"node", "n1", R"({"gpus":4})", 2, 1005, "2"}));
  EXPECT_EQ(store->get("node", "n0").value()->revision, 1);  // untouched documents keep theirs
}

TEST(Store, TextIsStoredVerbatim) {
  auto store = openOrDie(":memory:");
  const std::string json = "{ \"a\" : [ 1 , 2.50 ], \"name\": \"gr\xc3\xbc\xc3\x9f\" }";
  ASSERT_TRUE(store->commit(Batch().upsert("k", "n\xc3\xa9", json)));
  EXPECT_EQ(store->get("k", "n\xc3\xa9").value()->json, json);
}

TEST(Store, MissingDocumentIsNone) {
  auto store = openOrDie(":memory:");
  auto got = store->get("node", "absent");
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_FALSE(*got);
}

TEST(Store, DeleteRemovesAndIsIdempotentWithoutExpectation) {
  auto store = openOrDie(":memory:");
  ASSERT_TRUE(store->commit(Batch().upsert("node", "a", "{}").upsert("node", "b", "{}")));
  auto c = store->commit(Batch().remove("node", "a").remove("node", "never-existed"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(store->get("node", "a").value());
  EXPECT_TRUE(store->get("node", "b").value());
}

TEST(Store, ExpectedRevisionsGuardWrites) {
  auto store = openOrDie(":memory:");
  ASSERT_TRUE(store->commit(Batch().upsert("r", "x", "1", kMustNotExist)));
  auto again = store->commit(Batch().upsert("r", "x", "2", kMustNotExist));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(again.error().message.find("r/x"), std::string::npos) << again.error().message;

  auto stale = store->commit(Batch().upsert("r", "x", "2", 7));
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(store->commit(Batch().upsert("r", "x", "2", 1)));
  EXPECT_EQ(store->get("r", "x").value()->json, "2");

  auto staleDelete = store->commit(Batch().remove("r", "x", 1));
  ASSERT_FALSE(staleDelete);
  EXPECT_EQ(staleDelete.error().code, ErrorCode::kFailedPrecondition);
  auto missingDelete = store->commit(Batch().remove("r", "y", 1));
  ASSERT_FALSE(missingDelete);
  EXPECT_EQ(missingDelete.error().code, ErrorCode::kFailedPrecondition);
  ASSERT_TRUE(store->commit(Batch().remove("r", "x", 2)));
}

TEST(Store, RevisionsAreNeverReusedAfterDeleteAndRecreate) {
  auto store = openOrDie(":memory:");
  ASSERT_TRUE(store->commit(Batch().upsert("r", "x", "1")));  // revision 1
  ASSERT_TRUE(store->commit(Batch().remove("r", "x")));       // revision 2
  auto c = store->commit(Batch().upsert("r", "x", "1"));      // revision 3
  ASSERT_TRUE(c);
  EXPECT_EQ(c->revision, 3);
  // A writer that read the first x (revision 1) cannot overwrite the new one.
  EXPECT_FALSE(store->commit(Batch().upsert("r", "x", "9", 1)));
}

TEST(Store, ABatchWithOneConflictWritesNothing) {
  auto store = openOrDie(":memory:");
  ASSERT_TRUE(store->commit(Batch().upsert("gpu", "g0", "{}").upsert("gpu", "g1", "{}")));
  auto before = store->loadAll();
  ASSERT_TRUE(before);

  Batch b;
  b.upsert("gpu", "g0", R"({"booked":1})", 1)    // matches
      .upsert("gpu", "g2", "{}", kMustNotExist)  // matches
      .remove("gpu", "g1", 1)                    // matches
      .upsert("gpu", "g1x", "{}", 5)             // conflicts: absent
      .appendEvent("placed", "{}");
  auto c = store->commit(b);
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(c.error().message.find("gpu/g1x"), std::string::npos) << c.error().message;

  auto after = store->loadAll();
  ASSERT_TRUE(after);
  EXPECT_EQ(after->documents, before->documents);
  EXPECT_TRUE(after->events.empty());
  EXPECT_EQ(after->revision, before->revision);
  EXPECT_EQ(after->lastEventSeq, 0);
  // The next commit takes the next revision and seq, as if the refused one never happened.
  auto next = store->commit(Batch().appendEvent("placed", "{}"));
  ASSERT_TRUE(next);
  EXPECT_EQ(next->revision, before->revision + 1);
  EXPECT_EQ(next->firstEventSeq, 1);
}

TEST(Store, InvalidBatchesAreRefusedAndWriteNothing) {
  auto store = openOrDie(":memory:");
  struct Case {
    const char* what;
    Batch batch;
    const char* mentions;
  };
  std::vector<Case> cases;
  cases.push_back({"empty", Batch(), "empty batch"});
  cases.push_back({"empty kind", Batch().upsert("", "n", "{}"), "kind is empty"});
  cases.push_back({"empty name", Batch().upsert("node", "", "{}"), "name is empty"});
  cases.push_back({"kind charset", Batch().upsert("no de", "n", "{}"), "outside"});
  cases.push_back({"name control", Batch().upsert("node", "a\nb", "{}"), "control"});
  cases.push_back({"name utf8", Batch().upsert("node", "a\xff", "{}"), "UTF-8"});
  cases.push_back({"long name", Batch().upsert("node", std::string(513, 'x'), "{}"), "512"});
  cases.push_back({"bad json", Batch().upsert("node", "n", "{\"a\":"), "does not parse"});
  cases.push_back({"empty json", Batch().upsert("node", "n", ""), "does not parse"});
  cases.push_back({"trailing", Batch().upsert("node", "n", "{} x"), "does not parse"});
  cases.push_back({"bad event json", Batch().appendEvent("e", "nope"), "does not parse"});
  cases.push_back({"empty event kind", Batch().appendEvent("", "{}"), "kind is empty"});
  cases.push_back(
      {"twice", Batch().upsert("node", "n", "{}").remove("node", "n"), "more than once"});
  cases.push_back({"negative expectation", Batch().upsert("node", "n", "{}", -1), "expected"});
  cases.push_back({"delete expecting absence", Batch().remove("node", "n", 0), "expected"});
  // A good write beside a bad one is not written either.
  cases.push_back(
      {"good and bad",
       Batch().upsert("node", "good", "{}").appendEvent("e", "{}").upsert("x", "y", "[1,"), "x/y"});
  for (const auto& c : cases) {
    auto r = store->commit(c.batch);
    ASSERT_FALSE(r) << c.what;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << c.what;
    EXPECT_NE(r.error().message.find(c.mentions), std::string::npos)
        << c.what << ": " << r.error().message;
  }
  auto snap = store->loadAll();
  ASSERT_TRUE(snap);
  EXPECT_TRUE(snap->documents.empty());
  EXPECT_TRUE(snap->events.empty());
  EXPECT_EQ(snap->revision, 0);
}

TEST(Store, EventsGetSeqsInCommitOrderAndPage) {
  ManualClock clock(50);
  auto store = openOrDie(":memory:", {.clock = &clock});
  auto c1 = store->commit(Batch().appendEvent("a", "1").appendEvent("b", "2", 7));
  ASSERT_TRUE(c1);
  EXPECT_EQ(c1->firstEventSeq, 1);
  EXPECT_EQ(c1->lastEventSeq, 2);
  for (int i = 3; i <= 25; ++i) {
    ASSERT_TRUE(store->commit(Batch().appendEvent(i % 2 ? "a" : "b", std::to_string(i))));
  }
  auto first = store->eventsAfter(0, 2);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->events.size(), 2u);
  EXPECT_EQ(first->events[0], (Event{1, 50, "a", "1"}));
  EXPECT_EQ(first->events[1], (Event{2, 7, "b", "2"}));  // explicit time kept
  EXPECT_TRUE(first->more);

  std::vector<std::int64_t> seqs;
  std::int64_t after = 0;
  for (;;) {
    auto page = store->eventsAfter(after, 4);
    ASSERT_TRUE(page);
    for (const auto& e : page->events) seqs.push_back(e.seq);
    if (!page->more) break;
    after = page->events.back().seq;
  }
  ASSERT_EQ(seqs.size(), 25u);
  for (std::size_t i = 0; i < seqs.size(); ++i)
    EXPECT_EQ(seqs[i], static_cast<std::int64_t>(i) + 1);

  auto onlyB = store->eventsAfter(10, 100, "b");
  ASSERT_TRUE(onlyB);
  for (const auto& e : onlyB->events) {
    EXPECT_EQ(e.kind, "b");
    EXPECT_GT(e.seq, 10);
  }
  EXPECT_EQ(onlyB->events.size(), 7u);  // 12, 14, ..., 24
  EXPECT_FALSE(onlyB->more);

  EXPECT_FALSE(store->eventsAfter(0, 0));
  EXPECT_FALSE(store->eventsAfter(0, 10001));
  EXPECT_FALSE(store->eventsAfter(-1, 5));
  auto past = store->eventsAfter(1000, 5);
  ASSERT_TRUE(past);
  EXPECT_TRUE(past->events.empty());
}

TEST(Store, CompactionTrimsEventsKeepsDocumentsAndNeverReusesSeqs) {
  auto store = openOrDie(":memory:");
  for (int i = 1; i <= 10; ++i) {
    std::string name = "n";  // appended: "literal" + std::string trips GCC 12's -Wrestrict
    name += std::to_string(i);
    ASSERT_TRUE(
        store->commit(Batch().upsert("node", name, "{}").appendEvent("e", std::to_string(i))));
  }
  auto removed = store->compactEventsBefore(7);
  ASSERT_TRUE(removed) << removed.error().message;
  EXPECT_EQ(*removed, 6);
  EXPECT_EQ(store->list("node")->size(), 10u);

  auto snap = store->loadAll();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->firstRetainedSeq, 7);
  ASSERT_EQ(snap->events.size(), 4u);
  EXPECT_EQ(snap->events.front().seq, 7);

  auto lost = store->eventsAfter(3, 10);
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(store->eventsAfter(6, 10));  // exactly at the compaction point is fine

  EXPECT_EQ(*store->compactEventsBefore(5), 0);  // below an earlier point: nothing
  EXPECT_FALSE(store->compactEventsBefore(12));  // past the end of the log
  EXPECT_FALSE(store->compactEventsBefore(0));

  // Trim everything, then append: seqs continue, never restart.
  EXPECT_EQ(*store->compactEventsBefore(11), 4);
  auto c = store->commit(Batch().appendEvent("e", "11"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->firstEventSeq, 11);
  snap = store->loadAll();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->lastEventSeq, 11);
  ASSERT_EQ(snap->events.size(), 1u);
}

TEST(Store, RestartRestoresExactlyWhatWasCommitted) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  ManualClock clock(123);
  Snapshot expected;
  {
    auto store = openOrDie(path, {.clock = &clock});
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->commit(Batch()
                                  .upsert("node", "n1", R"({"gpus":[{"id":0}]})")
                                  .upsert("deployment", "d", R"({"replicas":2})")
                                  .appendEvent("NodeAdded", R"({"node":"n1"})")));
    clock.advance(10);
    ASSERT_TRUE(store->commit(Batch()
                                  .upsert("replica", "d-0", R"({"gpu":"n1/0"})", kMustNotExist)
                                  .upsert("reservation", "d-0", R"({"mib":1000})")
                                  .remove("deployment", "d")
                                  .appendEvent("ReplicaPlaced", R"({"replica":"d-0"})")));
    ASSERT_TRUE(store->compactEventsBefore(2));
    auto snap = store->loadAll();
    ASSERT_TRUE(snap);
    expected = *snap;
  }
  auto reopened = openOrDie(path, {.clock = &clock});
  ASSERT_TRUE(reopened);
  auto snap = reopened->loadAll();
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->documents, expected.documents);
  EXPECT_EQ(snap->events, expected.events);
  EXPECT_EQ(snap->revision, 2);
  EXPECT_EQ(snap->lastEventSeq, 2);
  EXPECT_EQ(snap->firstRetainedSeq, 2);
  ASSERT_EQ(snap->documents.size(), 3u);
  EXPECT_EQ(snap->documents[0], (Document{"node", "n1", R"({"gpus":[{"id":0}]})", 1, 123, "1"}));
}

TEST(Store, FileDatabaseIsInWalModeAndMarkedAsTessera) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  auto store = openOrDie(path);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->commit(Batch().upsert("k", "n", "{}")));
  // SQLite's file header: byte 18/19 are the read/write versions, 2 = WAL.
  const std::string header = testing::readBytes(path).substr(0, 100);
  ASSERT_EQ(header.size(), 100u);
  EXPECT_EQ(header.substr(0, 16), std::string("SQLite format 3\0", 16));
  EXPECT_EQ(header[18], 2);
  EXPECT_EQ(header[19], 2);
}

TEST(Store, TwoStoresOnOneFileSeeEachOthersCommitsAndConflicts) {
  TempDir dir;
  const std::string path = dir.file("state.db");
  auto a = openOrDie(path);
  auto b = openOrDie(path);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->commit(Batch().upsert("gpu", "g", "1", kMustNotExist)));
  EXPECT_EQ(b->get("gpu", "g").value()->json, "1");
  auto lost = b->commit(Batch().upsert("gpu", "g", "2", kMustNotExist));
  ASSERT_FALSE(lost);
  EXPECT_EQ(lost.error().code, ErrorCode::kFailedPrecondition);
  auto c = b->commit(Batch().upsert("gpu", "g", "2", 1));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->revision, 2);
  EXPECT_EQ(a->get("gpu", "g").value()->revision, 2);
}

TEST(Store, ConcurrentWritersThroughOneStoreDoNotLoseUpdates) {
  auto store = openOrDie(":memory:");
  ASSERT_TRUE(store->commit(Batch().upsert("counter", "c", "0")));
  constexpr int kThreads = 4;
  constexpr int kIncrements = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&store] {
      for (int i = 0; i < kIncrements;) {  // read-modify-write with optimistic retries
        auto doc = store->get("counter", "c");
        ASSERT_TRUE(doc && *doc);
        const int value = std::stoi((*doc)->json) + 1;
        if (store->commit(
                Batch().upsert("counter", "c", std::to_string(value), (*doc)->revision))) {
          ++i;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store->get("counter", "c").value()->json, std::to_string(kThreads * kIncrements));
}

TEST(Store, BackupIsAConsistentCopy) {
  TempDir dir;
  auto store = openOrDie(dir.file("state.db"));
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->commit(Batch().upsert("node", "n", "{}").appendEvent("e", "{}")));
  ASSERT_TRUE(store->backupTo(dir.file("backup.db")));
  auto again = store->backupTo(dir.file("backup.db"));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);

  auto copy = openOrDie(dir.file("backup.db"));
  ASSERT_TRUE(copy);
  auto original = store->loadAll();
  auto copied = copy->loadAll();
  ASSERT_TRUE(original && copied);
  EXPECT_EQ(copied->documents, original->documents);
  EXPECT_EQ(copied->events, original->events);
  EXPECT_EQ(copied->revision, original->revision);
}

}  // namespace
}  // namespace tessera::store

namespace tessera::store {
namespace {

// The control plane's event sink over the events table: one transaction per event, no document
// revision, seqs at least the caller's and above every earlier one, history for a restart.
TEST(SqliteEventSink, AppendsApartFromDocumentsAndRestoresTheNewest) {
  auto s = Store::open(":memory:");
  ASSERT_TRUE(s) << s.error().message;
  Store& store = **s;
  SqliteEventSink sink(store);
  ASSERT_TRUE(store.commit(Batch().upsert("node", "n", R"({"a":1})")));
  auto first = sink.append("event", R"({"type":"A"})", 10, 0);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(*first, 1);
  auto skipped = sink.append("event", R"({"type":"B"})", 11, 5);  // the caller's seq wins
  ASSERT_TRUE(skipped);
  EXPECT_EQ(*skipped, 5);
  auto next = sink.append("event", R"({"type":"C"})", 12, 2);  // never below the last
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, 6);
  EXPECT_FALSE(sink.append("event", "not json", 13, 0));
  auto snapshot = store.loadAll();
  ASSERT_TRUE(snapshot);
  EXPECT_EQ(snapshot->revision, 1);  // events commit no revision
  EXPECT_EQ(snapshot->lastEventSeq, 6);
  auto history = sink.recent(2);
  ASSERT_TRUE(history) << history.error().message;
  EXPECT_EQ(history->lastSeq, 6);
  ASSERT_EQ(history->events.size(), 2u);
  EXPECT_EQ(history->events[0].seq, 5);
  EXPECT_EQ(history->events[0].timeMs, 11);
  EXPECT_EQ(history->events[1].json, R"({"type":"C"})");
  // Compaction keeps the seqs: the next append follows the last.
  auto removed = sink.compactBefore(7);
  ASSERT_TRUE(removed);
  EXPECT_EQ(*removed, 3);
  history = sink.recent(10);
  ASSERT_TRUE(history);
  EXPECT_TRUE(history->events.empty());
  EXPECT_EQ(history->lastSeq, 6);
  auto after = sink.append("event", R"({"type":"D"})", 14, 0);
  ASSERT_TRUE(after);
  EXPECT_EQ(*after, 7);
}

TEST(MemoryEventSink, NumbersFromItsStartAndKeepsNothing) {
  MemoryEventSink sink(1000);
  EXPECT_EQ(*sink.append("event", "{}", 1, 0), 1000);
  EXPECT_EQ(*sink.append("event", "{}", 1, 1500), 1500);
  EXPECT_EQ(*sink.append("event", "{}", 1, 3), 1501);
  auto history = sink.recent(10);
  ASSERT_TRUE(history);
  EXPECT_TRUE(history->events.empty());
  EXPECT_EQ(history->lastSeq, 1501);
}

}  // namespace
}  // namespace tessera::store
