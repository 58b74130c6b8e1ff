// mrf-bench --suite models replays saved models: every applicable CPU solver gets a row, the exact
// solvers reach the minimum that Boost Graph's max-flow finds in this test, no other solver goes
// below it, and bad input (missing file, empty folder, unknown solver) is a one-line error.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mrf/io/model_file.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf {
namespace {

Model BinaryModel() {
  std::mt19937_64 rng(601);
  Pairwise potts;
  potts.kind = PairwiseKind::kPotts;
  potts.lambda = 15;
  return test::RandomModel(rng, Topology::Grid2D(24, 16, 4), 2, 80, potts, 3);
}

Model MultilabelModel() {
  std::mt19937_64 rng(602);
  Pairwise linear;
  linear.kind = PairwiseKind::kTruncatedLinear;
  linear.lambda = 6;
  linear.truncation = 2;
  return test::RandomModel(rng, Topology::Grid2D(16, 12, 4), 5, 50, linear);
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

TEST(BenchModels, ReplaysSavedModelsWithEveryApplicableSolver) {
  const std::string dir = test::ScratchDir("bench_models");
  const Model binary = BinaryModel(), multilabel = MultilabelModel();
  SaveModel(binary, dir + "/binary.mrf");
  SaveModel(multilabel, dir + "/multilabel.mrf");
  SolveOptions exact;
  exact.solver = "boost-bk";
  const Result minimum = Solve(binary, exact);
  ASSERT_TRUE(minimum.ok) << minimum.message;

  const std::string json = dir + "/rows.json";
  const test::CommandResult r = test::RunCommand(test::AppPath("mrf-bench") + " --suite models --repeat 1 --model " +
                                                 dir + "/binary.mrf --model " + dir + "/multilabel.mrf --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAILED"), std::string::npos) << r.out;
  // Max-flow only where it applies.
  EXPECT_NE(r.out.find("# cpu-bk skipped: max-flow needs two labels (the model has 5)"), std::string::npos) << r.out;

  const nlohmann::json rows = ReadJson(json);
  ASSERT_TRUE(rows.is_array());
  std::map<std::string, std::set<std::string>> solvers;  // model -> solvers with a row
  for (const nlohmann::json& row : rows) {
    ASSERT_EQ(row["suite"], "models");
    ASSERT_TRUE(row["ok"].get<bool>()) << row.dump();
    const std::string model = row["model"], solver = row["solver"];
    solvers[model].insert(solver);
    if (model != "binary.mrf") continue;
    const Energy energy = row["energy"];
    EXPECT_GE(energy, minimum.energy) << solver;
    if (row["algorithm"] == "maxflow") {
      EXPECT_EQ(energy, minimum.energy) << solver;
      EXPECT_EQ(row["lower_bound"].get<Energy>(), minimum.energy) << solver;
    }
  }
  for (const char* s : {"cpu-bk", "boost-bk", "tbb-pr", "cpu-expansion", "cpu-swap", "cpu-icm", "tbb-bp"})
    EXPECT_EQ(solvers["binary.mrf"].count(s), 1u) << s;
  for (const char* s : {"cpu-expansion", "cpu-swap", "cpu-icm", "tbb-bp"}) EXPECT_EQ(solvers["multilabel.mrf"].count(s), 1u) << s;
  EXPECT_EQ(solvers["multilabel.mrf"].count("cpu-bk"), 0u);

  // A folder: its .mrf files in name order, the same rows.
  const test::CommandResult folder = test::RunCommand(test::AppPath("mrf-bench") +
                                                      " --suite models --quick --solvers cpu-icm --models " + dir);
  ASSERT_EQ(folder.exit_code, 0) << folder.out << folder.err;
  const auto first = folder.out.find("binary.mrf"), second = folder.out.find("multilabel.mrf");
  ASSERT_NE(first, std::string::npos) << folder.out;
  ASSERT_NE(second, std::string::npos) << folder.out;
  EXPECT_LT(first, second);
}

// A newline in a model's path shows as '?' on its heading, its rows and the progress lines, and the --json
// file keeps its name.
TEST(BenchModels, PathsWithNewlinesStayOnTheirReportLines) {
  const std::string dir = test::ScratchDir("bench_models_newline");
  const std::string model = dir + "/bi\nnary.mrf", json = dir + "/ro\nws.json";
  SaveModel(BinaryModel(), model);
  const test::CommandResult r = test::RunCommand(test::AppPath("mrf-bench") + " --suite models --repeat 1 --solvers " +
                                                 "cpu-bk,cpu-icm --model \"" + model + "\" --json \"" + json + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\n# bi?nary.mrf: grid"), std::string::npos) << r.out;
  std::size_t rows_shown = 0;  // one a solver
  for (auto at = r.out.find("\nbi?nary.mrf "); at != std::string::npos; at = r.out.find("\nbi?nary.mrf ", at + 1))
    ++rows_shown;
  EXPECT_EQ(rows_shown, 2u) << r.out;
  EXPECT_NE(r.err.find("mrf-bench: models: reading " + dir + "/bi?nary.mrf\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mrf-bench: models: bi?nary.mrf: cpu-icm (run 1)\n"), std::string::npos) << r.err;
  test::ExpectNoLineSplitByPaths(r, {model, json});
  const nlohmann::json rows = ReadJson(json);  // the file keeps its real name, and the rows the model's
  ASSERT_EQ(rows.size(), 2u) << rows.dump();
  EXPECT_EQ(rows[0]["model"], "bi\nnary.mrf");
}

TEST(BenchModels, BadInputIsAOneLineError) {
  const std::string dir = test::ScratchDir("bench_models_bad");
  struct Case {
    std::string arguments, message;
  };
  SaveModel(BinaryModel(), dir + "/ok.mrf");
  std::ofstream(dir + "/broken.mrf") << "not a model";
  const Case cases[] = {
      {"--model " + dir + "/missing.mrf", "mrf-bench: error: cannot open model file '" + dir + "/missing.mrf'"},
      {"--model " + dir + "/broken.mrf", "mrf-bench: error: " + dir + "/broken.mrf: "},
      {"--models " + dir + "/no-such-folder", "mrf-bench: error: --models: cannot read the folder '" + dir + "/no-such-folder'"},
      {"--models " + test::ScratchDir("bench_models_empty"), "holds no .mrf file"},
      {"--model " + dir + "/ok.mrf --solvers nope", "mrf-bench: error: --solvers: 'nope' is not a solver"},
  };
  for (const Case& c : cases) {
    const test::CommandResult r = test::RunCommand(test::AppPath("mrf-bench") + " --suite models --quick " + c.arguments);
    EXPECT_EQ(r.exit_code, 1) << c.arguments << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.arguments << "\n" << r.err;
    const std::string error = r.err.substr(std::min(r.err.find("mrf-bench: error:"), r.err.size()));
    EXPECT_EQ(std::count(error.begin(), error.end(), '\n'), 1) << r.err;  // one line, the last
  }
}

// Asked for by name with nothing to replay, the suite is an error that says how to give models (within
// --suite all it only notes that, and the other suites run).
TEST(BenchModels, NoModelGivenSaysHowToGiveOne) {
  const test::CommandResult r = test::RunCommand(test::AppPath("mrf-bench") + " --suite models");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("--model FILE or --models DIR"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace mrf
