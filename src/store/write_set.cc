#include "store/write_set.h"

#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace tessera::store {
namespace {

using Write = WriteSet::Write;

// How an error of writeAll() says that it could not undo every earlier write.
constexpr std::string_view kUndoFailed = "; undoing the earlier writes of this change failed too";

std::string writeLabel(const Write& w) {
  return w.kind + " " + w.name;
}

Result<void> validateWrites(const WriteSet& writes) {
  std::set<std::pair<std::string_view, std::string_view>> keys;
  for (const Write& w : writes.writes()) {
    std::string problem;
    if (w.kind.empty() || w.name.empty()) {
      problem = "kind and name are required";
    } else if (!keys.emplace(w.kind, w.name).second) {
      problem = "written twice in one change";
    } else if (w.op == Write::Op::kPut && !nlohmann::json::accept(w.json)) {
      problem = "not JSON";
    } else if (w.pre.kind == Precondition::Kind::kMustMatch && w.pre.version.empty()) {
      problem = "an empty version to match";
    } else if (w.op == Write::Op::kRemove && w.pre.kind == Precondition::Kind::kMustNotExist) {
      problem = "a delete cannot require that the document does not exist";
    }
    if (!problem.empty())
      return fail(Error::invalid("write set: " + writeLabel(w) + ": " + problem));
  }
  return {};
}

// One write of the per-object path that succeeded, and how to take it back.
struct Done {
  const Write* write;
  std::optional<Document> before;  // as it was before the set; nullopt: it did not exist
  Version after;                   // the version the put gave it (puts only)
};

Result<void> undo(StateStore& store, const Done& d) {
  const Write& w = *d.write;
  if (w.op == Write::Op::kPut && !d.before) {
    return store.remove(w.kind, w.name, Precondition::matching(d.after));
  }
  // A removed document is created again; a changed one gets its content back.
  auto put = store.put(
      w.kind, w.name, d.before->json,
      w.op == Write::Op::kRemove ? Precondition::mustNotExist() : Precondition::matching(d.after));
  if (!put) return fail(put.error());
  return {};
}

Result<void> oneByOne(StateStore& store, const WriteSet& writes) {
  std::vector<Done> done;
  auto rollback = [&](Error e) -> Result<void> {
    std::string left;
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      if (auto undone = undo(store, *it); !undone) {
        left += (left.empty() ? "" : "; ") + writeLabel(*it->write) + ": " + undone.error().message;
      }
    }
    if (!left.empty()) {
      e.message += std::string(kUndoFailed) + ", so " + store.describe() +
                   " holds part of it until those are written again: " + left;
    }
    return fail(std::move(e));
  };
  const auto& all = writes.writes();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const Write& w = all[i];
    std::optional<Document> before;
    // What to put back on a later failure. The last write is never undone, and a create that
    // succeeds had nothing before it: neither needs the read.
    const bool last = i + 1 == all.size();
    if (!last && w.pre.kind != Precondition::Kind::kMustNotExist) {
      auto got = store.get(w.kind, w.name);
      if (!got) {
        Error e = got.error();
        e.message = "reading " + writeLabel(w) + " before writing it: " + e.message;
        return rollback(std::move(e));
      }
      before = std::move(*got);
    }
    if (w.op == Write::Op::kPut) {
      auto version = store.put(w.kind, w.name, w.json, w.pre);
      if (!version) return rollback(version.error());
      done.push_back({&w, std::move(before), std::move(*version)});
    } else {
      if (auto removed = store.remove(w.kind, w.name, w.pre); !removed) {
        return rollback(removed.error());
      }
      if (before) done.push_back({&w, std::move(before), {}});  // a missing one: nothing to undo
    }
  }
  return {};
}

}  // namespace

WriteSet& WriteSet::put(std::string kind, std::string name, std::string json, Precondition pre) {
  writes_.push_back(
      {Write::Op::kPut, std::move(kind), std::move(name), std::move(json), std::move(pre)});
  return *this;
}

WriteSet& WriteSet::remove(std::string kind, std::string name, Precondition pre) {
  writes_.push_back({Write::Op::kRemove, std::move(kind), std::move(name), {}, std::move(pre)});
  return *this;
}

Result<void> StateStore::commitAtomically(const WriteSet&) {
  return fail(Error::internal(describe() + " cannot write several documents in one transaction"));
}

bool leftPartlyWritten(const Error& e) {
  return e.message.find(kUndoFailed) != std::string::npos;
}

Result<void> writeAll(StateStore& store, const WriteSet& writes) {
  if (writes.empty()) return {};
  TESSERA_RETURN_IF_ERROR(validateWrites(writes));
  if (store.atomicWrites()) return store.commitAtomically(writes);
  return oneByOne(store, writes);
}

}  // namespace tessera::store
