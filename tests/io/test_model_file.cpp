// The model file format: exact round trips, and a clear error for every kind of damage.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mrf/io/model_file.h"
#include "mrf/registry.h"
#include "support/test_support.h"

namespace mrf {
namespace {

Model SampleModel(std::mt19937_64& rng, const Topology& t, PairwiseKind kind) {
  Pairwise p{kind, 3, 5, {}};
  if (kind == PairwiseKind::kTable) p.table = {0, 4, 9, 4, 0, 2, 9, 2, 0};
  return test::RandomModel(rng, t, 3, 40, p, 4);
}

std::string Bytes(const Model& m) {
  std::ostringstream out;
  SaveModel(m, out);
  return out.str();
}

TEST(ModelFile, RoundTripsEveryTopologyAndPairwiseKind) {
  std::mt19937_64 rng(5);
  for (const Topology& t : {Topology::Grid2D(5, 4, 4), Topology::Grid2D(3, 6, 8), Topology::Grid3D(3, 2, 2),
                            Topology::EdgeList(4, {0, 1, 2}, {1, 2, 3})})
    for (PairwiseKind k : {PairwiseKind::kPotts, PairwiseKind::kTruncatedLinear, PairwiseKind::kTruncatedQuadratic,
                           PairwiseKind::kTable}) {
      Model m = SampleModel(rng, t, k);
      m.cost_scale = 100;
      const Model back = LoadModelFromBytes(Bytes(m), "mem");
      EXPECT_TRUE(back.topology == m.topology);
      EXPECT_EQ(back.unary, m.unary);
      EXPECT_EQ(back.edge_weights, m.edge_weights);
      EXPECT_EQ(back.pairwise.table, m.pairwise.table);
      EXPECT_EQ(back.cost_scale, 100);
      Labeling x(m.num_nodes());
      for (auto& l : x) l = static_cast<Label>(rng() % 3);
      EXPECT_EQ(EvaluateEnergy(back, x).total, EvaluateEnergy(m, x).total);
    }
}

// The file ends with the standard 64-bit FNV-1a of every byte before it (docs/model_format.md), so other
// writers can produce it: computed here from the published constants, and checked on FNV's own vectors.
std::uint64_t StandardFnv1a(const std::string& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

TEST(ModelFile, EndsWithTheStandardFnv1aChecksum) {
  ASSERT_EQ(StandardFnv1a(""), 0xcbf29ce484222325ull);
  ASSERT_EQ(StandardFnv1a("a"), 0xaf63dc4c8601ec8cull);
  ASSERT_EQ(StandardFnv1a("foobar"), 0x85944171f73967e8ull);
  std::mt19937_64 rng(3);
  const std::string bytes = Bytes(SampleModel(rng, Topology::Grid2D(4, 3, 4), PairwiseKind::kTruncatedLinear));
  ASSERT_GT(bytes.size(), 20u);
  std::uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 8, sizeof version);
  EXPECT_EQ(version, kModelFileVersion);
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, sizeof stored);
  EXPECT_EQ(stored, StandardFnv1a(bytes.substr(0, bytes.size() - 8)));
}

TEST(ModelFile, DamagedFilesGiveOneLineErrors) {
  std::mt19937_64 rng(9);
  const std::string good = Bytes(SampleModel(rng, Topology::Grid2D(6, 5, 4), PairwiseKind::kPotts));
  auto message = [](const std::string& bytes) {
    try {
      LoadModelFromBytes(bytes, "m.mrf");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("hello").find("not an mrf model file"), std::string::npos);
  EXPECT_NE(message(good.substr(0, good.size() / 2)).find("m.mrf"), std::string::npos);
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x40;
  EXPECT_NE(message(flipped).find("checksum"), std::string::npos) << message(flipped);
  std::string version = good;
  version[8] = 7;
  EXPECT_NE(message(version).find("version 7"), std::string::npos) << message(version);
  // Every truncation point fails cleanly.
  for (std::size_t cut = 0; cut < good.size(); cut += 7) EXPECT_NE(message(good.substr(0, cut)), "no error");
  EXPECT_THROW(LoadModel("/nonexistent/model.mrf"), Error);
}

TEST(ModelFile, MrfSolveSolvesASavedModel) {
  std::mt19937_64 rng(2);
  Model m = test::RandomModel(rng, Topology::Grid2D(4, 3, 4), 2, 30, {PairwiseKind::kPotts, 7, 0, {}});
  const std::string dir = test::ScratchDir("mrf_solve");
  SaveModel(m, dir + "/m.mrf");
  const auto r = test::RunCommand(test::AppPath("mrf-solve") + " " + dir + "/m.mrf --json --solver boost-bk");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"energy\":" + std::to_string(test::BruteForceMinEnergy(m))), std::string::npos) << r.out;
  const auto bad = test::RunCommand(test::AppPath("mrf-solve") + " " + dir + "/missing.mrf");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("cannot open model file"), std::string::npos) << bad.err;
  const auto unknown = test::RunCommand(test::AppPath("mrf-solve") + " " + dir + "/m.mrf --solver nope");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("unknown backend 'nope'"), std::string::npos) << unknown.err;
}

// A newline in a path shows as '?' on the progress line naming the model, and the labels file keeps its name.
TEST(ModelFile, MrfSolvePathsWithNewlinesStayOnTheirReportLines) {
  std::mt19937_64 rng(3);
  const Model m = test::RandomModel(rng, Topology::Grid2D(4, 3, 4), 2, 30, {PairwiseKind::kPotts, 7, 0, {}});
  const std::string dir = test::ScratchDir("mrf_solve_newline");
  const std::string model = dir + "/mo\ndel.mrf", labels = dir + "/la\nbels.txt";
  SaveModel(m, model);
  const auto r = test::RunCommand(test::AppPath("mrf-solve") + " \"" + model + "\" --labels \"" + labels + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("mrf-solve: reading " + dir + "/mo?del.mrf\n"), std::string::npos) << r.err;
  test::ExpectNoLineSplitByPaths(r, {model, labels});
  std::ifstream written(labels);  // the file keeps its real name: one label a node
  EXPECT_EQ(std::count(std::istreambuf_iterator<char>(written), std::istreambuf_iterator<char>(), '\n'), 12);
}

// --list-solvers --json: one JSON array with every registry entry, its availability as the library sees it.
TEST(ModelFile, MrfSolveListsSolversAsJson) {
  const auto r = test::RunCommand(test::AppPath("mrf-solve") + " --list-solvers --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  const nlohmann::json list = nlohmann::json::parse(r.out);
  const Registry& registry = Registry::Global();
  ASSERT_EQ(list.size(), registry.entries().size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const SolverEntry& e = registry.entries()[i];
    std::string why;
    const bool available = registry.IsAvailable(e.name, &why);
    EXPECT_EQ(list[i]["name"], e.name);
    EXPECT_EQ(list[i]["algorithm"], ToString(e.algorithm));
    EXPECT_EQ(list[i]["device"], ToString(e.device));
    EXPECT_EQ(list[i]["compiled_in"], e.compiled_in);
    EXPECT_EQ(list[i]["available"], available) << e.name;
    if (available) EXPECT_TRUE(list[i]["unavailable_reason"].is_null()) << e.name;
    else EXPECT_EQ(list[i]["unavailable_reason"], why);
  }
}

}  // namespace
}  // namespace mrf
