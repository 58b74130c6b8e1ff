// mrf-bench's multilabel suite in --quick mode: Tsukuba for every multilabel solver, JSON rows whose
// curves are consistent with the energies, and an SVG plot with one curve per solver.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "energies/stereo.h"
#include "mrf/io/image.h"
#include "mrf/registry.h"
#include "support/test_support.h"

namespace mrf {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(BenchMultilabel, QuickSuiteWritesRowsAndPlot) {
  const std::string tsukuba = test::SharedDataPath("middlebury/tsukuba-imL.png");
  if (tsukuba.empty()) GTEST_SKIP() << "Middlebury Tsukuba not found";
  const std::string data_dir = std::filesystem::path(tsukuba).parent_path().parent_path().string();
  const std::string dir = test::ScratchDir("bench_multilabel");
  const test::CommandResult r =
      test::RunCommand(test::AppPath("mrf-bench") + " --suite multilabel --quick --data-dir " + data_dir + " --json " +
                       dir + "/rows.json --plot " + dir + "/plot.svg");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> solvers;
  for (const std::string& name : Registry::Global().Names())
    for (Algorithm a : {Algorithm::kExpansion, Algorithm::kSwap, Algorithm::kIcm, Algorithm::kBeliefPropagation})
      if (Registry::Global().Find(name)->algorithm == a && Registry::Global().IsAvailable(name))
        solvers.push_back(name);
  if (solvers.empty()) {
    EXPECT_NE(r.out.find("multilabel skipped"), std::string::npos) << r.out;
    GTEST_SKIP() << "no multilabel solver in this build";
  }
  const nlohmann::json rows = nlohmann::json::parse(Slurp(dir + "/rows.json"));
  const Model model = BuildStereoModel(LoadImage(tsukuba), LoadImage(data_dir + "/middlebury/tsukuba-imR.png"),
                                       StereoParams::Preset("tsukuba"));
  const Energy zero_energy = EvaluateEnergy(model, Labeling(model.num_nodes(), 0)).total;
  ASSERT_EQ(rows.size(), solvers.size()) << rows.dump();
  for (const auto& row : rows) {
    const std::string solver = row["solver"].get<std::string>();
    EXPECT_NE(std::find(solvers.begin(), solvers.end(), solver), solvers.end()) << solver;
    EXPECT_EQ(row["problem"], "tsukuba");
    ASSERT_TRUE(row["ok"].get<bool>()) << row.dump();
    EXPECT_NE(r.out.find(solver), std::string::npos) << "table row for " << solver;
    // The curve starts at the all-zero labelling and ends at the reported energy, in time order.
    const auto& curve = row["curve"];
    ASSERT_GE(curve.size(), 2u);
    EXPECT_EQ(curve.front()["energy"].get<Energy>(), zero_energy) << "energy of labels 0 on Tsukuba";
    EXPECT_EQ(curve.back()["energy"].get<Energy>(), row["energy"].get<Energy>());
    for (std::size_t i = 1; i < curve.size(); ++i)
      EXPECT_GE(curve[i]["time_ms"].get<double>(), curve[i - 1]["time_ms"].get<double>()) << solver;
    const double bad = row["bad_pixels_percent"].get<double>();
    EXPECT_GE(bad, 0.0);
    EXPECT_LE(bad, 100.0);
  }
  const std::string svg = Slurp(dir + "/plot.svg");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  std::size_t polylines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1)) ++polylines;
  EXPECT_EQ(polylines, solvers.size());
}

TEST(BenchMultilabel, MissingDataIsSkippedWithAReason) {
  // A data folder without the images: each problem is skipped with the file it lacks, and a suite asked
  // for alone that measured nothing is an error (with --suite all it is not).
  const std::string empty = test::ScratchDir("bench_multilabel_empty");
  const test::CommandResult r =
      test::RunCommand(test::AppPath("mrf-bench") + " --suite multilabel --quick --data-dir " + empty);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "mrf-bench: error: the multilabel suite measured nothing (its skipped lines say why)\n");
  if (r.out.find("multilabel skipped: no available") != std::string::npos) GTEST_SKIP() << "no multilabel solver";
  EXPECT_NE(r.out.find("tsukuba skipped: " + empty + "/middlebury/tsukuba-imL.png not found"), std::string::npos)
      << r.out;
}

// A newline in --data-dir shows as '?' on the skipped line that names the missing file (the suite then
// measured nothing: exit 1, as above).
TEST(BenchMultilabel, PathsWithNewlinesStayOnTheirReportLines) {
  const std::string data = test::ScratchDir("bench_multilabel_newline") + "/da\nta";
  std::filesystem::create_directories(data);
  const test::CommandResult r =
      test::RunCommand(test::AppPath("mrf-bench") + " --suite multilabel --quick --data-dir \"" + data + "\"");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, "mrf-bench: error: the multilabel suite measured nothing (its skipped lines say why)\n");
  if (r.out.find("multilabel skipped: no available") != std::string::npos) GTEST_SKIP() << "no multilabel solver";
  const std::string shown = data.substr(0, data.size() - 5) + "da?ta";
  EXPECT_NE(r.out.find("\n# tsukuba skipped: " + shown + "/middlebury/tsukuba-imL.png not found (--data-dir)\n"),
            std::string::npos) << r.out;
  test::ExpectNoLineSplitByPaths(r, {data + "/middlebury/tsukuba-imL.png"});  // the whole path the line names
}

TEST(BenchMultilabel, MissingDataFolderIsAOneLineError) {
  // A folder named explicitly that does not exist is a mistake, not a run with nothing in it.
  const test::CommandResult r =
      test::RunCommand(test::AppPath("mrf-bench") + " --suite multilabel --quick --data-dir /nonexistent-folder");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "mrf-bench: error: --data-dir: Directory does not exist: /nonexistent-folder (see --help)\n");
}

TEST(BenchMultilabel, UnknownSolverIsAOneLineError) {
  const test::CommandResult r =
      test::RunCommand(test::AppPath("mrf-bench") + " --suite multilabel --quick --solvers cpu-nothing");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("mrf-bench: error: --solvers: 'cpu-nothing' is not a multilabel solver"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace mrf
