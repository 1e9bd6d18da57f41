#include "profile/json_util.h"

#include <set>

namespace tessera::profile::internal {

using nlohmann::json;

Result<json> parseJson(std::string_view text, int maxDepth, bool rejectDuplicateTopKeys) {
  // Nesting, counted on the text (brackets outside strings), before anything is built.
  int depth = 0;
  bool inString = false, escape = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        inString = false;
      }
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth) {
        return fail(Error::invalid("JSON nested deeper than " + std::to_string(maxDepth) +
                                   " levels (at byte " + std::to_string(i) + ")"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }

  std::set<std::string> keys;
  std::string duplicate;
  json::parser_callback_t callback = [&](int d, json::parse_event_t event, json& parsed) {
    if (rejectDuplicateTopKeys && d == 1 && event == json::parse_event_t::key &&
        parsed.is_string() && duplicate.empty()) {
      if (!keys.insert(parsed.get<std::string>()).second) duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json value = json::parse(text.begin(), text.end(), rejectDuplicateTopKeys ? callback : nullptr,
                           /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Parse again with exceptions for the position and reason (only on the error path).
    std::string why = "not valid JSON";
    try {
      const json ignored = json::parse(text.begin(), text.end());
      (void)ignored;
    } catch (const json::exception& e) {
      why = e.what();
    }
    return fail(Error::invalid("invalid JSON: " + printable(why, 200)));
  }
  if (!duplicate.empty()) return fail(Error::invalid("duplicate key " + printable(duplicate)));
  return value;
}

std::string describeJson(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case json::value_t::string:
      return "string " + printable(value.get<std::string>(), 40);
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "number " + value.dump();
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "an unexpected value";
  }
}

std::optional<std::uint64_t> jsonUnsigned(const json& value) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) {
    const auto v = value.get<std::int64_t>();
    if (v >= 0) return static_cast<std::uint64_t>(v);
  }
  return std::nullopt;
}

std::string printable(std::string_view s, std::size_t max) {
  return "\"" + sanitized(s, max) + "\"";
}

std::string sanitized(std::string_view s, std::size_t max) {
  std::string out;
  const std::size_t n = s.size() < max ? s.size() : max;
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c >= 0x7f) ? '?' : static_cast<char>(c);
  }
  if (s.size() > max) out += "...";
  return out;
}

}  // namespace tessera::profile::internal
