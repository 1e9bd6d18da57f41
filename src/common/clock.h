#pragma once
// Time is injected: the scheduler, the autoscaler and the simulator read time only through a
// Clock. ManualClock drives tests and the simulator; SteadyClock drives the server.
//
// Threading: SteadyClock is safe from any thread. ManualClock is owned by the thread that
// advances it (the test or the simulator loop).

#include <chrono>
#include <cstdint>

namespace tessera {

// Durations and instants are integer milliseconds on a monotonic time line.
using Millis = std::int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Millis nowMs() const = 0;
};

class SteadyClock final : public Clock {
 public:
  Millis nowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(Millis startMs = 0) : nowMs_(startMs) {}
  Millis nowMs() const override { return nowMs_; }
  void advance(Millis deltaMs) { nowMs_ += deltaMs; }
  void set(Millis nowMs) { nowMs_ = nowMs; }

 private:
  Millis nowMs_;
};

}  // namespace tessera
