// mrf-restore end to end: the default generated picture, the JSON report (checked against the image it
// writes), masks, and one-line errors for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "energies/restoration.h"
#include "mrf/io/image.h"
#include "support/test_support.h"

namespace mrf {
namespace {

const std::string kProgram = "mrf-restore";

std::string Restore(const std::string& args) { return test::AppPath(kProgram) + " " + args; }

using test::HasSolver;

// Bad input: exit 1 (2 for a command line CLI11 rejects) and one line on stderr naming the problem.
void ExpectOneLineError(const std::string& args, const std::string& phrase, int exit_code = 1) {
  test::ExpectOneLineError(kProgram, args, phrase, exit_code);
}

TEST(MrfRestore, DefaultRunRestoresTheGeneratedPicture) {
  const test::CommandResult r = test::RunCommand(Restore(""));
  if (!HasSolver(Algorithm::kExpansion)) {
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no available expansion solver"), std::string::npos) << r.err;
    GTEST_SKIP() << "no expansion solver in this build: checked the error only";
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* part : {"backend:", "energy:", "time:", "RMS error:", "missing pixels"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " missing in " << r.out;
  EXPECT_NE(r.err.find("mrf-restore: no image given: generating"), std::string::npos) << r.err;
}

TEST(MrfRestore, JsonReportMatchesTheWrittenImage) {
  if (!HasSolver(Algorithm::kExpansion)) GTEST_SKIP() << "no expansion solver in this build";
  const std::string dir = test::ScratchDir("mrf_restore");
  const SyntheticRestoration s = MakeSyntheticRestoration(48, 36, 5, 25.0, 3);
  SavePng(dir + "/noisy.png", s.noisy);
  SavePng(dir + "/mask.png", s.mask);
  SavePng(dir + "/clean.png", s.clean);
  const test::CommandResult r = test::RunCommand(Restore(dir + "/noisy.png --mask " + dir + "/mask.png --clean " + dir +
                                                         "/clean.png --levels 64 --json -o " + dir + "/out.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const char* field : {"energy", "backend", "time_ms", "rms_error", "missing_pixels"})
    EXPECT_TRUE(j.contains(field)) << field << " missing in " << r.out;
  EXPECT_EQ(j["missing_pixels"].get<int>(),
            static_cast<int>(std::count(s.mask.pixels.begin(), s.mask.pixels.end(), 255)));
  // Restoration removes most of the noise.
  EXPECT_LT(j["rms_error"].get<double>(), 0.6 * j["rms_error_input"].get<double>()) << r.out;
  // The energy reported is the energy of the written image under the same model.
  RestorationParams params;
  params.num_labels = 64;
  const Model model = BuildRestorationModel(s.noisy, s.mask, params);
  const Image out = LoadImage(dir + "/out.png", 1);
  Labeling labels(out.pixels.size());
  for (std::size_t p = 0; p < labels.size(); ++p) {
    Label l = 0;
    while (l < 63 && LevelIntensity(l, 64) < out.pixels[p]) ++l;
    ASSERT_EQ(LevelIntensity(l, 64), out.pixels[p]) << "pixel " << p << " is not one of the 64 levels";
    labels[p] = l;
  }
  EXPECT_EQ(EvaluateEnergy(model, labels).total, j["energy"].get<Energy>());
  EXPECT_DOUBLE_EQ(j["rms_error"].get<double>(), RootMeanSquareError(out, s.clean));
}

TEST(MrfRestore, PathsWithNewlinesStayOnTheirReportLines) {
  if (!HasSolver(Algorithm::kExpansion)) GTEST_SKIP() << "no expansion solver in this build";
  const std::string dir = test::ScratchDir("mrf_restore_newline");
  const std::string image = dir + "/two\nlines.png";
  SavePng(image, Image::Filled(12, 8, 1, 100));
  const test::CommandResult r =
      test::RunCommand(Restore("\"" + image + "\" --levels 4 -o \"" + dir + "/out\nput.png\""));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("problem:   " + dir + "/two?lines.png, 12x8 grey"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("mrf-restore: wrote " + dir + "/out?put.png\n"), std::string::npos) << r.err;
  test::ExpectNoLineSplitByPaths(r, {image, dir + "/out\nput.png"});
  EXPECT_TRUE(std::filesystem::exists(dir + "/out\nput.png"));  // the file keeps its real name
}

TEST(MrfRestore, OutputThroughADanglingLinkIsWrittenWhereItPoints) {
  if (!HasSolver(Algorithm::kExpansion)) GTEST_SKIP() << "no expansion solver in this build";
  const std::string dir = test::ScratchDir("mrf_restore_link");
  std::filesystem::create_directories(dir + "/real");
  std::filesystem::create_symlink("real/out.png", dir + "/link.png");  // its folder exists, the file not yet
  const test::CommandResult r = test::RunCommand(Restore("--synthetic-size 16 --levels 4 -q -o " + dir + "/link.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LoadImage(dir + "/real/out.png", 1).width, 16);
}

TEST(MrfRestore, BadInputIsAOneLineError) {
  const std::string dir = test::ScratchDir("mrf_restore_bad");
  SavePng(dir + "/image.png", Image::Filled(20, 10, 1, 100));
  SavePng(dir + "/mask.png", Image::Filled(20, 11, 1, 0));
  ExpectOneLineError(dir + "/image.png --mask " + dir + "/mask.png", "the mask is 20x11 but the image is 20x10");
  ExpectOneLineError(dir + "/image.png --clean " + dir + "/mask.png", "clean image");
  ExpectOneLineError(dir + "/missing.png", "missing.png");
  // A newline in a path would split the error: it is shown as '?'.
  ExpectOneLineError("\"" + dir + "/no\nsuch.png\"", "cannot open image '" + dir + "/no?such.png'");
  ExpectOneLineError("--mask " + dir + "/mask.png", "--mask needs an IMAGE");
  ExpectOneLineError(dir + "/image.png --levels 300", "--levels", 2);
  ExpectOneLineError(dir + "/image.png --no-truncate", "smoothness 'quadratic' is not a metric");
  ExpectOneLineError(dir + "/image.png --smoothness cubic", "unknown smoothness kind 'cubic'");
}

}  // namespace
}  // namespace mrf
