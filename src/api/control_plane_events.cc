// The control plane's record keeping: the persist step of every write (the documents, then
// their events), the event history in memory and its best-effort sink, and the events that
// change no document.

#include <algorithm>
#include <iterator>

#include "api/control_plane.h"

namespace tessera::api {

using nlohmann::json;

void ControlPlane::remember(std::int64_t seq, Millis timeMs, std::string type, std::string subject,
                            std::string message) {
  if (sink_) {
    sink_(json{{"seq", seq},
               {"timeMs", timeMs},
               {"type", type},
               {"subject", subject},
               {"message", message}});
  }
  // In seq order: a bind's booking event is remembered after its store write, which ran
  // outside the server's lock, so a later seq may already be here.
  auto at = events_.end();
  while (at != events_.begin() && std::prev(at)->seq > seq) --at;
  events_.insert(at, {seq, timeMs, std::move(type), std::move(subject), std::move(message)});
  nextSeq_ = std::max(nextSeq_, seq + 1);
  lastSeq_ = std::max(lastSeq_, seq);
  while (events_.size() > config_.eventHistory ||
         (!events_.empty() && events_.front().timeMs < timeMs - config_.eventMaxAgeMs)) {
    events_.pop_front();
  }
}

void ControlPlane::alert(std::string type, std::string subject, std::string message) {
  // Not in the event history: it has no place in the store's sequence. The sink (the
  // server's log) gets it, and the metric counts it.
  if (sink_) {
    sink_(json{{"seq", nullptr},
               {"timeMs", clock_.nowMs()},
               {"type", std::move(type)},
               {"subject", std::move(subject)},
               {"message", std::move(message)}});
  }
}

void ControlPlane::note(std::string type, std::string subject, std::string message) {
  // No document, so nothing the store could refuse: the event goes to the sink, and a sink
  // that cannot store it is counted in commit() (the event stays in memory and the log).
  (void)commit(store::WriteSet{}, std::move(type), std::move(subject), std::move(message));
}

Millis ControlPlane::eventTimeMs() const {
  // Events carry Unix time (the books' clock may be monotonic, which does not survive a boot).
  return config_.eventClockMs ? config_.eventClockMs()
                              : std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
}

Error ControlPlane::storeRefused(const Error& e) {
  // A revision conflict means another writer got there first: a 409, like any conflict.
  const ErrorCode code = e.code == ErrorCode::kFailedPrecondition ? ErrorCode::kFailedPrecondition
                                                                  : ErrorCode::kInternal;
  // Said only when true: a change written one object at a time whose undo failed too is partly
  // stored (the message names what), though the books forget all of it.
  return Error{code, "the store refused the change (" + e.message + ")" +
                         (store::leftPartlyWritten(e) ? "" : "; nothing was changed")};
}

Result<void> ControlPlane::commit(store::WriteSet batch, std::string type, std::string subject,
                                  std::string message) {
  std::vector<EventText> events;
  events.push_back({std::move(type), std::move(subject), std::move(message)});
  return commit(std::move(batch), std::move(events));
}

Result<void> ControlPlane::commit(store::WriteSet batch, std::vector<EventText> events) {
  const Millis now = eventTimeMs();
  const std::int64_t first = reserveSeqs(events.size());
  std::vector<std::string> texts;
  for (const EventText& e : events) texts.push_back(eventJson(e.type, e.subject, e.message));
  std::vector<Result<std::int64_t>> seqs;
  Result<void> committed;
  const bool documents = store_ != nullptr && !batch.empty();
  if (documents || eventLog_ != nullptr) {
    // The persist step, with no lock of ours held: the documents, then (once they are
    // committed) their events, each in a write of its own.
    storeIo([&] {
      if (documents) {
        if (auto done = store::writeAll(*store_, batch); !done) {
          committed = fail(done.error());
          return;
        }
      }
      if (eventLog_ == nullptr) return;
      std::int64_t least = first;
      for (const std::string& text : texts) {
        seqs.push_back(eventLog_->append("event", text, now, least));
        least = (seqs.back() ? *seqs.back() : least) + 1;
      }
    });
  }
  if (!committed) {
    unreserveSeqs(first, events.size());
    return fail(storeRefused(committed.error()));
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    std::int64_t seq = first + static_cast<std::int64_t>(i);
    if (i < seqs.size()) {
      if (seqs[i]) {
        seq = *seqs[i];
      } else {
        sinkFailed(seqs[i].error());
      }
    }
    EventText& e = events[i];
    remember(seq, now, std::move(e.type), std::move(e.subject), std::move(e.message));
  }
  appendedSinceCompaction_ += seqs.size();
  compactEvents();
  return {};
}

std::int64_t ControlPlane::reserveSeqs(std::size_t count) {
  const std::int64_t first = nextSeq_;
  nextSeq_ += static_cast<std::int64_t>(count);
  return first;
}

void ControlPlane::unreserveSeqs(std::int64_t first, std::size_t count) {
  if (nextSeq_ == first + static_cast<std::int64_t>(count))
    nextSeq_ = std::max(first, lastSeq_ + 1);
}

std::string ControlPlane::eventJson(const std::string& type, const std::string& subject,
                                    const std::string& message) {
  return json{{"type", type}, {"subject", subject}, {"message", message}}.dump();
}

void ControlPlane::sinkFailed(const Error& e) {
  eventSinkErrors_.add({});
  alert("EventNotStored", eventLog_ != nullptr ? eventLog_->describe() : "",
        "the event sink refused an event (" + e.message +
            "); it is kept in memory and in this log only");
}

void ControlPlane::compactEvents() {
  // The sink keeps what memory keeps (the retention in remember()): the documents are the
  // state, the log only feeds GET /events and the dashboard. Every 1024 events; best effort:
  // a failed compaction leaves a longer log, and the next one catches up.
  if (eventLog_ == nullptr || appendedSinceCompaction_ < 1024 || events_.empty()) return;
  appendedSinceCompaction_ = 0;
  Result<std::int64_t> compacted = fail(Error::internal("not run"));
  storeIo([&, before = events_.front().seq] { compacted = eventLog_->compactBefore(before); });
  if (!compacted) internalErrors_.add({{"where", "event-compaction"}});
}

}  // namespace tessera::api
