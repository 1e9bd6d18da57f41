#pragma once
// Polling for tests that wait on another thread or process: `pred` is tried every `step`
// until it holds or `limit` passed. The limit only stops a broken test from hanging; it is
// not a timing assertion. Returns whether `pred` held.

#include <chrono>
#include <functional>
#include <thread>

namespace tessera {

inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds limit = std::chrono::seconds(30),
                       std::chrono::milliseconds step = std::chrono::milliseconds(10)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (pred()) return true;
    std::this_thread::sleep_for(step);
  }
  return pred();
}

}  // namespace tessera
