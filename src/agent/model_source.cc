#include "agent/model_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace tessera::agent {
namespace {

namespace fs = std::filesystem;

Result<std::int64_t> writeAll(int fd, const char* data, std::size_t size) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(Error::internal(std::string("write: ") + std::strerror(errno)));
    }
    done += static_cast<std::size_t>(n);
  }
  return static_cast<std::int64_t>(done);
}

class DirectorySource final : public ModelSource {
 public:
  DirectorySource(std::string name, std::string root)
      : name_(std::move(name)), root_(std::move(root)) {}
  std::string name() const override { return name_; }

  Result<std::vector<SourceFile>> list(const std::string& model) override {
    TESSERA_RETURN_IF_ERROR(checkModelName(model));
    const fs::path base = fs::path(root_) / model;
    std::error_code ec;
    const fs::file_status st = fs::status(base, ec);
    if (ec || !fs::exists(st)) {
      return fail(Error::notFound("source " + name_ + ": no model " + model + " under " + root_));
    }
    std::vector<SourceFile> out;
    if (fs::is_regular_file(st)) {
      out.push_back({base.filename().string(), static_cast<std::int64_t>(fs::file_size(base, ec))});
      if (ec)
        return fail(
            Error::internal("source " + name_ + ": " + base.string() + ": " + ec.message()));
      return out;
    }
    for (auto it = fs::recursive_directory_iterator(base, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file()) continue;
      const std::string rel = fs::relative(it->path(), base).generic_string();
      out.push_back({rel, static_cast<std::int64_t>(it->file_size())});
    }
    if (ec)
      return fail(Error::internal("source " + name_ + ": " + base.string() + ": " + ec.message()));
    std::sort(out.begin(), out.end(),
              [](const SourceFile& a, const SourceFile& b) { return a.path < b.path; });
    if (out.empty())
      return fail(Error::notFound("source " + name_ + ": " + base.string() + " holds no files"));
    return out;
  }

  Result<std::int64_t> fetch(const std::string& model, const SourceFile& file, int fd) override {
    TESSERA_RETURN_IF_ERROR(checkModelName(model));
    TESSERA_RETURN_IF_ERROR(checkRelativePath(file.path));
    fs::path path = fs::path(root_) / model;
    if (fs::is_directory(path)) path /= file.path;
    const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) {
      return fail(Error::internal("source " + name_ + ": cannot open " + path.string() + ": " +
                                  std::strerror(errno)));
    }
    std::vector<char> buffer(1 << 20);
    std::int64_t total = 0;
    for (;;) {
      const ssize_t n = ::read(in, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const std::string why = std::strerror(errno);
        ::close(in);
        return fail(Error::internal("source " + name_ + ": reading " + path.string() + ": " + why));
      }
      if (n == 0) break;
      auto written = writeAll(fd, buffer.data(), static_cast<std::size_t>(n));
      if (!written) {
        ::close(in);
        return fail(written.error());
      }
      total += *written;
    }
    ::close(in);
    return total;
  }

 private:
  std::string name_, root_;
};

class HttpSource final : public ModelSource {
 public:
  HttpSource(std::string name, std::string base, std::string prefix, HttpSourceOptions options)
      : name_(std::move(name)),
        base_(std::move(base)),
        prefix_(std::move(prefix)),
        options_(std::move(options)) {}
  std::string name() const override { return name_; }

  Result<std::vector<SourceFile>> list(const std::string& model) override {
    TESSERA_RETURN_IF_ERROR(checkModelName(model));
    auto client = makeClient();
    const std::string path = prefix_ + "/" + model + "/manifest.json";
    auto r = client->Get(path, headers());
    if (!r) {
      return fail(Error::internal("source " + name_ + ": GET " + base_ + path + ": " +
                                  httplib::to_string(r.error())));
    }
    if (r->status == 404) return fail(Error::notFound("source " + name_ + ": no model " + model));
    if (r->status != 200) {
      return fail(Error::internal("source " + name_ + ": GET " + base_ + path + " answered " +
                                  std::to_string(r->status)));
    }
    const nlohmann::json manifest = nlohmann::json::parse(r->body, nullptr, false);
    const std::string bad = "source " + name_ + ": " + base_ + path + ": ";
    if (!manifest.is_object() || !manifest.contains("files") || !manifest["files"].is_array()) {
      return fail(Error::invalid(bad + "expected {\"files\": [{\"path\", \"bytes\"}, ...]}"));
    }
    std::vector<SourceFile> out;
    for (const auto& f : manifest["files"]) {
      if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("bytes") ||
          !f["bytes"].is_number_integer() || f["bytes"].get<std::int64_t>() < 0) {
        return fail(Error::invalid(bad + "every file needs a path (text) and bytes (>= 0)"));
      }
      SourceFile s{f["path"].get<std::string>(), f["bytes"].get<std::int64_t>()};
      if (auto ok = checkRelativePath(s.path); !ok)
        return fail(Error::invalid(bad + ok.error().message));
      out.push_back(std::move(s));
    }
    if (out.empty()) return fail(Error::invalid(bad + "lists no files"));
    return out;
  }

  Result<std::int64_t> fetch(const std::string& model, const SourceFile& file, int fd) override {
    auto client = makeClient();
    const std::string path = prefix_ + "/" + model + "/" + file.path;
    std::int64_t total = 0;
    std::optional<Error> writeError;
    auto r = client->Get(path, headers(), [&](const char* data, std::size_t size) {
      auto written = writeAll(fd, data, size);
      if (!written) {
        writeError = written.error();
        return false;
      }
      total += *written;
      return true;
    });
    if (writeError) return fail(*writeError);
    if (!r) {
      return fail(Error::internal("source " + name_ + ": GET " + base_ + path + ": " +
                                  httplib::to_string(r.error())));
    }
    if (r->status != 200) {
      return fail(Error::internal("source " + name_ + ": GET " + base_ + path + " answered " +
                                  std::to_string(r->status)));
    }
    return total;
  }

 private:
  std::unique_ptr<httplib::Client> makeClient() const {
    auto c = std::make_unique<httplib::Client>(base_);
    c->set_connection_timeout(options_.timeoutSeconds);
    c->set_read_timeout(options_.timeoutSeconds);
    c->set_follow_location(true);
    if (options_.caFile) c->set_ca_cert_path(options_.caFile->c_str());
    return c;
  }
  httplib::Headers headers() const {
    if (options_.token.empty()) return {};
    return {{"Authorization", "Bearer " + options_.token}};
  }

  std::string name_, base_, prefix_;
  HttpSourceOptions options_;
};

bool nameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == ':' || c == '@';
}

Result<void> checkParts(const std::string& text, const std::string& what, bool anyChar) {
  if (text.empty()) return fail(Error::invalid(what + ": must not be empty"));
  if (text.front() == '/')
    return fail(Error::invalid(what + " \"" + text + "\": must be relative"));
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('/', start), text.size());
    const std::string part = text.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") {
      return fail(Error::invalid(what + " \"" + text + "\": empty, \".\" or \"..\" part"));
    }
    if (!anyChar) {
      for (char c : part) {
        if (!nameChar(c)) {
          return fail(Error::invalid(what + " \"" + text + "\": character '" + std::string(1, c) +
                                     "' not allowed (letters, digits, . _ - : @ and /)"));
        }
      }
    }
    start = end + 1;
  }
  return {};
}

}  // namespace

Result<void> checkModelName(const std::string& model) {
  if (model.size() > 200) return fail(Error::invalid("model name longer than 200 characters"));
  return checkParts(model, "model name", false);
}

Result<void> checkRelativePath(const std::string& path) {
  if (path.find('\0') != std::string::npos) return fail(Error::invalid("file path holds a NUL"));
  return checkParts(path, "file path", true);
}

std::unique_ptr<ModelSource> makeDirectorySource(std::string name, std::string root) {
  return std::make_unique<DirectorySource>(std::move(name), std::move(root));
}

Result<std::unique_ptr<ModelSource>> makeHttpSource(std::string name, std::string url,
                                                    HttpSourceOptions options) {
  // Split "http://host:port/prefix" into the client base and the path prefix.
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) {
    return fail(Error::invalid("source " + name + ": url \"" + url + "\" has no scheme"));
  }
  const auto slash = url.find('/', scheme + 3);
  std::string base = slash == std::string::npos ? url : url.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : url.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (base.size() <= scheme + 3) {
    return fail(Error::invalid("source " + name + ": url \"" + url + "\" has no host"));
  }
  return std::unique_ptr<ModelSource>(std::make_unique<HttpSource>(
      std::move(name), std::move(base), std::move(prefix), std::move(options)));
}

}  // namespace tessera::agent
