#pragma once
// The web dashboard's routes (docs/dashboard.md): `/` is the page, `/ui/<file>` its script,
// style and icon, `/ui/settings.json` what the page needs to know about this server. All are
// GET, need no token and change nothing; the page itself reads the JSON API.
//
// Every answer carries a Content-Security-Policy that allows only this origin (no inline
// script or style, nothing fetched elsewhere), `X-Content-Type-Options: nosniff`, and
// `Cache-Control: no-cache` with an ETag, so a browser revalidates (304) and never shows the
// files of an older binary.

#include <optional>
#include <string>
#include <vector>
#include <string_view>

namespace httplib {
class Server;
}

namespace tessera::api::ui {

inline constexpr std::string_view kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

struct UiSettings {
  bool demo = false;  // the page labels itself as a demo
  std::string version;
};

// One embedded file with its media type, or nullopt.
struct Asset {
  std::string_view bytes;
  std::string_view contentType;
  std::string etag;  // quoted, as sent
};
std::optional<Asset> findAsset(std::string_view name);

// The media type a file name's extension stands for ("application/octet-stream" if unknown).
std::string_view contentTypeFor(std::string_view name);

// Adds GET / and GET /ui/... to `server`.
// Returns the path patterns it serves (GET), for the server's 405 answers to other methods.
std::vector<std::string> addRoutes(httplib::Server& server, UiSettings settings);

}  // namespace tessera::api::ui
