#pragma once
// A small reader for the comma-separated files of the Alibaba GPU trace and the FGD
// artifact's reference data: a header line, then rows with exactly as many fields. Fields may
// be double-quoted ("a,b"); embedded line breaks are not supported (none of these files has
// them). Every error names the file, the line and, where it applies, the column:
//   openb_pod_list_default.csv:17: column num_gpu: expected an integer, got "x"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace tessera::sim {

struct CsvRow {
  int line = 0;  // 1-based line number in the file (the header is line 1)
  std::vector<std::string> fields;
};

struct CsvTable {
  std::string label;  // how errors name the file (its path as given)
  std::vector<std::string> header;
  std::vector<CsvRow> rows;

  // Index of a header column; -1 when absent.
  int column(std::string_view name) const;
  // Index of a column that must exist, or an error naming the file and the missing column.
  Result<int> requireColumn(std::string_view name) const;

  // "<label>:<line>: column <name>: <what>".
  Error error(const CsvRow& row, int column, std::string_view what) const;
  // Field `column` of `row` as an integer in [min, max].
  Result<std::int64_t> integer(const CsvRow& row, int column, std::int64_t min,
                               std::int64_t max) const;
  // Field `column` of `row` as a finite number >= 0; `what` names its unit in the error
  // ("expected a non-negative number (seconds), got \"x\"").
  Result<double> nonNegative(const CsvRow& row, int column, std::string_view what) const;
};

// Parses CSV text. `label` names the source in error messages.
Result<CsvTable> parseCsv(std::string_view text, std::string label);
// Reads and parses a file; the path is the label.
Result<CsvTable> readCsv(const std::string& path);

// Reads a whole file into memory.
Result<std::string> readTextFile(const std::string& path);

}  // namespace tessera::sim
