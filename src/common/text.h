#pragma once
// Small text helpers: case folding, "did you mean" suggestions, percent-encoding, base64.

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

// RFC 4648 base64 with '=' padding (Triton's file parameters, admission webhooks' patches).
std::string base64Encode(std::string_view bytes);
// The bytes of padded base64 text; nullopt when it is not (a length that is not a multiple of
// four, a character outside the alphabet, padding anywhere but the last two places).
std::optional<std::string> base64Decode(std::string_view text);

}  // namespace tessera
