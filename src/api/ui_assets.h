#pragma once
// The dashboard's files (web/), compiled in: web/embed.cmake generates the definition at
// build time, so `tessera serve` reads no file to serve the page.

#include <span>
#include <string_view>

namespace tessera::api::ui {

struct EmbeddedFile {
  std::string_view name;   // relative to web/, e.g. "app.js"
  std::string_view bytes;  // the file as it is in the repository
};

std::span<const EmbeddedFile> embeddedFiles();

}  // namespace tessera::api::ui
