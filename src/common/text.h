#pragma once
// Small text helpers: case folding, "did you mean" suggestions, percent-encoding.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// ASCII lower case; other bytes unchanged.
std::string lowerAscii(std::string_view text);

// Levenshtein distance (insertions, deletions, substitutions), byte-wise.
std::size_t editDistance(std::string_view a, std::string_view b);

// The entry of `candidates` nearest to `word` (case-insensitive edit distance), if it is close
// enough to be a typo: 1 edit for words of up to 3 characters, 2 up to 6, 3 beyond. Ties go to
// the candidate sharing the longer prefix.
std::optional<std::string_view> closestName(std::string_view word,
                                            const std::vector<std::string_view>& candidates);

// Percent-encodes every byte but RFC 3986's unreserved characters (ASCII letters, digits,
// '-', '.', '_', '~'), as %XX in upper-case hex: safe as one URL path segment or query value.
std::string percentEncode(std::string_view text);

}  // namespace tessera
