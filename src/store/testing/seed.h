#pragma once
// Seeds for the store's randomised tests, with the conventions of
// src/sched/testing/random_cluster.h: $TESSERA_SEED reproduces a run, $TESSERA_FUZZ_ITERATIONS
// sets how many cases run, and every draw comes from splitmix64 so a seed means the same thing
// on every platform. (The store's tests do not link the scheduler, hence this small twin.)
// Threading: an Rng is owned by one thread.

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>

namespace tessera::store::testing {

inline std::uint64_t envNumber(const char* name, std::uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  std::string_view s(text);
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value, base);
  if (ec != std::errc() || end != s.data() + s.size()) {
    // Running another seed than the one being reproduced would hide the failure.
    std::fprintf(stderr, "%s=%s is not an unsigned integer\n", name, text);
    std::abort();
  }
  return value;
}

// $TESSERA_SEED when set, else a fresh random seed. Print it.
inline std::uint64_t fuzzSeed() {
  std::random_device device;
  const std::uint64_t fresh = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  return envNumber("TESSERA_SEED", fresh);
}

inline int fuzzIterations(int fallback) {
  const std::uint64_t n =
      envNumber("TESSERA_FUZZ_ITERATIONS", static_cast<std::uint64_t>(fallback));
  return n > 100'000'000 ? 100'000'000 : static_cast<int>(n);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi]; lo when hi < lo.
  std::int64_t between(std::int64_t lo, std::int64_t hi) {
    if (hi <= lo) return lo;
    return lo + static_cast<std::int64_t>(next() % (static_cast<std::uint64_t>(hi - lo) + 1));
  }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }

 private:
  std::uint64_t state_;
};

}  // namespace tessera::store::testing
