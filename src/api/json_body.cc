#include "api/json_body.h"

#include <string>

namespace tessera::api {

std::size_t jsonNestingDepth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (const char c : text) {
    if (inString) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        inString = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        inString = true;
        break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > limit) return deepest;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

Result<nlohmann::json> parseJsonBody(std::string_view text, std::size_t maxDepth) {
  if (jsonNestingDepth(text, maxDepth) > maxDepth) {
    return fail(Error::invalid("body: arrays and objects nested deeper than " +
                               std::to_string(maxDepth) + " levels"));
  }
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded()) return parsed;
  // Parse again for the position of the problem (only bad bodies pay for it).
  try {
    const nlohmann::json again = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return fail(Error::invalid("body: not valid JSON (byte " + std::to_string(e.byte) + ")"));
  } catch (const nlohmann::json::exception& e) {
    // A number beyond a double ("1e999") is out_of_range, not a parse_error: it used to
    // escape to the server's exception handler and come back as a 500.
    return fail(Error::invalid(std::string("body: not valid JSON (") + e.what() + ")"));
  }
  return fail(Error::invalid("body: not valid JSON"));
}

}  // namespace tessera::api
