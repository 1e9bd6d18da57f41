#pragma once
// Reading typed values out of a parsed YAML document so that every error names the file,
// the 1-based line and the field path ("cluster.yaml:14: nodes[2].gpus[0].memoryMib: ...").
//
// yaml-cpp alone converts leniently (`as<int>()` accepts "0x10", `as<bool>()` accepts "yes")
// and reports failures without the field, so the loaders read scalars through Field instead.
//
// Threading: a Field is a cheap view; use it from one thread.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/names.h"
#include "common/result.h"

namespace tessera::config {

struct FieldEntry;

// One value in a YAML document plus where it sits. The source name is borrowed: it must
// outlive the Field (the loaders keep it on their stack for the whole parse).
//
// A Field is either positioned (a document parsed from text: errors read
// "<source>:<line>: <path>: <message>") or a tree built in memory, such as an API body turned
// into nodes by config::jsonToYaml, which has no lines: its errors read "<path>: <message>",
// or "<source>: <message>" at the root. The same decoders serve both, so a rule is written once.
class Field {
 public:
  // The document root; an empty document sits on line 1.
  static Field root(std::string_view source, YAML::Node node);
  // The root of a tree built in memory (no source text, so no lines).
  static Field tree(std::string_view source, YAML::Node node);

  // The value under `key`; absent() when the key is missing (its line is then the
  // mapping's). Only valid on mappings.
  Field child(std::string_view key) const;
  // The i-th item of a sequence.
  Field item(std::size_t index) const;

  bool absent() const { return !present_; }
  // Absent, or written as `~`, `null` or nothing at all.
  bool isNull() const { return absent() || node_.IsNull(); }
  bool isMap() const { return !absent() && node_.IsMap(); }
  bool isSequence() const { return !absent() && node_.IsSequence(); }
  bool isScalar() const { return !absent() && node_.IsScalar(); }
  // A scalar written in quotes or tagged !!str: always text, never a number or bool.
  bool isQuoted() const;
  std::size_t size() const { return isSequence() || isMap() ? node_.size() : 0; }

  const YAML::Node& node() const { return node_; }
  const std::string& path() const { return path_; }
  // 1-based; 0 in a tree built in memory.
  int line() const { return line_; }
  bool positioned() const { return line_ > 0; }
  std::string_view source() const { return source_; }

  // "<source>:<line>: <path>: <message>" (the path part is left out at the root); in a tree
  // built in memory "<path>: <message>", or "<source>: <message>" at the root.
  Error error(std::string_view message) const;
  // Where the value sits, for a message about another value: "on line 14" or, in a tree
  // built in memory, "at nodes[0].gpus[1].id".
  std::string locate() const;
  // How the value reads in an error: the scalar as written, or "a mapping" / "a list".
  std::string describe() const;

  // The entries of a mapping in document order.
  std::vector<FieldEntry> entries() const;

 private:
  Field(std::string_view source, YAML::Node node, std::string path, int line)
      : source_(source), node_(std::move(node)), path_(std::move(path)), line_(line) {}

  std::string_view source_;
  YAML::Node node_;
  std::string path_;
  int line_ = 1;  // 0: a tree built in memory
  bool present_ = true;
};

// The start of an error message about `path` at `line` of `source` (see Field::error).
std::string errorPrefix(std::string_view source, int line, const std::string& path);

struct FieldEntry {
  std::string key;  // as written; empty when the key is not a scalar
  Field value;
};

// Fails unless the field is a mapping whose keys are all in `allowed`, each once. An unknown
// key is reported on its own line with the allowed keys (and the closest one, for typos).
Result<void> expectMap(const Field& field, std::initializer_list<std::string_view> allowed);
Result<void> expectMap(const Field& field, const std::vector<std::string_view>& allowed);
// Fails unless the field is a sequence; a null field reads as an empty sequence.
Result<void> expectSequence(const Field& field);

// Fails with "<path>: required" (on the mapping's line) when `field` is absent or null.
Result<void> require(const Field& field);

// Integers are plain decimal scalars ("12", "-5"); quoted text, fractions and YAML 1.1
// spellings (0x10, 1_000) are rejected so that a value means what it looks like.
Result<std::int64_t> readInt(const Field& field, std::int64_t min, std::int64_t max);
// Finite decimal numbers, integers included.
Result<double> readNumber(const Field& field, double min, double max);
// true/false (also True/TRUE/False/FALSE, YAML 1.2); yes/no/on/off are rejected.
Result<bool> readBool(const Field& field);
// Any scalar, as written. Null is rejected (a key with nothing after it is a mistake).
Result<std::string> readString(const Field& field);
// Like readString but the value must also be non-empty.
Result<std::string> readName(const Field& field);
// A name Kubernetes could hold (common/names.h: a node, model, deployment or replica id); the
// error names the field and the rule.
Result<std::string> readObjectName(const Field& field, NameKind kind, std::size_t maxLength = 0);
// A sequence of scalars; null reads as empty. A single scalar is not accepted as a list.
Result<std::vector<std::string>> readStringList(const Field& field);
// A mapping of scalar keys to scalar values; null reads as empty.
Result<std::map<std::string, std::string>> readStringMap(const Field& field);

// Optional fields: leave `out` untouched when the key is absent.
Result<void> readOptional(const Field& parent, std::string_view key, std::int64_t& out,
                          std::int64_t min, std::int64_t max);
Result<void> readOptional(const Field& parent, std::string_view key, int& out, std::int64_t min,
                          std::int64_t max);
Result<void> readOptional(const Field& parent, std::string_view key, double& out, double min,
                          double max);
Result<void> readOptional(const Field& parent, std::string_view key, bool& out);
Result<void> readOptional(const Field& parent, std::string_view key, std::string& out);
Result<void> readOptional(const Field& parent, std::string_view key, std::vector<std::string>& out);
Result<void> readOptional(const Field& parent, std::string_view key,
                          std::map<std::string, std::string>& out);

// Sizes in MiB, written either as an integer under `mibKey` (e.g. memoryMib: 81920) or as a
// quantity string under `quantityKey` (e.g. memory: 80Gi), not both. Empty when neither key
// is present. `capacity` picks the rounding of quantities that are not whole MiB: down for
// what a machine has, up for what a model needs, so the conversion never over-promises.
struct MemoryField {
  std::string_view mibKey;
  std::string_view quantityKey;
  std::int64_t minMib = 0;
  std::int64_t maxMib = 0;
  bool capacity = false;
};
Result<std::optional<std::int64_t>> readMemory(const Field& parent, const MemoryField& spec);

// CPU in thousandths of a core, written as an integer `cpuMilli` or as a number of cores
// `cpu` (fractions allowed: 0.5 = 500 milli), not both. Empty when neither is present.
Result<std::optional<std::int64_t>> readCpu(const Field& parent, std::int64_t maxMilli);

// Every file may start with `apiVersion: tessera.io/v1alpha1` and `kind: <kind>`; both are
// optional, but when present they must match (so a profile passed as a cluster file says so).
constexpr std::string_view kApiVersion = "tessera.io/v1alpha1";
Result<void> checkApiHeader(const Field& root, std::string_view kind);

// Parses a whole YAML text into its single document. Syntax errors and a second document
// become errors naming the source and line; an empty text is a null root.
Result<YAML::Node> parseYamlDocument(const std::string& text, std::string_view source);
// Reads a file into memory; the error names the path and the OS reason.
Result<std::string> readTextFile(const std::string& path);

// "a, b, c" for error messages; past `maxListed` names it ends with "... (N more)".
std::string joinNames(const std::vector<std::string>& names, std::size_t maxListed = 20);

// The key in `allowed` nearest to `key` by edit distance, if it is close enough to be a typo.
std::optional<std::string_view> closestKey(std::string_view key,
                                           const std::vector<std::string_view>& allowed);

}  // namespace tessera::config
