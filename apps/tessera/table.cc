#include "table.h"

#include <algorithm>
#include <cassert>
#include <utility>

#include <fmt/format.h>

namespace tessera::cli {

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

void Table::addRow(std::vector<std::string> cells) {
  assert(cells.size() == columns_.size());
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

void Table::print(std::ostream& out, const std::string& indent) const {
  std::vector<std::size_t> widths(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    widths[c] = columns_[c].header.size();
    for (const auto& row : rows_) widths[c] = std::max(widths[c], row[c].size());
  }
  auto line = [&](const auto& cellAt) {
    std::string text = indent;
    for (std::size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cellAt(c);
      const std::size_t pad = widths[c] - cell.size();
      const bool last = c + 1 == columns_.size();
      if (columns_[c].align == Align::kRight) {
        text.append(pad, ' ');
        text += cell;
      } else {
        text += cell;
        if (!last) text.append(pad, ' ');
      }
      if (!last) text += "  ";
    }
    out << text << '\n';
  };
  line([&](std::size_t c) -> const std::string& { return columns_[c].header; });
  std::string rule = indent;
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    rule.append(widths[c], '-');
    if (c + 1 < columns_.size()) rule += "  ";
  }
  out << rule << '\n';
  for (const auto& row : rows_) {
    line([&](std::size_t c) -> const std::string& { return row[c]; });
  }
}

std::string formatMib(long long mib) {
  if (mib < 1024 && mib > -1024) return fmt::format("{} MiB", mib);
  return fmt::format("{:.1f} GiB", static_cast<double>(mib) / 1024.0);
}

std::string formatPercent(long long part, long long whole) {
  if (whole == 0) return "0.0%";
  return fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace tessera::cli
