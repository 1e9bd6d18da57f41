#include "api/ui.h"

#include <cstdint>
#include <cstdio>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "api/ui_assets.h"

namespace tessera::api::ui {
namespace {

// FNV-1a over the bytes: a validator for If-None-Match, not a security measure.
std::string etagOf(std::string_view bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  char text[24];
  std::snprintf(text, sizeof text, "\"%016llx\"", static_cast<unsigned long long>(h));
  return text;
}

void securityHeaders(httplib::Response& res) {
  res.set_header("Content-Security-Policy", std::string(kContentSecurityPolicy));
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
}

void sendAsset(const httplib::Request& req, httplib::Response& res, const Asset& a) {
  securityHeaders(res);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("ETag", a.etag);
  if (req.get_header_value("If-None-Match") == a.etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(std::string(a.bytes), std::string(a.contentType));
}

void notFound(httplib::Response& res, std::string_view what) {
  securityHeaders(res);
  res.status = 404;
  res.set_content(
      nlohmann::json{
          {"error", {{"code", "not_found"}, {"message", "no dashboard file " + std::string(what)}}}}
          .dump(),
      "application/json");
}

}  // namespace

std::string_view contentTypeFor(std::string_view name) {
  struct Type {
    std::string_view suffix, type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},   {".svg", "image/svg+xml"},
      {".json", "application/json"},         {".png", "image/png"},
      {".txt", "text/plain; charset=utf-8"},
  };
  for (const Type& t : kTypes) {
    if (name.ends_with(t.suffix)) return t.type;
  }
  return "application/octet-stream";
}

std::optional<Asset> findAsset(std::string_view name) {
  for (const EmbeddedFile& f : embeddedFiles()) {
    if (f.name == name) return Asset{f.bytes, contentTypeFor(f.name), etagOf(f.bytes)};
  }
  return std::nullopt;
}

std::vector<std::string> addRoutes(httplib::Server& server, UiSettings settings) {
  server.Get("/", [](const httplib::Request& req, httplib::Response& res) {
    if (auto page = findAsset("index.html")) return sendAsset(req, res, *page);
    notFound(res, "index.html");
  });
  const std::string settingsBody =
      nlohmann::json{{"demo", settings.demo}, {"version", settings.version}}.dump();
  server.Get("/ui/settings.json", [settingsBody](const httplib::Request&, httplib::Response& res) {
    securityHeaders(res);
    res.set_header("Cache-Control", "no-store");
    res.set_content(settingsBody, "application/json");
  });
  server.Get(R"(/ui/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    // index.html is served at / only, so that relative links resolve one way.
    if (name != "index.html") {
      if (auto a = findAsset(name)) return sendAsset(req, res, *a);
    }
    notFound(res, name);
  });
  return {"/", "/ui/settings.json", R"(/ui/([A-Za-z0-9_.-]+))"};
}

}  // namespace tessera::api::ui
