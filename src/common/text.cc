#include "common/text.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace tessera {

std::string lowerAscii(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string_view> closestName(std::string_view word,
                                            const std::vector<std::string_view>& candidates) {
  // Longer words tolerate more slips; short ones would otherwise match anything.
  const std::size_t threshold = word.size() <= 3 ? 1 : word.size() <= 6 ? 2 : 3;
  const std::string lowered = lowerAscii(word);
  std::optional<std::string_view> best;
  std::size_t bestDistance = threshold + 1;
  std::size_t bestPrefix = 0;
  for (const std::string_view candidate : candidates) {
    const std::string folded = lowerAscii(candidate);
    const std::size_t distance = editDistance(lowered, folded);
    // Ties go to the one that starts the same way: "gpu" means gpus more likely than cpu.
    const std::size_t prefix = static_cast<std::size_t>(
        std::mismatch(lowered.begin(), lowered.end(), folded.begin(), folded.end()).first -
        lowered.begin());
    if (distance > threshold) continue;
    if (distance < bestDistance || (distance == bestDistance && prefix > bestPrefix)) {
      bestDistance = distance;
      bestPrefix = prefix;
      best = candidate;
    }
  }
  return best;
}

std::string percentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool unreserved = (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') ||
                            (u >= '0' && u <= '9') || c == '-' || c == '.' || c == '_' || c == '~';
    if (unreserved) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

std::string base64Encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto byte = [&](std::size_t i) {
    return static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i]));
  };
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const std::uint32_t n = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(n >> shift) & 63];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    std::uint32_t n = byte(i) << 16;
    if (rest == 2) n |= byte(i + 1) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += rest == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::optional<std::string> base64Decode(std::string_view text) {
  const auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t n = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = text[i + k];
      int v = 0;
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
      } else if ((v = value(c)) < 0 || pad > 0) {
        return std::nullopt;
      }
      n = n << 6 | static_cast<std::uint32_t>(v);
    }
    out.push_back(static_cast<char>((n >> 16) & 0xFF));
    if (pad < 2) out.push_back(static_cast<char>((n >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(n & 0xFF));
  }
  return out;
}

}  // namespace tessera
