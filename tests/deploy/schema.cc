#include "schema.h"

#include <cmath>
#include <regex>

namespace tessera::deploytest {

using nlohmann::json;

namespace {

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

bool isInteger(const json& v) {
  if (v.is_number_integer()) return true;
  return v.is_number_float() && std::floor(v.get<double>()) == v.get<double>();
}

bool typeMatches(const std::string& type, const json& v) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return isInteger(v);
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  return false;
}

std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

}  // namespace

std::vector<std::string> validate(const json& schema, const json& value, const std::string& path) {
  std::vector<std::string> out;
  const std::string where = path.empty() ? "(root)" : path;
  auto bad = [&](const std::string& what) { out.push_back(where + ": " + what); };

  if (value.is_null()) {
    if (!schema.value("nullable", false)) bad("null is not allowed");
    return out;
  }
  const bool intOrString = schema.value("x-kubernetes-int-or-string", false);
  if (intOrString) {
    if (!isInteger(value) && !value.is_string()) {
      bad("expected an integer or a string, got " + show(value));
      return out;
    }
  } else if (const auto t = schema.find("type"); t != schema.end()) {
    const std::string type = t->get<std::string>();
    if (!typeMatches(type, value)) {
      bad("expected " + type + ", got " + show(value));
      return out;
    }
  }
  if (const auto e = schema.find("enum"); e != schema.end()) {
    bool found = false;
    for (const json& allowed : *e) found = found || allowed == value;
    if (!found) bad(show(value) + " is not one of " + e->dump());
  }
  if (value.is_number()) {
    const double v = value.get<double>();
    if (const auto m = schema.find("minimum"); m != schema.end() && v < m->get<double>()) {
      bad(show(value) + " is below the minimum " + m->dump());
    }
    if (const auto m = schema.find("maximum"); m != schema.end() && v > m->get<double>()) {
      bad(show(value) + " is above the maximum " + m->dump());
    }
  }
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    if (const auto m = schema.find("minLength");
        m != schema.end() && s.size() < m->get<std::size_t>()) {
      bad("shorter than " + m->dump() + " characters");
    }
    if (const auto m = schema.find("maxLength");
        m != schema.end() && s.size() > m->get<std::size_t>()) {
      bad("longer than " + m->dump() + " characters");
    }
    if (const auto p = schema.find("pattern"); p != schema.end()) {
      if (!std::regex_search(s, std::regex(p->get<std::string>(), std::regex::ECMAScript))) {
        bad(show(value) + " does not match " + p->get<std::string>());
      }
    }
    if (schema.value("format", "") == "date-time") {
      static const std::regex rfc3339(
          R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$)");
      if (!std::regex_match(s, rfc3339)) bad(show(value) + " is not an RFC 3339 date-time");
    }
  }
  if (value.is_object()) {
    for (const json& r : schema.value("required", json::array())) {
      if (!value.contains(r.get<std::string>()))
        bad("missing required field " + r.get<std::string>());
    }
    const json props = schema.value("properties", json::object());
    const bool preserve = schema.value("x-kubernetes-preserve-unknown-fields", false);
    const auto extra = schema.find("additionalProperties");
    for (const auto& [key, v] : value.items()) {
      if (const auto p = props.find(key); p != props.end()) {
        for (auto& e : validate(*p, v, join(path, key))) out.push_back(std::move(e));
      } else if (extra != schema.end() && extra->is_object()) {
        for (auto& e : validate(*extra, v, join(path, key))) out.push_back(std::move(e));
      } else if (!preserve && !props.empty() &&
                 !(extra != schema.end() && extra->is_boolean() && extra->get<bool>())) {
        // (An object schema without properties, like the CRD's `metadata`, is the API
        // server's to check.)
        out.push_back(join(path, key) + ": unknown field");
      }
    }
  }
  if (value.is_array()) {
    if (const auto items = schema.find("items"); items != schema.end()) {
      for (std::size_t i = 0; i < value.size(); ++i) {
        for (auto& e : validate(*items, value[i], path + "[" + std::to_string(i) + "]")) {
          out.push_back(std::move(e));
        }
      }
    }
  }
  if (const auto any = schema.find("anyOf"); any != schema.end()) {
    bool one = false;
    std::string firstProblem;
    for (const json& branch : *any) {
      // A branch checks values only: a property it does not list is not "unknown" there.
      json relaxed = branch;
      if (!relaxed.contains("additionalProperties"))
        relaxed["x-kubernetes-preserve-unknown-fields"] = true;
      const auto problems = validate(relaxed, value, path);
      if (problems.empty()) {
        one = true;
        break;
      }
      if (firstProblem.empty()) firstProblem = problems.front();
    }
    if (!one) bad("matches none of anyOf (first: " + firstProblem + ")");
  }
  return out;
}

std::vector<std::string> structuralProblems(const json& schema, const std::string& path) {
  std::vector<std::string> out;
  const std::string where = path.empty() ? "(root)" : path;
  const bool intOrString = schema.value("x-kubernetes-int-or-string", false);
  const bool preserve = schema.value("x-kubernetes-preserve-unknown-fields", false);
  if (!schema.contains("type") && !intOrString && !preserve) out.push_back(where + ": no type");
  if (intOrString && schema.contains("type")) {
    out.push_back(where + ": x-kubernetes-int-or-string with a type");
  }
  for (const char* junctor : {"anyOf", "allOf", "oneOf"}) {
    const auto j = schema.find(junctor);
    if (j == schema.end()) continue;
    for (const json& branch : *j) {
      if (branch.contains("type") && !intOrString) {
        out.push_back(where + "." + junctor + ": a type inside a junctor");
      }
      if (branch.contains("properties") || branch.contains("items") ||
          branch.contains("additionalProperties")) {
        out.push_back(where + "." + junctor + ": structure (properties, items) inside a junctor");
      }
    }
  }
  if (const auto a = schema.find("additionalProperties"); a != schema.end()) {
    if (a->is_boolean() && !a->get<bool>()) {
      out.push_back(where +
                    ": additionalProperties: false is not allowed (unknown fields are pruned)");
    } else if (schema.contains("properties")) {
      out.push_back(where + ": properties and additionalProperties are mutually exclusive");
    }
  }
  if (const auto p = schema.find("properties"); p != schema.end()) {
    for (const auto& [key, sub] : p->items()) {
      for (auto& e : structuralProblems(sub, join(path, key))) out.push_back(std::move(e));
    }
  }
  if (const auto a = schema.find("additionalProperties"); a != schema.end() && a->is_object()) {
    for (auto& e : structuralProblems(*a, path + ".*")) out.push_back(std::move(e));
  }
  if (const auto i = schema.find("items"); i != schema.end()) {
    for (auto& e : structuralProblems(*i, path + "[]")) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace tessera::deploytest
