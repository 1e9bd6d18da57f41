#include "config/yaml_field.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

#include "common/text.h"
#include "config/quantity.h"

namespace tessera::config {
namespace {

// yaml-cpp lines are 0-based and missing (-1) on nodes it synthesised. In a tree built in
// memory (fallback 0) every line stays 0, even on a node that came from parsed text.
int lineOf(const YAML::Node& node, int fallback) {
  if (!node.IsDefined() || fallback == 0) return fallback;
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : fallback;
}

std::string formatNumber(double value) {
  std::array<char, 64> buffer{};
  const auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  if (ec != std::errc()) return "?";
  return std::string(buffer.data(), end);
}

// "must be > 0" reads better than "must be >= 1" for sizes and counts.
std::string lowerBound(std::int64_t min) {
  return min == 1 ? "must be > 0" : "must be >= " + std::to_string(min);
}

std::string typeError(const Field& field, std::string_view expected) {
  std::string message = "must be " + std::string(expected) + ", got " + field.describe();
  if (field.isQuoted()) message += " (quoted text; remove the quotes)";
  return message;
}

// A plain (unquoted) non-null scalar, the only thing numbers and bools are read from.
Result<std::string_view> plainScalar(const Field& field, std::string_view expected) {
  if (field.isNull() || !field.isScalar() || field.isQuoted()) {
    return fail(field.error(typeError(field, expected)));
  }
  return std::string_view(field.node().Scalar());
}

std::string mibText(std::int64_t mib) {
  constexpr std::int64_t kGi = 1024;
  constexpr std::int64_t kTi = 1024 * 1024;
  std::string text = std::to_string(mib) + " MiB";
  if (mib >= kTi && mib % kTi == 0) return text + " (" + std::to_string(mib / kTi) + " TiB)";
  if (mib >= kGi && mib % kGi == 0) return text + " (" + std::to_string(mib / kGi) + " GiB)";
  return text;
}

std::string joinKeys(const std::vector<std::string_view>& keys) {
  std::string out;
  for (const auto& key : keys) {
    if (!out.empty()) out += ", ";
    out += key;
  }
  return out;
}

}  // namespace

Field Field::root(std::string_view source, YAML::Node node) {
  const int line = lineOf(node, 1);
  return Field(source, std::move(node), "", line);
}

Field Field::tree(std::string_view source, YAML::Node node) {
  return Field(source, std::move(node), "", 0);
}

std::string errorPrefix(std::string_view source, int line, const std::string& path) {
  if (line <= 0) return (path.empty() ? std::string(source) : path) + ": ";
  std::string text = std::string(source) + ":" + std::to_string(line) + ": ";
  if (!path.empty()) text += path + ": ";
  return text;
}

Field Field::child(std::string_view key) const {
  std::string path = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  if (isMap()) {
    for (const auto& entry : node_) {
      if (!entry.first.IsScalar() || entry.first.Scalar() != key) continue;
      const int keyLine = lineOf(entry.first, line_);
      // A null value's mark points past it (often at the next key), so use the key's line.
      const int line = entry.second.IsNull() ? keyLine : lineOf(entry.second, keyLine);
      return Field(source_, entry.second, std::move(path), line);
    }
  }
  Field missing(source_, YAML::Node(), std::move(path), line_);
  missing.present_ = false;
  return missing;
}

Field Field::item(std::size_t index) const {
  std::string path = path_ + "[" + std::to_string(index) + "]";
  if (!isSequence() || index >= node_.size()) {
    Field missing(source_, YAML::Node(), std::move(path), line_);
    missing.present_ = false;
    return missing;
  }
  const YAML::Node value = node_[index];
  return Field(source_, value, std::move(path), lineOf(value, line_));
}

bool Field::isQuoted() const {
  if (!isScalar()) return false;
  const std::string& tag = node_.Tag();
  return tag == "!" || tag == "tag:yaml.org,2002:str";
}

Error Field::error(std::string_view message) const {
  return Error::invalid(errorPrefix(source_, line_, path_) + std::string(message));
}

std::string Field::locate() const {
  if (positioned()) return "on line " + std::to_string(line_);
  return "at " + (path_.empty() ? std::string(source_) : path_);
}

std::string Field::describe() const {
  if (isNull()) return "nothing";
  if (isMap()) return "a mapping";
  if (isSequence()) return "a list";
  if (isQuoted()) return "\"" + node_.Scalar() + "\"";
  return node_.Scalar();
}

std::vector<FieldEntry> Field::entries() const {
  std::vector<FieldEntry> out;
  if (!isMap()) return out;
  for (const auto& entry : node_) {
    std::string key = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
    const int keyLine = lineOf(entry.first, line_);
    const int line = entry.second.IsNull() ? keyLine : lineOf(entry.second, keyLine);
    std::string path = path_.empty() ? key : path_ + "." + key;
    out.push_back({key, Field(source_, entry.second, std::move(path), line)});
  }
  return out;
}

Result<void> expectMap(const Field& field, std::initializer_list<std::string_view> allowed) {
  return expectMap(field, std::vector<std::string_view>(allowed));
}

Result<void> expectMap(const Field& field, const std::vector<std::string_view>& allowed) {
  if (!field.isMap()) return fail(field.error(typeError(field, "a mapping")));
  std::map<std::string, int> seen;
  for (const auto& entry : field.node()) {
    const int keyLine = lineOf(entry.first, field.line());
    const Field keyField = Field::root(field.source(), entry.first);
    if (!entry.first.IsScalar()) {
      return fail(Error::invalid(errorPrefix(field.source(), keyLine, field.path()) +
                                 "keys must be plain names, got " + keyField.describe()));
    }
    const std::string& key = entry.first.Scalar();
    const std::string where =
        errorPrefix(field.source(), keyLine, field.path().empty() ? key : field.path() + "." + key);
    if (const auto it = seen.find(key); it != seen.end()) {
      return fail(Error::invalid(
          where + "duplicate key" +
          (keyLine > 0 ? " (first given on line " + std::to_string(it->second) + ")" : "")));
    }
    seen.emplace(key, keyLine);
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string message = where + "unknown key";
      if (const auto near = closestKey(key, allowed)) {
        message += " (did you mean \"" + std::string(*near) + "\"?)";
      }
      message += "; allowed: " + joinKeys(allowed);
      return fail(Error::invalid(std::move(message)));
    }
  }
  return {};
}

Result<void> expectSequence(const Field& field) {
  if (field.isNull() || field.isSequence()) return {};
  return fail(field.error(typeError(field, "a list")));
}

Result<void> require(const Field& field) {
  if (field.absent()) return fail(field.error("required"));
  if (field.isNull()) return fail(field.error("required, got nothing"));
  return {};
}

Result<std::int64_t> readInt(const Field& field, std::int64_t min, std::int64_t max) {
  auto text = plainScalar(field, "an integer");
  if (!text) return fail(std::move(text.error()));
  std::string_view digits = *text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || end != digits.data() + digits.size() || ec == std::errc::invalid_argument) {
    return fail(field.error(typeError(field, "an integer")));
  }
  if (ec == std::errc::result_out_of_range) {
    return fail(field.error("must be an integer in " + std::to_string(min) + ".." +
                            std::to_string(max) + ", got " + field.describe()));
  }
  if (value < min) return fail(field.error(lowerBound(min) + ", got " + field.describe()));
  if (value > max) {
    return fail(field.error("must be <= " + std::to_string(max) + ", got " + field.describe()));
  }
  return value;
}

Result<double> readNumber(const Field& field, double min, double max) {
  auto text = plainScalar(field, "a number");
  if (!text) return fail(std::move(text.error()));
  std::string_view digits = *text;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || end != digits.data() + digits.size() || ec != std::errc() ||
      !std::isfinite(value)) {
    // YAML spells infinity and NaN .inf and .nan; say why those are refused.
    const std::string lowered = lowerAscii(*text);
    const bool special =
        lowered.find("inf") != std::string::npos || lowered.find("nan") != std::string::npos;
    return fail(field.error(typeError(field, special ? "a finite number" : "a number")));
  }
  if (value < min) {
    return fail(field.error("must be >= " + formatNumber(min) + ", got " + field.describe()));
  }
  if (value > max) {
    return fail(field.error("must be <= " + formatNumber(max) + ", got " + field.describe()));
  }
  return value;
}

Result<bool> readBool(const Field& field) {
  auto text = plainScalar(field, "true or false");
  if (!text) return fail(std::move(text.error()));
  if (*text == "true" || *text == "True" || *text == "TRUE") return true;
  if (*text == "false" || *text == "False" || *text == "FALSE") return false;
  return fail(field.error(typeError(field, "true or false")));
}

Result<std::string> readString(const Field& field) {
  if (field.isNull() || !field.isScalar()) return fail(field.error(typeError(field, "text")));
  return field.node().Scalar();
}

Result<std::string> readName(const Field& field) {
  auto text = readString(field);
  if (!text) return text;
  if (text->empty()) return fail(field.error("must not be empty"));
  return text;
}

Result<std::string> readObjectName(const Field& field, NameKind kind, std::size_t maxLength) {
  auto text = readName(field);
  if (!text) return text;
  if (auto why = checkName(*text, kind, maxLength)) return fail(field.error(*why));
  return text;
}

Result<std::vector<std::string>> readStringList(const Field& field) {
  TESSERA_RETURN_IF_ERROR(expectSequence(field));
  std::vector<std::string> out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    auto value = readName(field.item(i));
    if (!value) return fail(std::move(value.error()));
    out.push_back(std::move(*value));
  }
  return out;
}

Result<std::map<std::string, std::string>> readStringMap(const Field& field) {
  std::map<std::string, std::string> out;
  if (field.isNull()) return out;
  // Any key is allowed here; expectMap with an empty list would reject them all.
  if (!field.isMap()) return fail(field.error(typeError(field, "a mapping")));
  for (const FieldEntry& entry : field.entries()) {
    if (entry.key.empty()) return fail(entry.value.error("keys must be non-empty text"));
    if (out.contains(entry.key)) return fail(entry.value.error("duplicate key"));
    auto text = readString(entry.value);
    if (!text) return fail(std::move(text.error()));
    out.emplace(entry.key, std::move(*text));
  }
  return out;
}

Result<void> readOptional(const Field& parent, std::string_view key, std::int64_t& out,
                          std::int64_t min, std::int64_t max) {
  const Field field = parent.child(key);
  if (field.absent()) return {};
  auto value = readInt(field, min, max);
  if (!value) return fail(std::move(value.error()));
  out = *value;
  return {};
}

Result<void> readOptional(const Field& parent, std::string_view key, int& out, std::int64_t min,
                          std::int64_t max) {
  std::int64_t wide = out;
  TESSERA_RETURN_IF_ERROR(readOptional(parent, key, wide, min, max));
  out = static_cast<int>(wide);
  return {};
}

Result<void> readOptional(const Field& parent, std::string_view key, double& out, double min,
                          double max) {
  const Field field = parent.child(key);
  if (field.absent()) return {};
  auto value = readNumber(field, min, max);
  if (!value) return fail(std::move(value.error()));
  out = *value;
  return {};
}

Result<void> readOptional(const Field& parent, std::string_view key, bool& out) {
  const Field field = parent.child(key);
  if (field.absent()) return {};
  auto value = readBool(field);
  if (!value) return fail(std::move(value.error()));
  out = *value;
  return {};
}

Result<void> readOptional(const Field& parent, std::string_view key, std::string& out) {
  const Field field = parent.child(key);
  if (field.absent()) return {};
  auto value = readString(field);
  if (!value) return fail(std::move(value.error()));
  out = std::move(*value);
  return {};
}

Result<void> readOptional(const Field& parent, std::string_view key,
                          std::vector<std::string>& out) {
  const Field field = parent.child(key);
  if (field.absent()) return {};
  auto value = readStringList(field);
  if (!value) return fail(std::move(value.error()));
  out = std::move(*value);
  return {};
}

Result<void> readOptional(const Field& parent, std::string_view key,
                          std::map<std::string, std::string>& out) {
  const Field field = parent.child(key);
  if (field.absent()) return {};
  auto value = readStringMap(field);
  if (!value) return fail(std::move(value.error()));
  out = std::move(*value);
  return {};
}

Result<std::optional<std::int64_t>> readMemory(const Field& parent, const MemoryField& spec) {
  const Field mib = parent.child(spec.mibKey);
  // Without a quantity spelling the MiB key is looked up twice; harmless and keeps one path.
  const Field quantity = parent.child(spec.quantityKey.empty() ? spec.mibKey : spec.quantityKey);
  const bool hasQuantity = !spec.quantityKey.empty() && !quantity.absent();
  if (!mib.absent() && hasQuantity) {
    return fail(quantity.error("give either " + std::string(spec.mibKey) + " or " +
                               std::string(spec.quantityKey) + ", not both"));
  }
  std::int64_t value = 0;
  const Field* used = nullptr;
  if (!mib.absent()) {
    auto parsed = readInt(mib, std::numeric_limits<std::int64_t>::min(),
                          std::numeric_limits<std::int64_t>::max());
    if (!parsed) return fail(std::move(parsed.error()));
    value = *parsed;
    used = &mib;
  } else if (hasQuantity) {
    if (quantity.isNull() || !quantity.isScalar()) {
      return fail(quantity.error(typeError(quantity, "a size such as \"80Gi\"")));
    }
    auto parsed = parseMemoryQuantity(quantity.node().Scalar(),
                                      spec.capacity ? Rounding::kDown : Rounding::kUp);
    if (!parsed) {
      std::string message = parsed.error().message;
      if (message.starts_with("needs a unit")) {
        message += "; or give plain MiB as " + std::string(spec.mibKey);
      }
      return fail(quantity.error(message));
    }
    value = *parsed;
    used = &quantity;
  } else {
    return std::optional<std::int64_t>();
  }
  // Quantities also show what they converted to, since rounding may be involved.
  const std::string got =
      used == &mib ? used->describe() : "\"" + used->node().Scalar() + "\" = " + mibText(value);
  if (value < spec.minMib) return fail(used->error(lowerBound(spec.minMib) + ", got " + got));
  if (value > spec.maxMib) {
    return fail(used->error("must be <= " + mibText(spec.maxMib) + ", got " + got));
  }
  return std::optional<std::int64_t>(value);
}

Result<std::optional<std::int64_t>> readCpu(const Field& parent, std::int64_t maxMilli) {
  const Field milli = parent.child("cpuMilli");
  const Field cores = parent.child("cpu");
  if (!milli.absent() && !cores.absent()) {
    return fail(cores.error("give either cpuMilli or cpu, not both"));
  }
  if (!milli.absent()) {
    auto value = readInt(milli, 0, maxMilli);
    if (!value) return fail(std::move(value.error()));
    return std::optional<std::int64_t>(*value);
  }
  if (!cores.absent()) {
    auto value = readNumber(cores, 0, static_cast<double>(maxMilli) / 1000.0);
    if (!value) return fail(std::move(value.error()));
    return std::optional<std::int64_t>(std::llround(*value * 1000.0));
  }
  return std::optional<std::int64_t>();
}

Result<void> checkApiHeader(const Field& root, std::string_view kind) {
  if (const Field api = root.child("apiVersion"); !api.absent()) {
    auto text = readString(api);
    if (!text) return fail(std::move(text.error()));
    if (*text != kApiVersion) {
      return fail(api.error("must be " + std::string(kApiVersion) + ", got " + api.describe()));
    }
  }
  if (const Field kindField = root.child("kind"); !kindField.absent()) {
    auto text = readString(kindField);
    if (!text) return fail(std::move(text.error()));
    if (*text != kind) {
      return fail(kindField.error("must be " + std::string(kind) + ", got " + kindField.describe() +
                                  " (is this the right file?)"));
    }
  }
  return {};
}

Result<YAML::Node> parseYamlDocument(const std::string& text, std::string_view source) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 1;
    return fail(Error::invalid(std::string(source) + ":" + std::to_string(line) +
                               ": YAML syntax error: " + e.msg));
  } catch (const YAML::Exception& e) {
    const int line = e.mark.line >= 0 ? e.mark.line + 1 : 1;
    return fail(Error::invalid(std::string(source) + ":" + std::to_string(line) +
                               ": cannot read YAML: " + e.msg));
  }
  if (documents.size() > 1) {
    return fail(Error::invalid(std::string(source) + ":" + std::to_string(lineOf(documents[1], 1)) +
                               ": only one YAML document is allowed, found " +
                               std::to_string(documents.size())));
  }
  if (documents.empty()) return YAML::Node();
  return documents.front();
}

Result<std::string> readTextFile(const std::string& path) {
  struct Closer {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  std::unique_ptr<std::FILE, Closer> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    const int error = errno;
    return fail(Error::notFound(path + ": cannot open: " + std::strerror(error)));
  }
  std::string text;
  std::array<char, 65536> buffer{};
  while (true) {
    const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get());
    text.append(buffer.data(), n);
    if (n < buffer.size()) break;
  }
  if (std::ferror(file.get()) != 0) {
    const int error = errno;
    return fail(Error::invalid(path + ": cannot read: " + std::strerror(error)));
  }
  return text;
}

std::string joinNames(const std::vector<std::string>& names, std::size_t maxListed) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i == maxListed) return out + ", ... (" + std::to_string(names.size() - i) + " more)";
    out += (i == 0 ? "" : ", ") + names[i];
  }
  return out;
}

std::optional<std::string_view> closestKey(std::string_view key,
                                           const std::vector<std::string_view>& allowed) {
  return closestName(key, allowed);
}

}  // namespace tessera::config
