#include "sim/csv.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace tessera::sim {
namespace {

// Splits one line into fields. Returns false on an unterminated quote.
bool splitLine(std::string_view line, std::vector<std::string>& out) {
  out.clear();
  std::string field;
  bool quoted = false;
  bool wasQuoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"' && field.empty() && !wasQuoted) {
      quoted = true;
      wasQuoted = true;
    } else if (c == ',') {
      out.push_back(std::move(field));
      field.clear();
      wasQuoted = false;
    } else {
      field += c;
    }
  }
  if (quoted) return false;
  out.push_back(std::move(field));
  return true;
}

}  // namespace

int CsvTable::column(std::string_view name) const {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return static_cast<int>(i);
  }
  return -1;
}

Result<int> CsvTable::requireColumn(std::string_view name) const {
  const int c = column(name);
  if (c >= 0) return c;
  std::string have;
  for (const auto& h : header) have += (have.empty() ? "" : ",") + h;
  return fail(Error::invalid(label + ":1: missing column " + std::string(name) +
                             " (header: " + have + ")"));
}

Error CsvTable::error(const CsvRow& row, int column, std::string_view what) const {
  std::string msg = label + ":" + std::to_string(row.line) + ": ";
  if (column >= 0 && static_cast<std::size_t>(column) < header.size()) {
    msg += "column " + header[static_cast<std::size_t>(column)] + ": ";
  }
  msg += what;
  return Error::invalid(std::move(msg));
}

Result<double> CsvTable::nonNegative(const CsvRow& row, int column, std::string_view what) const {
  const std::string& f = row.fields[static_cast<std::size_t>(column)];
  double v = 0;
  const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
  if (ec != std::errc() || end != f.data() + f.size() || !std::isfinite(v) || v < 0) {
    return fail(
        error(row, column,
              "expected a non-negative number (" + std::string(what) + "), got \"" + f + "\""));
  }
  return v;
}

Result<std::int64_t> CsvTable::integer(const CsvRow& row, int column, std::int64_t min,
                                       std::int64_t max) const {
  const std::string& text = row.fields[static_cast<std::size_t>(column)];
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return fail(error(row, column, "expected an integer, got \"" + text + "\""));
  }
  if (value < min || value > max) {
    return fail(
        error(row, column,
              "must be in " + std::to_string(min) + ".." + std::to_string(max) + ", got " + text));
  }
  return value;
}

Result<CsvTable> parseCsv(std::string_view text, std::string label) {
  CsvTable table;
  table.label = std::move(label);
  std::vector<std::string> fields;
  int lineNo = 0;
  bool haveHeader = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;  // blank lines (a trailing newline) carry no row
    if (!splitLine(line, fields)) {
      return fail(Error::invalid(table.label + ":" + std::to_string(lineNo) +
                                 ": unterminated quoted field"));
    }
    if (!haveHeader) {
      if (lineNo == 1 && !fields.empty() && fields[0].starts_with("\xEF\xBB\xBF")) {
        fields[0].erase(0, 3);  // UTF-8 byte-order mark
      }
      table.header = fields;
      haveHeader = true;
      continue;
    }
    if (fields.size() != table.header.size()) {
      return fail(Error::invalid(table.label + ":" + std::to_string(lineNo) + ": expected " +
                                 std::to_string(table.header.size()) + " columns, found " +
                                 std::to_string(fields.size())));
    }
    table.rows.push_back({lineNo, fields});
  }
  if (!haveHeader) return fail(Error::invalid(table.label + ": empty file (no header line)"));
  return table;
}

Result<std::string> readTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Error::notFound(path + ": cannot open file"));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return fail(Error::invalid(path + ": read error"));
  return buffer.str();
}

Result<CsvTable> readCsv(const std::string& path) {
  auto text = readTextFile(path);
  if (!text) return fail(text.error());
  return parseCsv(*text, path);
}

}  // namespace tessera::sim
