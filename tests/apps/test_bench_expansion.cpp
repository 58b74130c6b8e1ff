// mrf-bench's expansion suite runs end to end on Tsukuba (when the Middlebury images are present):
// it exits 0, prints its row and writes JSON whose energy is at most the reference's.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_support.h"

namespace mrf {
namespace {

TEST(BenchExpansion, QuickTsukubaRowReachesTheReferenceEnergy) {
  const std::string image = test::SharedDataPath("middlebury/tsukuba-imL.png");
  if (image.empty()) GTEST_SKIP() << "Middlebury Tsukuba images not found under the shared data directory";
  const std::string data_dir = image.substr(0, image.rfind("/middlebury/"));
  const std::string json = test::ScratchDir("bench_expansion") + "/expansion.json";
  const test::CommandResult r = test::RunCommand(test::AppPath("mrf-bench") +
                                                 " --suite expansion --quick --repeat 1 --solvers cpu-expansion"
                                                 " --data-dir " + data_dir + " --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("tsukuba  cpu-expansion"), std::string::npos) << r.out;
  std::ifstream in(json);
  const nlohmann::json rows = nlohmann::json::parse(in);
  ASSERT_EQ(rows.size(), 1u) << rows.dump();
  EXPECT_EQ(rows[0]["solver"], "cpu-expansion");
  EXPECT_EQ(rows[0]["engine"], "cpu-bk");
  EXPECT_LE(rows[0]["energy"].get<long long>(), 370825);
  EXPECT_EQ(rows[0]["reference_energy"].get<long long>(), 370825);
}

TEST(BenchExpansion, UnknownMethodIsAOneLineError) {
  const test::CommandResult r =
      test::RunCommand(test::AppPath("mrf-bench") + " --suite expansion --quick --solvers no-such-method");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("mrf-bench: error: --solvers: 'no-such-method' is not a method of the expansion suite"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace mrf
