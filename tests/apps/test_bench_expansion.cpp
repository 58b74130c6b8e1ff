// mrf-bench's expansion suite runs end to end on Tsukuba (when the Middlebury images are present):
// it exits 0, prints its row and writes JSON whose energy is at most the reference's.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

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

// --cycles stops the gpuexpansion suite's runs early (here its CPU rows, which run without a GPU too): a
// one-cycle run stops after cycle 1, above the energy the same rows reach when they run to convergence.
TEST(BenchExpansion, GpuExpansionSuiteStopsAfterTheCyclesAsked) {
  const std::string image = test::SharedDataPath("middlebury/tsukuba-imL.png");
  if (image.empty()) GTEST_SKIP() << "Middlebury Tsukuba images not found under the shared data directory";
  const std::string data_dir = image.substr(0, image.rfind("/middlebury/"));
  const std::string dir = test::ScratchDir("bench_gpuexpansion_cycles");
  auto rows_of = [&](const std::string& extra, const std::string& json) {
    const test::CommandResult r = test::RunCommand(
        test::AppPath("mrf-bench") + " -q --suite gpuexpansion --problems tsukuba --repeat 1 --solvers cpu-expansion" +
        " --data-dir " + data_dir + " --json " + json + extra);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::ifstream in(json);
    return std::make_pair(r.out, nlohmann::json::parse(in));
  };
  const auto [short_out, short_rows] = rows_of(" --cycles 1", dir + "/one.json");
  const auto [full_out, full_rows] = rows_of("", dir + "/full.json");
  EXPECT_NE(short_out.find("at most 1 cycle (--cycles: a run may stop before a cycle that changes nothing)"),
            std::string::npos) << short_out;
  ASSERT_EQ(short_rows.size(), 2u) << short_rows.dump();  // sequential and frequent label orders
  ASSERT_EQ(full_rows.size(), 2u) << full_rows.dump();
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(short_rows[i]["method"].get<std::string>());
    EXPECT_EQ(short_rows[i]["cycles"], 1);
    EXPECT_GT(full_rows[i]["cycles"].get<int>(), 1);
    EXPECT_GT(short_rows[i]["energy"].get<long long>(), full_rows[i]["energy"].get<long long>());
    // The rows say that the short runs were cut, not converged.
    EXPECT_EQ(short_rows[i]["max_cycles"], 1);
    EXPECT_EQ(short_rows[i]["baseline_converged"], false);
    EXPECT_EQ(full_rows[i]["max_cycles"], 500);
    EXPECT_EQ(full_rows[i]["baseline_converged"], true);
  }
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
