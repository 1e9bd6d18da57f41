// Column generation for the bin-packing LP (packing_lp.h).
//
// Primal (restricted to the m patterns of the basis): minimise Σ_p x_p subject to
// Σ_p a_sp x_p = n_s, x ≥ 0. The basis starts with one pattern per size (as many copies as
// fit), which is feasible. Each step: x = B⁻¹ n, duals y = B⁻ᵀ 1, the pattern of largest
// Σ a_s y_s from an unbounded knapsack; if its value exceeds 1 it enters and the ratio test
// picks the pattern that leaves. Dense Gaussian elimination: m is a few dozen at most.

#include "sched/packing_lp.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace tessera::sched {
namespace {

using Matrix = std::vector<std::vector<double>>;

// Solves A z = b in place (A is copied); false when A is numerically singular.
bool solve(Matrix a, std::vector<double> b, std::vector<double>& z) {
  const std::size_t n = b.size();
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t pivot = c;
    for (std::size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-12) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      if (f == 0) continue;
      for (std::size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  z.assign(n, 0);
  for (std::size_t i = n; i-- > 0;) {
    double s = b[i];
    for (std::size_t k = i + 1; k < n; ++k) s -= a[i][k] * z[k];
    z[i] = s / a[i][i];
  }
  return true;
}

// The best pattern for values `y` (negative values count as 0): Σ a_s y_s maximal with
// Σ a_s size_s ≤ capacity. Returns the value; `pattern` gets the counts.
double bestPattern(const std::vector<std::int64_t>& sizes, std::int64_t capacity,
                   const std::vector<double>& y, std::vector<std::int64_t>& pattern) {
  const auto cap = static_cast<std::size_t>(capacity);
  std::vector<double> best(cap + 1, 0.0);
  std::vector<int> choice(cap + 1, -1);
  for (std::size_t c = 1; c <= cap; ++c) {
    best[c] = best[c - 1];
    choice[c] = -1;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const auto s = static_cast<std::size_t>(sizes[i]);
      if (s > c || !(y[i] > 0)) continue;
      const double v = best[c - s] + y[i];
      if (v > best[c]) {
        best[c] = v;
        choice[c] = static_cast<int>(i);
      }
    }
  }
  pattern.assign(sizes.size(), 0);
  for (std::size_t c = cap; c > 0;) {
    if (choice[c] < 0) {
      --c;
      continue;
    }
    const auto i = static_cast<std::size_t>(choice[c]);
    ++pattern[i];
    c -= static_cast<std::size_t>(sizes[i]);
  }
  return best[cap];
}

}  // namespace

Result<PackingLowerBound> packingLowerBound(const std::map<std::int32_t, std::int64_t>& counts,
                                            std::int32_t capacity) {
  if (capacity < 2) {
    return fail(Error::invalid("packing bound: capacity must be at least 2, got " +
                               std::to_string(capacity)));
  }
  std::vector<std::int64_t> sizes;
  std::vector<double> demand;
  PackingLowerBound out;
  out.capacity = capacity;
  std::int64_t divisor = capacity;
  std::int64_t overHalf = 0;
  for (const auto& [size, count] : counts) {
    if (count < 0) {
      return fail(Error::invalid("packing bound: negative count " + std::to_string(count) +
                                 " for size " + std::to_string(size)));
    }
    if (count == 0) continue;
    if (size <= 0 || size >= capacity) {
      return fail(Error::invalid("packing bound: item size " + std::to_string(size) +
                                 " is outside 1.." + std::to_string(capacity - 1)));
    }
    sizes.push_back(size);
    demand.push_back(static_cast<double>(count));
    out.volume += count * size;
    if (2 * std::int64_t{size} > capacity) overHalf += count;
    divisor = std::gcd(divisor, std::int64_t{size});
  }
  if (sizes.empty()) {
    out.converged = true;
    return out;
  }
  const std::int64_t cap = capacity / divisor;
  for (std::int64_t& s : sizes) s /= divisor;
  const std::size_t m = sizes.size();

  // Basis: column j is a pattern; start with one pure pattern per size.
  std::vector<std::vector<std::int64_t>> basis(m, std::vector<std::int64_t>(m, 0));
  for (std::size_t i = 0; i < m; ++i) basis[i][i] = cap / sizes[i];
  const std::vector<double> ones(m, 1.0);
  std::vector<double> x, y, direction;
  std::vector<double> duals(m, 0.0);  // the last duals computed
  std::vector<std::int64_t> pattern;
  const int maxIterations = 50 * static_cast<int>(m) + 500;
  Matrix b(m, std::vector<double>(m)), bt(m, std::vector<double>(m));
  for (out.iterations = 0; out.iterations < maxIterations; ++out.iterations) {
    for (std::size_t r = 0; r < m; ++r) {
      for (std::size_t c = 0; c < m; ++c) {
        b[r][c] = static_cast<double>(basis[c][r]);
        bt[c][r] = b[r][c];
      }
    }
    if (!solve(b, demand, x) || !solve(bt, ones, y)) break;
    duals = y;
    const double value = bestPattern(sizes, cap, y, pattern);
    if (value <= 1 + 1e-9) {
      out.converged = true;
      for (std::size_t j = 0; j < m; ++j) {
        if (!(x[j] > 1e-9)) continue;
        PackingPattern p;
        p.bins = x[j];
        for (std::size_t i = 0; i < m; ++i) {
          if (basis[j][i] == 0) continue;
          p.items.emplace_back(static_cast<std::int32_t>(sizes[i] * divisor),
                               static_cast<std::int32_t>(basis[j][i]));
        }
        out.patterns.push_back(std::move(p));
      }
      break;
    }
    std::vector<double> entering(pattern.begin(), pattern.end());
    if (!solve(b, entering, direction)) break;
    std::size_t leave = m;
    double ratio = 0;
    for (std::size_t j = 0; j < m; ++j) {
      if (direction[j] <= 1e-12) continue;
      const double r = std::max(x[j], 0.0) / direction[j];
      if (leave == m || r < ratio) {
        leave = j;
        ratio = r;
      }
    }
    if (leave == m) break;  // cannot happen for a covering LP; stop with what we have
    basis[leave] = pattern;
  }

  // Certificate: y⁺ scaled so that no pattern is worth more than 1.
  for (double& v : duals) v = std::max(v, 0.0);
  const double worth = bestPattern(sizes, cap, duals, pattern);
  const double scale = std::max(1.0, worth) * (1 + 1e-12);
  double bound = 0;
  for (std::size_t i = 0; i < m; ++i) {
    bound += demand[i] * duals[i];
    out.duals.emplace_back(static_cast<std::int32_t>(sizes[i] * divisor), duals[i] / scale);
  }
  out.lpBins = bound / scale;
  const auto lpCeil = static_cast<std::int64_t>(std::ceil(out.lpBins - 1e-6));
  const std::int64_t byVolume = (out.volume + capacity - 1) / capacity;
  out.bins = std::max({lpCeil, byVolume, overHalf});
  return out;
}

std::vector<std::vector<std::int32_t>> tightPatterns(const PackingLowerBound& lp, double eps,
                                                     std::size_t limit) {
  std::vector<std::vector<std::int32_t>> out;
  // Sizes descending; the best value per unit of capacity bounds what the rest can add.
  std::vector<std::pair<std::int32_t, double>> items(lp.duals.rbegin(), lp.duals.rend());
  double bestRate = 0;
  for (const auto& [size, y] : items) bestRate = std::max(bestRate, y / size);
  std::vector<std::int32_t> current;
  // The search also stops after this many steps, so that a workload of many tiny sizes cannot
  // make it explode; the patterns found by then are returned.
  constexpr std::size_t kMaxSteps = 2'000'000;
  std::size_t steps = 0;
  auto visit = [&](auto&& self, std::size_t from, std::int64_t room, double value) -> void {
    if (out.size() >= limit || ++steps > kMaxSteps) return;
    if (value + bestRate * static_cast<double>(room) < 1 - eps) return;
    if (value >= 1 - eps && !current.empty()) {
      out.emplace_back(current.rbegin(), current.rend());
    }
    for (std::size_t i = from; i < items.size(); ++i) {
      const auto [size, y] = items[i];
      if (size > room || y < 0) continue;
      current.push_back(size);
      self(self, i, room - size, value + y);
      current.pop_back();
    }
  };
  visit(visit, 0, lp.capacity, 0.0);
  return out;
}

}  // namespace tessera::sched
