#include "common/names.h"

#include <cstdio>

namespace tessera {
namespace {

bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (const char c : s.substr(0, 80)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  if (s.size() > 80) out += "...";
  return out + "\"";
}

bool isLabel(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max || !alnum(s.front()) || !alnum(s.back())) return false;
  for (const char c : s) {
    if (!alnum(c) && c != '-') return false;
  }
  return true;
}

bool isSubdomain(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max || !alnum(s.front()) || !alnum(s.back())) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (alnum(c) || c == '-') continue;
    // '.' separates labels: each starts and ends with a letter or digit.
    if (c == '.' && alnum(s[i - 1]) && i + 1 < s.size() && alnum(s[i + 1])) continue;
    return false;
  }
  return true;
}

constexpr const char* kSubdomainRule =
    "(lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at "
    "most ";
constexpr const char* kLabelRule =
    "(lowercase letters, digits and '-', starting and ending with a letter or digit, at most ";

}  // namespace

std::optional<std::string> checkName(std::string_view name, NameKind kind,
                                     std::size_t maxLength) {
  switch (kind) {
    case NameKind::kLabel: {
      const std::size_t max = maxLength > 0 ? maxLength : 63;
      if (isLabel(name, max)) return std::nullopt;
      return quoted(name) + " is not a DNS-1123 label " + kLabelRule + std::to_string(max) +
             " characters)";
    }
    case NameKind::kSubdomain: {
      const std::size_t max = maxLength > 0 ? maxLength : 253;
      if (isSubdomain(name, max)) return std::nullopt;
      return quoted(name) + " is not a DNS-1123 subdomain " + kSubdomainRule +
             std::to_string(max) + " characters)";
    }
    case NameKind::kObjectKey: {
      const std::size_t slash = name.find('/');
      if (slash == std::string_view::npos) {
        if (isSubdomain(name, 253)) return std::nullopt;
      } else if (isLabel(name.substr(0, slash), 63) && isSubdomain(name.substr(slash + 1), 253)) {
        return std::nullopt;
      }
      return quoted(name) +
             " is neither a DNS-1123 subdomain nor NAMESPACE/NAME (a DNS-1123 label, '/', a "
             "subdomain) " +
             kSubdomainRule + "253 characters)";
    }
  }
  return std::nullopt;
}

std::string toSubdomain(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (alnum(lower) || lower == '.') {
      if (lower == '.' && (out.empty() || out.back() == '.' || out.back() == '-')) continue;
      out += lower;
    } else if (!out.empty() && out.back() != '-' && out.back() != '.') {
      out += '-';
    }
  }
  if (out.size() > 253) out.resize(253);
  while (!out.empty() && !alnum(out.back())) out.pop_back();
  return out.empty() ? "model" : out;
}

}  // namespace tessera
