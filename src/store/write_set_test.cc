// The per-object port on the SQLite adapter (versions are revisions; a precondition that does
// not hold is a conflict and writes nothing) and store::writeAll above it: the atomic path
// stores all or nothing, and the one-object-at-a-time path (the SQLite store with its atomic
// path hidden, as the API server has none) undoes the writes before the one that fails, keeps
// another writer's later change, and names the writes it could not undo. Randomised cases
// print their seed; TESSERA_SEED=<seed> TESSERA_FUZZ_ITERATIONS=1 reproduces one.
#include "store/write_set.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "store/store.h"
#include "store/testing/forwarding_store.h"
#include "store/testing/seed.h"

namespace tessera::store::write_set_tests {
namespace {

using testing::Rng;

std::unique_ptr<Store> openMemory() {
  auto store = Store::open(":memory:");
  EXPECT_TRUE(store) << store.error().message;
  return std::move(*store);
}

// (kind, name) -> JSON text of every stored document.
using Contents = std::map<std::pair<std::string, std::string>, std::string>;

Contents contents(const StateStore& s) {
  Contents out;
  auto all = s.loadAll();
  EXPECT_TRUE(all) << all.error().message;
  if (!all) return out;
  for (const Document& d : all->documents) out[{d.kind, d.name}] = d.json;
  return out;
}

// A SQLite store (behind the per-object path unless `atomic`) whose put()/remove() calls can
// be refused: `refuse(call)` (calls numbered from 1, undo writes included) returns the error
// code that call fails with, or nullopt to let it through. `beforeRefusal` runs (once) just
// before the first refused call: another writer's chance to change what the set wrote.
class RefusingStore final : public testing::ForwardingStore {
 public:
  explicit RefusingStore(StateStore& inner, bool atomic = false) : ForwardingStore(inner, atomic) {}

  Result<Version> put(std::string_view kind, std::string_view name, std::string_view json,
                      const Precondition& pre = {}) override {
    TESSERA_RETURN_IF_ERROR(admit(kind, name));
    return ForwardingStore::put(kind, name, json, pre);
  }
  Result<void> remove(std::string_view kind, std::string_view name,
                      const Precondition& pre = {}) override {
    TESSERA_RETURN_IF_ERROR(admit(kind, name));
    return ForwardingStore::remove(kind, name, pre);
  }

  std::function<std::optional<ErrorCode>(int call)> refuse;
  std::function<void()> beforeRefusal;
  int calls = 0;

 private:
  Result<void> admit(std::string_view kind, std::string_view name) {
    ++calls;
    const auto code = refuse ? refuse(calls) : std::nullopt;
    if (!code) return {};
    if (beforeRefusal) std::exchange(beforeRefusal, nullptr)();
    return fail(Error{*code, "refused (test): " + std::string(kind) + " " + std::string(name)});
  }
};

TEST(StorePort, VersionsAreRevisionsAndAPreconditionThatFailsIsAConflict) {
  auto store = openMemory();
  EXPECT_FALSE(store->get("node", "n1").value());
  auto v1 = store->put("node", "n1", R"({"v":1})", Precondition::mustNotExist());
  ASSERT_TRUE(v1) << v1.error().message;
  EXPECT_EQ(*v1, "1");
  EXPECT_EQ(store->get("node", "n1").value()->version, *v1);

  // A create of what exists, and a write or delete naming a stale version: conflicts, and
  // nothing changes.
  EXPECT_EQ(store->put("node", "n1", "{}", Precondition::mustNotExist()).error().code,
            ErrorCode::kFailedPrecondition);
  auto v2 = store->put("node", "n1", R"({"v":2})", Precondition::matching(*v1));
  ASSERT_TRUE(v2) << v2.error().message;
  EXPECT_EQ(store->put("node", "n1", R"({"v":3})", Precondition::matching(*v1)).error().code,
            ErrorCode::kFailedPrecondition);
  EXPECT_EQ(store->remove("node", "n1", Precondition::matching(*v1)).error().code,
            ErrorCode::kFailedPrecondition);
  EXPECT_EQ(store->get("node", "n1").value()->json, R"({"v":2})");
  ASSERT_TRUE(store->remove("node", "n1", Precondition::matching(*v2)));
  // Gone: a version to match is a conflict, an unconditional delete is not an error.
  EXPECT_EQ(store->remove("node", "n1", Precondition::matching(*v2)).error().code,
            ErrorCode::kFailedPrecondition);
  EXPECT_EQ(store->put("node", "n1", "{}", Precondition::matching(*v2)).error().code,
            ErrorCode::kFailedPrecondition);
  EXPECT_TRUE(store->remove("node", "n1"));

  // Malformed calls: versions this store never gives, a create-only delete, bad input.
  for (const char* bad : {"", "x", "0", "-3", "12a"}) {
    EXPECT_EQ(store->put("node", "n1", "{}", Precondition::matching(bad)).error().code,
              ErrorCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(store->remove("node", "n1", Precondition::mustNotExist()).error().code,
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(store->put("node", "n1", "{").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(store->put("", "n1", "{}").error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(contents(*store).empty());
}

TEST(WriteSet, TheAtomicPathStoresAllOrNothing) {
  auto store = openMemory();
  ASSERT_TRUE(store->put("node", "n1", "1"));
  // A store with atomicWrites() gets the whole set in one call, never a put() of it.
  RefusingStore atomic(*store, /*atomic=*/true);
  ASSERT_TRUE(atomic.atomicWrites());
  WriteSet conflict;
  conflict.put("node", "n2", "2").put("node", "n1", "9", Precondition::mustNotExist());
  auto refused = writeAll(atomic, conflict);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(contents(*store), (Contents({{{"node", "n1"}, "1"}})));
  WriteSet ok;
  ok.put("node", "n2", "2").remove("node", "n1");
  ASSERT_TRUE(writeAll(atomic, ok));
  EXPECT_EQ(contents(*store), (Contents({{{"node", "n2"}, "2"}})));
  EXPECT_EQ(atomic.calls, 0);
}

TEST(WriteSet, MalformedSetsAreRefusedBeforeAnyWrite) {
  auto store = openMemory();
  RefusingStore oneByOne(*store);
  WriteSet twice;
  twice.put("node", "a", "{}").put("node", "b", "{}").remove("node", "a");
  WriteSet badJson;
  badJson.put("node", "a", "{}").put("node", "b", "{");
  WriteSet createDelete;
  createDelete.put("node", "a", "{}").remove("node", "b", Precondition::mustNotExist());
  for (const WriteSet* w : {&twice, &badJson, &createDelete}) {
    for (StateStore* s :
         {static_cast<StateStore*>(store.get()), static_cast<StateStore*>(&oneByOne)}) {
      auto done = writeAll(*s, *w);
      ASSERT_FALSE(done);
      EXPECT_EQ(done.error().code, ErrorCode::kInvalidArgument) << done.error().message;
    }
  }
  EXPECT_EQ(oneByOne.calls, 0);
  EXPECT_TRUE(contents(*store).empty());
  EXPECT_TRUE(writeAll(oneByOne, WriteSet{}));  // nothing to write
}

// The third write fails: the first two (a change and a delete) are put back, in reverse order,
// and the error is the failed write's.
TEST(WriteSet, OneObjectAtATimeUndoesTheWritesBeforeTheOneThatFails) {
  auto store = openMemory();
  ASSERT_TRUE(store->put("node", "a", R"({"v":1})"));
  ASSERT_TRUE(store->put("node", "b", R"({"v":1})"));
  const auto before = contents(*store);
  RefusingStore s(*store);
  s.refuse = [](int call) -> std::optional<ErrorCode> {
    if (call == 3) return ErrorCode::kFailedPrecondition;
    return std::nullopt;
  };
  WriteSet writes;
  writes.put("node", "a", R"({"v":2})").remove("node", "b").put("node", "c", "{}");
  auto failed = writeAll(s, writes);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(failed.error().message.find("node c"), std::string::npos) << failed.error().message;
  EXPECT_EQ(failed.error().message.find("undoing"), std::string::npos) << failed.error().message;
  EXPECT_FALSE(leftPartlyWritten(failed.error()));
  EXPECT_EQ(contents(*store), before);
  EXPECT_EQ(s.calls, 5);  // three writes, two undos
}

// Between the failure and the undo another writer changes what the set wrote: the undo is a
// conflict (it does not overwrite the later change), and the error names it.
TEST(WriteSet, AnUndoNeverOverwritesAnotherWritersLaterChange) {
  auto store = openMemory();
  ASSERT_TRUE(store->put("node", "a", R"({"v":1})"));
  RefusingStore s(*store);
  s.refuse = [](int call) -> std::optional<ErrorCode> {
    if (call == 3) return ErrorCode::kInternal;
    return std::nullopt;
  };
  s.beforeRefusal = [&] { ASSERT_TRUE(store->put("node", "a", R"({"other":true})")); };
  WriteSet writes;
  writes.put("node", "a", R"({"v":2})").put("node", "b", "{}").put("node", "c", "{}");
  auto failed = writeAll(s, writes);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kInternal);
  const std::string& m = failed.error().message;
  EXPECT_NE(m.find("undoing the earlier writes of this change failed too"), std::string::npos) << m;
  EXPECT_TRUE(leftPartlyWritten(failed.error()));
  EXPECT_NE(m.find("node a:"), std::string::npos) << m;
  EXPECT_EQ(m.find("node b:"), std::string::npos) << m;
  EXPECT_EQ(contents(*store), (Contents({{{"node", "a"}, R"({"other":true})"}})));
}

// Random documents, random write sets (puts and deletes, with and without preconditions), the
// Nth call refused (sometimes an undo too): the store ends as the set left it when every write
// went through, as it was before otherwise, except for the objects the error names.
TEST(WriteSetRandom, AFailedSetLeavesTheStoreAsItWasExceptWhatItNames) {
  const std::uint64_t master = testing::fuzzSeed();
  const int cases = testing::fuzzIterations(300);
  std::printf("WriteSetRandom seed: TESSERA_SEED=%llu (%d cases)\n",
              static_cast<unsigned long long>(master), cases);
  Rng seeds(master);
  const char* kinds[] = {"node", "model", "replica"};
  for (int i = 0; i < cases; ++i) {
    const std::uint64_t seed = i == 0 ? master : seeds.next();
    SCOPED_TRACE("case seed TESSERA_SEED=" + std::to_string(seed) + " TESSERA_FUZZ_ITERATIONS=1");
    Rng rng(seed);
    auto store = openMemory();
    Contents expected;
    for (const char* kind : kinds) {
      for (int n = 0; n < 4; ++n) {
        if (!rng.chance(0.5)) continue;
        const std::string name = "d" + std::to_string(n), json = std::to_string(rng.between(0, 99));
        ASSERT_TRUE(store->put(kind, name, json));
        expected[{kind, name}] = json;
      }
    }
    const auto before = expected;
    // A set over distinct keys, each write's precondition one that holds.
    WriteSet writes;
    const int size = static_cast<int>(rng.between(1, 6));
    std::map<std::pair<std::string, std::string>, bool> used;
    for (int w = 0; w < size; ++w) {
      const std::pair<std::string, std::string> key{kinds[rng.between(0, 2)],
                                                    "d" + std::to_string(rng.between(0, 3))};
      if (used[key]) continue;
      used[key] = true;
      auto doc = store->get(key.first, key.second).value();
      Precondition pre;
      if (rng.chance(0.5))
        pre = doc ? Precondition::matching(doc->version) : Precondition::mustNotExist();
      if (doc && rng.chance(0.4)) {
        writes.remove(key.first, key.second, pre);
        expected.erase(key);
      } else {
        const std::string json = "{\"w\":" + std::to_string(w) + "}";
        if (pre.kind == Precondition::Kind::kMustNotExist || !doc || rng.chance(0.8)) {
          writes.put(key.first, key.second, json, pre);
        } else {
          writes.put(key.first, key.second, json, Precondition::matching(doc->version));
        }
        expected[key] = json;
      }
    }
    RefusingStore s(*store);
    const int writesCount = static_cast<int>(writes.size());
    // 0: nothing refused; else the call that fails (an undo when past the writes).
    const int refusedCall = rng.chance(0.2) ? 0 : static_cast<int>(rng.between(1, writesCount));
    const int refusedUndo =
        refusedCall > 1 && rng.chance(0.3) ? static_cast<int>(rng.between(1, refusedCall - 1)) : 0;
    s.refuse = [&](int call) -> std::optional<ErrorCode> {
      if (call == refusedCall) return ErrorCode::kInternal;
      if (refusedUndo > 0 && call == refusedCall + refusedUndo) return ErrorCode::kInternal;
      return std::nullopt;
    };
    auto done = writeAll(s, writes);
    const auto after = contents(*store);
    if (refusedCall == 0) {
      ASSERT_TRUE(done) << done.error().message;
      ASSERT_EQ(after, expected);
      continue;
    }
    ASSERT_FALSE(done);
    ASSERT_EQ(done.error().code, ErrorCode::kInternal);
    const auto& all = writes.writes();
    // Undos run in reverse: undo #k takes back write refusedCall - k (those that changed
    // something: a delete of a missing document has nothing to undo).
    std::map<std::pair<std::string, std::string>, bool> leftAsWritten;
    if (refusedUndo > 0) {
      std::vector<const WriteSet::Write*> undone;
      for (int w = refusedCall - 2; w >= 0; --w) {
        const auto& write = all[static_cast<std::size_t>(w)];
        if (write.op == WriteSet::Write::Op::kRemove &&
            !before.contains({write.kind, write.name})) {
          continue;
        }
        undone.push_back(&write);
      }
      ASSERT_LE(refusedUndo, static_cast<int>(undone.size()) + 1);
      if (refusedUndo <= static_cast<int>(undone.size())) {
        const auto* w = undone[static_cast<std::size_t>(refusedUndo - 1)];
        leftAsWritten[{w->kind, w->name}] = true;
        ASSERT_NE(done.error().message.find(w->kind + " " + w->name + ":"), std::string::npos)
            << done.error().message;
      }
    }
    auto want = before;
    for (const auto& [key, yes] : leftAsWritten) {
      if (expected.contains(key)) {
        want[key] = expected.at(key);
      } else {
        want.erase(key);
      }
    }
    ASSERT_EQ(after, want) << done.error().message;
    if (leftAsWritten.empty()) {
      ASSERT_EQ(done.error().message.find("undoing"), std::string::npos) << done.error().message;
    }
  }
}

}  // namespace
}  // namespace tessera::store::write_set_tests
