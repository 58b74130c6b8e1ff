// The custom-energy example builds and runs: it quantises its callbacks, solves, and checks that the
// integer energy over the scale matches the real energy (the program fails otherwise).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "mrf/io/image.h"
#include "mrf/registry.h"
#include "support/test_support.h"

namespace mrf {
namespace {

TEST(ExampleCustomEnergy, RunsAndItsEnergiesAgree) {
  const std::string dir = test::ScratchDir("example_custom_energy");
  const test::CommandResult r =
      test::RunCommand(test::AppPath("example-custom-energy") + " --classes 4 -o " + dir + "/classes.png");
  std::string note;
  if (!test::HasSolver(Algorithm::kExpansion, &note)) {
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no available expansion solver"), std::string::npos) << r.err;
    GTEST_SKIP() << "no expansion solver in this build (" << note << "): checked the error only";
  }
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("costs scaled by 10000"), std::string::npos) << r.out;  // largest cost 0.5*(255/25)^2 = 52
  EXPECT_NE(r.out.find("a metric (expansion applies)"), std::string::npos) << r.out;
  double real = -1, scaled = -1, bound = -1;
  const std::size_t at = r.out.find("real energy:");
  ASSERT_NE(at, std::string::npos) << r.out;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "real energy: %lf (integer energy / scale = %lf, rounding bound %lf)",
                        &real, &scaled, &bound),
            3)
      << r.out;
  EXPECT_NEAR(real, scaled, bound);
  const Image classes = LoadImage(dir + "/classes.png", 1);
  EXPECT_EQ(classes.width, 96);
  for (std::uint8_t v : classes.pixels) EXPECT_TRUE(v == 0 || v == 85 || v == 170 || v == 255) << int(v);
}

// A newline in the output's name shows as '?' on the 'wrote' line, and the file keeps its name.
TEST(ExampleCustomEnergy, PathsWithNewlinesStayOnTheirReportLines) {
  std::string why;
  if (!test::HasSolver(Algorithm::kExpansion, &why))
    GTEST_SKIP() << "no expansion solver in this build (" << why << ")";
  const std::string dir = test::ScratchDir("example_custom_energy_newline"), output = dir + "/cla\nsses.png";
  const test::CommandResult r =
      test::RunCommand(test::AppPath("example-custom-energy") + " --classes 3 -o \"" + output + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("wrote:       " + dir + "/cla?sses.png\n"), std::string::npos) << r.out;
  test::ExpectNoLineSplitByPaths(r, {output});
  EXPECT_TRUE(std::filesystem::exists(output));
}

TEST(ExampleCustomEnergy, BadOptionIsAOneLineError) {
  const test::CommandResult r = test::RunCommand(test::AppPath("example-custom-energy") + " --classes 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("example-custom-energy: error:"), std::string::npos) << r.err;
  // A short message for a non-positive number (CLI11's own printed the largest double in full).
  const test::CommandResult zero = test::RunCommand(test::AppPath("example-custom-energy") + " --sigma 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_EQ(zero.err, "example-custom-energy: error: --sigma: must be a finite number > 0 (got '0') (see --help)\n");
}

}  // namespace
}  // namespace mrf
