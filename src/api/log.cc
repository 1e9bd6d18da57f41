#include "api/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace tessera::api {
namespace {

std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

}  // namespace

Logger::Logger(LogFormat format, std::ostream& out) : format_(format), out_(out) {}

void Logger::info(std::string_view m, const nlohmann::json& f) {
  write("info", m, f);
}
void Logger::warn(std::string_view m, const nlohmann::json& f) {
  write("warn", m, f);
}
void Logger::error(std::string_view m, const nlohmann::json& f) {
  write("error", m, f);
}

void Logger::write(std::string_view level, std::string_view message, const nlohmann::json& fields) {
  std::string line;
  if (format_ == LogFormat::kJson) {
    nlohmann::json record = {{"ts", timestamp()}, {"level", level}, {"msg", message}};
    if (fields.is_object()) {
      for (const auto& [k, v] : fields.items()) record[k] = v;
    }
    line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = timestamp() + " " +
           std::string(level == "info"   ? "INFO"
                       : level == "warn" ? "WARN"
                                         : "ERROR") +
           " " + std::string(message);
    if (fields.is_object()) {
      for (const auto& [k, v] : fields.items()) {
        line += " " + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
      }
    }
  }
  line += '\n';
  std::lock_guard lock(mu_);
  out_ << line << std::flush;
}

}  // namespace tessera::api
