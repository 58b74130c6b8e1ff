// mrf-stereo end to end: the default synthetic run, the JSON report (checked against the energy of the
// disparity map it writes), presets with ground truth, and one-line errors for every bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "energies/stereo.h"
#include "mrf/io/image.h"
#include "mrf/registry.h"
#include "support/test_support.h"

namespace mrf {
namespace {

const std::string kProgram = "mrf-stereo";

std::string Stereo(const std::string& args) { return test::AppPath(kProgram) + " " + args; }

using test::HasSolver;

// Bad input: exit 1 (2 for a command line CLI11 rejects) and one line on stderr naming the problem.
void ExpectOneLineError(const std::string& args, const std::string& phrase, int exit_code = 1) {
  test::ExpectOneLineError(kProgram, args, phrase, exit_code);
}

// Writes the synthetic pair (and grey copies) as PNG files in a scratch folder.
struct Files {
  std::string dir, left, right, grey_left, grey_right, narrow_right, gt, small_gt;
};
Files WritePair() {
  Files f;
  f.dir = test::ScratchDir("mrf_stereo");
  const SyntheticStereo s = MakeSyntheticStereo(48, 36, 8, 3);
  f.left = f.dir + "/left.png";
  f.right = f.dir + "/right.png";
  f.grey_left = f.dir + "/grey_left.png";
  f.grey_right = f.dir + "/grey_right.png";
  f.narrow_right = f.dir + "/narrow_right.png";
  f.gt = f.dir + "/gt.png";
  f.small_gt = f.dir + "/small_gt.png";
  SavePng(f.left, s.left);
  SavePng(f.right, s.right);
  SavePng(f.grey_left, ToGrey(s.left));
  SavePng(f.grey_right, ToGrey(s.right));
  SavePng(f.narrow_right, Image::Filled(40, 36, 3, 128));
  SavePng(f.gt, DisparityToImage(s.disparity, 48, 36, 4));
  SavePng(f.small_gt, Image::Filled(47, 36, 1, 4));
  return f;
}

TEST(MrfStereo, DefaultRunSolvesTheSyntheticPair) {
  const std::string dir = test::ScratchDir("mrf_stereo_default");
  const test::CommandResult r = test::RunCommand(Stereo("--json -o " + dir + "/d.png"));
  if (!HasSolver(Algorithm::kExpansion)) {
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no available expansion solver"), std::string::npos) << r.err;
    GTEST_SKIP() << "no expansion solver in this build: checked the error only";
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* field : {"energy", "backend", "time_ms", "bad_pixels_percent", "iterations"})
    EXPECT_TRUE(j.contains(field)) << field << " missing in " << r.out;
  EXPECT_FALSE(j["backend"].get<std::string>().empty());
  EXPECT_GT(j["time_ms"].get<double>(), 0);
  // The synthetic pair is easy: a correct solver gets nearly all pixels right.
  EXPECT_LT(j["bad_pixels_percent"].get<double>(), 10.0) << r.out;

  // The reported energy is the energy of the map written to -o (grey = disparity x 17 for 16 labels).
  const SyntheticStereo s = MakeSyntheticStereo(256, 192, 16, 0, 4.0);
  const Model model = BuildStereoModel(s.left, s.right, StereoParams{});
  const Image map = LoadImage(dir + "/d.png", 1);
  Labeling labels(map.pixels.size());
  for (std::size_t p = 0; p < labels.size(); ++p) {
    ASSERT_EQ(map.pixels[p] % 17, 0) << "pixel " << p;
    labels[p] = map.pixels[p] / 17;
  }
  EXPECT_EQ(EvaluateEnergy(model, labels).total, j["energy"].get<Energy>());
}

// --threads 1 runs every TBB loop on one thread (the report says so) and gives the default run's labels.
TEST(MrfStereo, ThreadsAreBoundedAndReported) {
  if (!HasSolver(Algorithm::kExpansion)) GTEST_SKIP() << "no expansion solver in this build";
  const std::string dir = test::ScratchDir("mrf_stereo_threads");
  const test::CommandResult one =
      test::RunCommand(Stereo("--json --solver cpu-expansion --threads 1 -o " + dir + "/one.png"));
  const test::CommandResult all = test::RunCommand(Stereo("--json --solver cpu-expansion -o " + dir + "/all.png"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const nlohmann::json j1 = nlohmann::json::parse(one.out), ja = nlohmann::json::parse(all.out);
  EXPECT_EQ(j1["threads"], 1) << one.out;
  EXPECT_GE(ja["threads"].get<int>(), 1) << all.out;
  EXPECT_EQ(j1["energy"], ja["energy"]);
  EXPECT_EQ(LoadImage(dir + "/one.png", 1).pixels, LoadImage(dir + "/all.png", 1).pixels);
}

TEST(MrfStereo, TextReportNamesBackendEnergyTimeAndErrors) {
  if (!HasSolver(Algorithm::kIcm)) GTEST_SKIP() << "no ICM solver in this build";
  const test::CommandResult r = test::RunCommand(Stereo("--algorithm icm --synthetic-size 64 --labels 8"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* part : {"backend:", "energy:", "time:", "iterations:", "bad pixels:"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " missing in " << r.out;
  EXPECT_NE(r.err.find("mrf-stereo: no images given: generating a synthetic"), std::string::npos)
      << "progress on stderr: " << r.err;
  EXPECT_NE(r.err.find("mrf-stereo: iteration 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mrf-stereo: solving (icm, device auto)"), std::string::npos) << r.err;
  // A solver named by --solver is what the progress line reports, not the ignored --algorithm.
  const test::CommandResult named = test::RunCommand(Stereo("--solver cpu-icm --synthetic-size 64 --labels 8"));
  ASSERT_EQ(named.exit_code, 0) << named.out << named.err;
  EXPECT_NE(named.err.find("mrf-stereo: solving with cpu-icm"), std::string::npos) << named.err;
  EXPECT_EQ(named.err.find("expansion"), std::string::npos) << named.err;
  const test::CommandResult quiet = test::RunCommand(Stereo("-q --algorithm icm --synthetic-size 64 --labels 8"));
  ASSERT_EQ(quiet.exit_code, 0);
  EXPECT_TRUE(quiet.err.empty()) << "-q prints no progress: " << quiet.err;
}

// --algorithm maxflow takes a two-label problem (it was once refused before the label count was known)
// and reaches the optimum, which exact expansion with two labels reaches too.
TEST(MrfStereo, TwoLabelsTakeMaxFlow) {
  if (!HasSolver(Algorithm::kMaxFlow) || !HasSolver(Algorithm::kExpansion)) GTEST_SKIP() << "no max-flow solver";
  const std::string problem = " --synthetic-size 24 --labels 2 --json -q";
  const test::CommandResult cut = test::RunCommand(Stereo("--algorithm maxflow" + problem));
  const test::CommandResult moves = test::RunCommand(Stereo("--solver cpu-expansion" + problem));
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  ASSERT_EQ(moves.exit_code, 0) << moves.err;
  const nlohmann::json jc = nlohmann::json::parse(cut.out), jm = nlohmann::json::parse(moves.out);
  const SolverEntry* used = Registry::Global().Find(jc["backend"].get<std::string>());
  ASSERT_NE(used, nullptr) << cut.out;
  EXPECT_EQ(used->algorithm, Algorithm::kMaxFlow) << cut.out;
  EXPECT_EQ(jc["energy"], jm["energy"]);
}

TEST(MrfStereo, ImagesWithGroundTruthAndColourOutput) {
  if (!HasSolver(Algorithm::kExpansion)) GTEST_SKIP() << "no expansion solver in this build";
  const Files f = WritePair();
  const test::CommandResult r = test::RunCommand(Stereo(f.left + " " + f.right + " --labels 8 --gt " + f.gt +
                                                        " --gt-scale 4 --json --colour " + f.dir + "/c.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(
      j["pixels_with_ground_truth"].get<int>(), 48 * 36 - [&] {
        const SyntheticStereo s = MakeSyntheticStereo(48, 36, 8, 3);
        return static_cast<int>(std::count(s.disparity.begin(), s.disparity.end(), 0));
      }());
  EXPECT_LT(j["bad_pixels_percent"].get<double>(), 20.0) << r.out;
  const Image colour = LoadImage(f.dir + "/c.png");
  EXPECT_EQ(colour.width, 48);
  EXPECT_EQ(colour.channels, 3);
}

TEST(MrfStereo, PathsWithNewlinesStayOnTheirReportLines) {
  if (!HasSolver(Algorithm::kExpansion)) GTEST_SKIP() << "no expansion solver in this build";
  const Files f = WritePair();
  const std::string left = f.dir + "/le\nft.png";
  std::filesystem::copy_file(f.left, left, std::filesystem::copy_options::overwrite_existing);
  const test::CommandResult r =
      test::RunCommand(Stereo("\"" + left + "\" " + f.right + " --labels 4 --colour \"" + f.dir + "/co\nlour.png\""));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("problem:   " + f.dir + "/le?ft.png, 48x36 RGB\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("mrf-stereo: wrote " + f.dir + "/co?lour.png"), std::string::npos) << r.err;
  test::ExpectNoLineSplitByPaths(r, {left, f.dir + "/co\nlour.png"});
  EXPECT_TRUE(std::filesystem::exists(f.dir + "/co\nlour.png"));  // the file keeps its real name
}

// Outputs may share a device (only files are checked for overwriting inputs or each other).
TEST(MrfStereo, OutputsMayShareADevice) {
  const test::CommandResult r =
      test::RunCommand(Stereo("--synthetic-size 16 --labels 4 -q -o /dev/null --colour /dev/null --save-model /dev/null"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST(MrfStereo, TsukubaPresetReportsBadPixels) {
  const std::string left = test::SharedDataPath("middlebury/tsukuba-imL.png");
  const std::string right = test::SharedDataPath("middlebury/tsukuba-imR.png");
  const std::string gt = test::SharedDataPath("middlebury/tsukuba-truedispL.png");
  if (left.empty() || right.empty() || gt.empty()) GTEST_SKIP() << "Middlebury Tsukuba not found";
  if (!HasSolver(Algorithm::kIcm)) GTEST_SKIP() << "no ICM solver in this build";
  const std::string dir = test::ScratchDir("mrf_stereo_tsukuba");
  const test::CommandResult r = test::RunCommand(
      Stereo(left + " " + right + " --preset tsukuba --algorithm icm --gt " + gt + " --json -o " + dir + "/d.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  // The map is written at the ground truth's scale (16): recompute the bad-pixel rate from it.
  const Image map = LoadImage(dir + "/d.png", 1);
  Labeling labels(map.pixels.size());
  for (std::size_t p = 0; p < labels.size(); ++p) labels[p] = map.pixels[p] / 16;
  EXPECT_DOUBLE_EQ(j["bad_pixels_percent"].get<double>(), BadPixelPercent(labels, LoadGreyValues(gt), 16));
  const Model model = BuildStereoModel(LoadImage(left), LoadImage(right), StereoParams::Preset("tsukuba"));
  EXPECT_EQ(EvaluateEnergy(model, labels).total, j["energy"].get<Energy>());
  EXPECT_EQ(j["width"].get<int>(), 384);
  EXPECT_EQ(j["labels"].get<int>(), 16);
}

TEST(MrfStereo, BadInputIsAOneLineError) {
  const Files f = WritePair();
  ExpectOneLineError(f.left + " " + f.narrow_right,
                     "left and right images differ in size: left is 48x36, right is 40x36");
  ExpectOneLineError(f.left + " " + f.right + " --labels 49",
                     "49 disparity labels but the images are only 48 pixels wide");
  ExpectOneLineError(f.grey_left + " " + f.grey_right + " --preset tsukuba --labels 8",
                     "is defined on colour (RGB) images, but the images are grey");
  ExpectOneLineError(f.left + " " + f.grey_right + " --labels 8", "differ in colour");
  // A preset turns truncation on, but an explicit --no-truncate wins (Venus' quadratic is not a metric).
  ExpectOneLineError(f.left + " " + f.right + " --preset venus --no-truncate --algorithm expansion",
                     "smoothness 'quadratic' is not a metric");
  ExpectOneLineError("--smoothness quadratic --vmax 9 --synthetic-size 32 --labels 8",
                     "smoothness 'quadratic' is not a metric");
  ExpectOneLineError("--smoothness quadratic --vmax 9 --synthetic-size 32 --labels 8 --solver cpu-expansion",
                     "add --truncate");
  ExpectOneLineError(f.left + " " + f.right + " --labels 8 --gt " + f.small_gt, "ground truth");
  ExpectOneLineError(f.left, "LEFT given without RIGHT");
  ExpectOneLineError("--downsample 2", "--downsample needs LEFT and RIGHT");
  ExpectOneLineError(f.left + " " + f.dir + "/missing.png", "missing.png");
  ExpectOneLineError("--preset cones", "unknown stereo preset 'cones'");
  ExpectOneLineError("--smoothness table --table " + f.gt, "smoothness table");
  ExpectOneLineError("--data-cost cubic", "unknown data cost 'cubic'");
  ExpectOneLineError("--algorithm annealing", "unknown algorithm 'annealing'");
  ExpectOneLineError("--solver no-such-solver", "no-such-solver");
  ExpectOneLineError("--start wta", "unknown start 'wta' (expected one of: zero, bp)");
}

TEST(MrfStereo, HelpListsEveryOption) {
  const test::CommandResult r = test::RunCommand(Stereo("--help"));
  ASSERT_EQ(r.exit_code, 0);
  for (const char* option : {"--preset",
                             "--labels",
                             "--start",
                             "--data-cost",
                             "--no-bt",
                             "--data-truncation",
                             "--smoothness",
                             "--lambda",
                             "--vmax",
                             "--gradient-threshold",
                             "--gradient-penalty",
                             "--algorithm",
                             "--device",
                             "--solver",
                             "--iterations",
                             "--seed",
                             "--label-order",
                             "--truncate",
                             "--gt",
                             "--gt-scale",
                             "--output",
                             "--colour",
                             "--threads",
                             "--json"})
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
  // The negated flag reads as users type it, without CLI11's "{false}".
  EXPECT_NE(r.out.find("--no-truncate "), std::string::npos);
  EXPECT_EQ(r.out.find('{'), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mrf
