#pragma once
// Structured logs for `tessera serve`: one line per record on stderr, either text for people
// ("2026-11-29T12:00:00.123Z INFO replica placed replica=chat-0 node=gpu-a") or one JSON
// object per line for log pipelines ({"ts":..., "level":"info", "msg":..., fields...}).
//
// Threading: safe from any thread (one mutex around the write).

#include <mutex>
#include <ostream>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tessera::api {

enum class LogFormat { kText, kJson };

class Logger {
 public:
  explicit Logger(LogFormat format, std::ostream& out);
  void info(std::string_view message, const nlohmann::json& fields = nlohmann::json::object());
  void warn(std::string_view message, const nlohmann::json& fields = nlohmann::json::object());
  void error(std::string_view message, const nlohmann::json& fields = nlohmann::json::object());

 private:
  void write(std::string_view level, std::string_view message, const nlohmann::json& fields);
  LogFormat format_;
  std::ostream& out_;
  std::mutex mu_;
};

}  // namespace tessera::api
