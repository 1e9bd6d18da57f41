// The robustness matrix's judgement of a cell and its summary over cells, on cells built by
// hand (the simulations behind them are tested in serving_run_test and serving_reference_test).

#include <gtest/gtest.h>

#include <sstream>

#include "sim/serving_matrix.h"

namespace tessera::sim {
namespace {

ServingPolicyResult policy(const std::string& name, double attainment, double gpuHours) {
  ServingPolicyResult p;
  p.policy = name;
  p.sloAttainment = attainment;
  p.gpuHours = gpuHours;
  return p;
}

// A cell at the 99 % target: tessera, the clairvoyant and one baseline (hpa).
MatrixCell cell(const std::string& trace, double tessera, double tesseraHours, double clairvoyant,
                double clairvoyantHours, double hpa = 0.5, double hpaHours = 100) {
  MatrixCell c;
  c.trace = trace;
  c.report.sloTarget = 0.99;
  c.report.policies = {policy("hpa", hpa, hpaHours), policy("tessera", tessera, tesseraHours),
                       policy("clairvoyant", clairvoyant, clairvoyantHours)};
  return c;
}

TEST(ServingMatrix, AJudgedCellNamesEveryWayTesseraMisses) {
  EXPECT_EQ(judgeCell(cell("t", 0.995, 1.2, 0.99, 1.0), 1.25).kind, CellVerdict::Kind::kPass);
  // Exactly at the bound passes.
  EXPECT_EQ(judgeCell(cell("t", 0.99, 1.25, 0.99, 1.0), 1.25).kind, CellVerdict::Kind::kPass);

  const CellVerdict all = judgeCell(cell("t", 0.98, 1.5, 0.99, 1.0, 0.999, 1.4), 1.25);
  EXPECT_EQ(all.kind, CellVerdict::Kind::kMiss);
  EXPECT_NE(all.why.find("attainment 98.00 %"), std::string::npos) << all.why;
  EXPECT_NE(all.why.find("1.50x the clairvoyant"), std::string::npos) << all.why;
  EXPECT_NE(all.why.find("more GPU-hours than hpa (1.40)"), std::string::npos) << all.why;
  ASSERT_TRUE(all.bestBaseline);
  EXPECT_EQ(*all.bestBaseline, "hpa");

  // A baseline below the target is no yardstick, however cheap.
  const CellVerdict cheap = judgeCell(cell("t", 0.99, 1.1, 0.99, 1.0, 0.98, 0.5), 1.25);
  EXPECT_EQ(cheap.kind, CellVerdict::Kind::kPass) << cheap.why;
  EXPECT_FALSE(cheap.bestBaseline);

  // Where the clairvoyant cannot reach the target, nothing is judged.
  EXPECT_EQ(judgeCell(cell("t", 0.5, 9, 0.98, 1.0), 1.25).kind, CellVerdict::Kind::kNotApplicable);
}

TEST(ServingMatrix, TheSummaryCountsOnlyCellsTheClairvoyantReaches) {
  const std::vector<MatrixCell> cells = {
      cell("a", 1.0, 1.0, 0.99, 1.0),    // pass, 1.0x
      cell("a", 0.98, 1.5, 0.99, 1.0),   // miss, 1.5x, below the target
      cell("b", 1.0, 6.0, 0.995, 3.0),   // miss, 2.0x
      cell("b", 0.2, 50.0, 0.97, 10.0),  // n/a: not in the ratios, the hours or the counts
  };
  const MatrixSummary m = summarizeMatrix(cells, 1.25);
  EXPECT_EQ(m.cells, 4);
  EXPECT_EQ(m.pass, 1);
  EXPECT_EQ(m.miss, 2);
  EXPECT_EQ(m.notApplicable, 1);
  EXPECT_EQ(m.passByTrace, (std::vector<std::pair<std::string, int>>{{"a", 1}, {"b", 0}}));
  EXPECT_EQ(m.reachable, 3);
  EXPECT_EQ(m.tesseraAtTarget, 2);
  EXPECT_EQ(m.withinClairvoyant, 1);
  ASSERT_TRUE(m.medianVsClairvoyant);
  EXPECT_DOUBLE_EQ(*m.medianVsClairvoyant, 1.5);
  EXPECT_DOUBLE_EQ(m.tesseraGpuHours, 8.5);

  // An even number of ratios: the mean of the middle two.
  std::vector<MatrixCell> even = cells;
  even.push_back(cell("a", 1.0, 3.0, 0.99, 1.0));  // 3.0x
  EXPECT_DOUBLE_EQ(summarizeMatrix(even, 1.25).medianVsClairvoyant.value_or(0), (1.5 + 2.0) / 2);
  EXPECT_FALSE(summarizeMatrix({}, 1.25).medianVsClairvoyant);

  // "Within" is judged as the verdict judges it: a clairvoyant that needed no GPU-hours leaves
  // no ratio for the median, and tessera is within it only at no GPU-hours too.
  const MatrixSummary idle =
      summarizeMatrix({cell("c", 1.0, 0.0, 1.0, 0.0), cell("c", 1.0, 0.5, 1.0, 0.0)}, 1.25);
  EXPECT_EQ(idle.reachable, 2);
  EXPECT_EQ(idle.withinClairvoyant, 1);
  EXPECT_EQ(idle.pass, 1);
  EXPECT_FALSE(idle.medianVsClairvoyant);
}

TEST(ServingMatrix, JsonAndMarkdownCarryTheSummary) {
  const std::vector<MatrixCell> cells = {cell("a", 1.0, 1.0, 0.99, 1.0),
                                         cell("b", 1.0, 6.0, 0.995, 3.0)};
  MatrixOptions o;
  const nlohmann::json j = matrixJson(cells, o);
  const nlohmann::json& s = j.at("summary");
  EXPECT_EQ(s.at("pass"), 1);
  EXPECT_EQ(s.at("reachable"), 2);
  EXPECT_EQ(s.at("tessera_at_target"), 2);
  EXPECT_EQ(s.at("within_clairvoyant_cells"), 1);
  EXPECT_DOUBLE_EQ(s.at("median_tessera_vs_clairvoyant").get<double>(), 1.5);
  EXPECT_EQ(s.at("pass_by_trace").at("b"), 0);

  EXPECT_TRUE(matrixJson({}, o).at("summary").at("median_tessera_vs_clairvoyant").is_null());

  std::ostringstream md;
  writeMatrixMarkdown(md, cells, o);
  EXPECT_NE(md.str().find("2 cells: 1 pass (a 1, b 0), 1 miss, 0 n/a"), std::string::npos)
      << md.str();
  EXPECT_NE(md.str().find("tessera reaches it in 2, costs at most 1.25x the clairvoyant's "
                          "GPU-hours in 1, 1.50x in the median cell, 7.0 GPU-hours in all."),
            std::string::npos)
      << md.str();
}

}  // namespace
}  // namespace tessera::sim
