// store_crash_writer DB [MAX_BATCHES]: the victim of the store's crash test.
//
// Commits batches to the store at DB in a loop, continuing from what the database holds. Batch
// i writes two documents and one event: a new document item/i-<i> (content from
// crash_payload.h), the document head/head updated to {"batch": i} with the revision it had
// (optimistic concurrency) and an event {"batch": i}. Only after commit() returned does it
// print "ack <i> <revision> <event seq>" to stdout, unbuffered, so everything the test reads
// was acknowledged as durable. Every kCompactEvery batches it also compacts the event log,
// keeping the last kKeepEvents events, and prints "compact <seq>" once that committed. Stops
// after MAX_BATCHES (default: never); exits 3 on an error.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "store/store.h"
#include "store/testing/crash_payload.h"

namespace {

void writeAll(const std::string& line) {
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(STDOUT_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) std::exit(4);
    done += static_cast<std::size_t>(n);
  }
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "store_crash_writer: %s\n", what.c_str());
  std::exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera::store;
  if (argc < 2 || argc > 3) die("usage: store_crash_writer DB [MAX_BATCHES]");
  const std::int64_t maxBatches = argc == 3 ? std::atoll(argv[2]) : -1;

  auto store = Store::open(argv[1]);
  if (!store) die(store.error().message);
  std::int64_t batch = 0;
  std::optional<std::int64_t> headRevision = kMustNotExist;
  auto head = (*store)->get(testing::kHeadKind, testing::kHeadName);
  if (!head) die(head.error().message);
  if (*head) {
    batch = testing::headBatch((*head)->json);
    headRevision = (*head)->revision;
  }

  for (std::int64_t done = 0; maxBatches < 0 || done < maxBatches; ++done) {
    ++batch;
    Batch b;
    b.upsert(testing::kItemKind, testing::itemName(batch), testing::itemJson(batch), kMustNotExist);
    b.upsert(testing::kHeadKind, testing::kHeadName, testing::headJson(batch), headRevision);
    b.appendEvent(testing::kEventKind, testing::headJson(batch));
    auto committed = (*store)->commit(b);
    if (!committed) die(committed.error().message);
    headRevision = committed->revision;
    writeAll("ack " + std::to_string(batch) + " " + std::to_string(committed->revision) + " " +
             std::to_string(committed->lastEventSeq) + "\n");
    if (batch % testing::kCompactEvery == 0) {
      const std::int64_t before = committed->lastEventSeq + 1 - testing::kKeepEvents;
      auto compacted = (*store)->compactEventsBefore(before);
      if (!compacted) die(compacted.error().message);
      writeAll("compact " + std::to_string(before) + "\n");
    }
  }
  return 0;
}
