// mrf-bench runs end to end: the binary suite on small scenes finishes, every engine agrees on
// the flow, and the JSON rows are written.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "support/test_support.h"

namespace mrf {
namespace {

TEST(BenchSmoke, BinarySuiteQuickRunsAndEnginesAgree) {
  const std::string json = test::ScratchDir("bench_smoke") + "/binary.json";
  const test::CommandResult r =
      test::RunCommand(test::AppPath("mrf-bench") + " --suite binary --quick --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu-bk"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("boost-bk"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# re-solve after a brush stroke"), std::string::npos) << r.out;
  std::ifstream in(json);
  std::stringstream rows;
  rows << in.rdbuf();
  EXPECT_NE(rows.str().find("\"solver\": \"cpu-bk\""), std::string::npos) << rows.str();
  EXPECT_NE(rows.str().find("\"size\": 256"), std::string::npos) << rows.str();
  EXPECT_NE(rows.str().find("\"suite\": \"binary-resolve\""), std::string::npos) << rows.str();
}

TEST(BenchSmoke, QuietKeepsTheTablesAndDropsTheProgress) {
  const std::string command = test::AppPath("mrf-bench") + " --suite binary --quick --solvers cpu-bk";
  const test::CommandResult loud = test::RunCommand(command);
  const test::CommandResult quiet = test::RunCommand(command + " -q");
  ASSERT_EQ(loud.exit_code, 0) << loud.err;
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_NE(loud.err.find("mrf-bench: binary: building"), std::string::npos) << loud.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_NE(quiet.out.find("cpu-bk"), std::string::npos) << quiet.out;
}

TEST(BenchSmoke, UnknownSolverIsAOneLineError) {
  const test::CommandResult r =
      test::RunCommand(test::AppPath("mrf-bench") + " --suite binary --quick --solvers no-such-engine");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("mrf-bench: error: --solvers: 'no-such-engine'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace mrf
