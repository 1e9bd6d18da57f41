// Runs every example of docs/api.md, in order, against a real server: each ```http request
// block is sent as written (plus the bearer token), and the next ```http answer block's
// status and JSON fields must match the server's answer. Documented objects are subsets of
// the answer; a documented list ending in "..." fixes only its first items.

#include <fstream>
#include <sstream>

#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/http_server.h"
#include "model/gpu_catalog.h"

namespace tessera::api {
namespace {

using nlohmann::json;

struct Block {
  std::string text;
  int line = 0;
};

std::vector<Block> httpBlocks(const std::string& path) {
  std::ifstream in(path);
  std::vector<Block> out;
  std::string line;
  int number = 0;
  bool inside = false;
  Block current;
  while (std::getline(in, line)) {
    ++number;
    if (!inside && line == "```http") {
      inside = true;
      current = Block{"", number + 1};
    } else if (inside && line == "```") {
      inside = false;
      out.push_back(current);
    } else if (inside) {
      current.text += line + "\n";
    }
  }
  return out;
}

// "documented ⊆ actual": the path of the first difference, or "" when it matches.
std::string firstDifference(const json& doc, const json& actual, const std::string& path) {
  if (doc.is_object()) {
    if (!actual.is_object()) return path + ": expected an object, got " + actual.dump();
    for (const auto& [k, v] : doc.items()) {
      if (!actual.contains(k)) return path + "." + k + ": missing in " + actual.dump();
      if (std::string m = firstDifference(v, actual[k], path + "." + k); !m.empty()) return m;
    }
    return "";
  }
  if (doc.is_array()) {
    if (!actual.is_array()) return path + ": expected a list, got " + actual.dump();
    const bool prefix = !doc.empty() && doc.back() == "...";
    const std::size_t n = prefix ? doc.size() - 1 : doc.size();
    if (prefix ? actual.size() < n : actual.size() != n) {
      return path + ": " + std::to_string(actual.size()) + " items, documented " +
             std::to_string(n) + (prefix ? " or more" : "");
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (std::string m = firstDifference(doc[i], actual[i], path + "[" + std::to_string(i) + "]");
          !m.empty()) {
        return m;
      }
    }
    return "";
  }
  if (doc == "...") return "";  // any value
  if (doc.is_number() && actual.is_number()) {
    return std::abs(doc.get<double>() - actual.get<double>()) < 1e-9
               ? ""
               : path + ": documented " + doc.dump() + ", got " + actual.dump();
  }
  return doc == actual ? "" : path + ": documented " + doc.dump() + ", got " + actual.dump();
}

TEST(ApiDoc, EveryExampleInDocsApiMdRunsAsDocumented) {
  const std::string doc = std::string(TESSERA_SOURCE_DIR) + "/docs/api.md";
  const std::vector<Block> blocks = httpBlocks(doc);
  ASSERT_GE(blocks.size(), 20u) << "docs/api.md has too few examples";
  ASSERT_EQ(blocks.size() % 2, 0u) << "every request block needs an answer block";

  model::GpuCatalog catalog = model::GpuCatalog::builtin();
  ManualClock clock{0};
  auto plane = ControlPlane::create(catalog, clock);
  ASSERT_TRUE(plane);
  ServerConfig config;
  config.port = 0;
  config.token = "doc-example-token-0123";
  HttpServer server(**plane, config);
  auto port = server.start();
  ASSERT_TRUE(port);
  httplib::Client client("127.0.0.1", *port);

  for (std::size_t i = 0; i < blocks.size(); i += 2) {
    const Block& req = blocks[i];
    const Block& ans = blocks[i + 1];
    SCOPED_TRACE("docs/api.md:" + std::to_string(req.line));
    std::istringstream rs(req.text);
    std::string method, target;
    rs >> method >> target;
    const std::size_t blank = req.text.find("\n\n");
    const std::string body = blank == std::string::npos ? "" : req.text.substr(blank + 2);
    const httplib::Headers auth = {{"Authorization", "Bearer " + *config.token}};
    ASSERT_TRUE(method == "GET" || method == "POST" || method == "DELETE") << method;
    httplib::Result r = method == "GET"    ? client.Get(target)
                        : method == "POST" ? client.Post(target, auth, body, "application/json")
                                           : client.Delete(target, auth);
    ASSERT_TRUE(r) << method << " " << target;

    std::istringstream as(ans.text);
    std::string protocol;
    int status = 0;
    as >> protocol >> status;
    EXPECT_EQ(r->status, status) << method << " " << target << " answered " << r->body;
    const std::size_t answerBlank = ans.text.find("\n\n");
    if (answerBlank == std::string::npos) continue;
    const json documented = json::parse(ans.text.substr(answerBlank + 2), nullptr, false);
    ASSERT_FALSE(documented.is_discarded()) << "docs/api.md:" << ans.line << ": not JSON";
    const json actual = json::parse(r->body, nullptr, false);
    ASSERT_FALSE(actual.is_discarded()) << r->body;
    EXPECT_EQ(firstDifference(documented, actual, "answer"), "") << method << " " << target;
  }
  server.stop();
}

}  // namespace
}  // namespace tessera::api
