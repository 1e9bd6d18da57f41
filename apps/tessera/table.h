#pragma once
// A plain-text table for the CLI's human-readable output: a header, rows of cells, columns
// padded to their widest cell, numbers right-aligned.

#include <ostream>
#include <string>
#include <vector>

namespace tessera::cli {

enum class Align { kLeft, kRight };

struct Column {
  std::string header;
  Align align = Align::kLeft;
};

class Table {
 public:
  explicit Table(std::vector<Column> columns);

  // A row must have one cell per column.
  void addRow(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }

  // Writes the header, a rule and the rows; every line is prefixed by `indent`.
  void print(std::ostream& out, const std::string& indent = "") const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// "38.4 GiB" for 39322 MiB; "512 MiB" below one GiB.
std::string formatMib(long long mib);
// "45.0%" of `part` in `whole` (0 when whole is 0).
std::string formatPercent(long long part, long long whole);

}  // namespace tessera::cli
