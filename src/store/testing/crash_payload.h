#pragma once
// What store_crash_writer writes in batch i, shared with the crash test that checks it. The
// item's content is a pure function of i (with a length that varies from a few hundred bytes to
// a few KiB, so batches span WAL pages), so the test can tell an intact document from a torn one.
// Threading: pure functions.

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tessera::store::testing {

inline constexpr const char* kItemKind = "item";
inline constexpr const char* kHeadKind = "head";
inline constexpr const char* kHeadName = "head";
inline constexpr const char* kEventKind = "batch";

// The writer compacts the log every kCompactEvery batches, keeping the last kKeepEvents events.
inline constexpr std::int64_t kCompactEvery = 64;
inline constexpr std::int64_t kKeepEvents = 32;

inline std::string itemName(std::int64_t batch) {
  return "i-" + std::to_string(batch);
}

inline std::string itemJson(std::int64_t batch) {
  std::uint64_t x = static_cast<std::uint64_t>(batch) * 0x9e3779b97f4a7c15ULL + 1;
  auto next = [&x] {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 29;
    return x;
  };
  const std::size_t length = 200 + next() % 6000;
  std::string pad(length, ' ');
  std::uint64_t sum = 0;
  for (char& c : pad) {
    c = static_cast<char>('a' + next() % 26);
    sum = sum * 31 + static_cast<unsigned char>(c);
  }
  return nlohmann::json{{"batch", batch}, {"pad", pad}, {"sum", sum}}.dump();
}

inline std::string headJson(std::int64_t batch) {
  return nlohmann::json{{"batch", batch}}.dump();
}

// The batch number in a head document or event; -1 when it has none.
inline std::int64_t headBatch(std::string_view json) {
  const auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("batch") || !j["batch"].is_number_integer()) return -1;
  return j["batch"].get<std::int64_t>();
}

}  // namespace tessera::store::testing
