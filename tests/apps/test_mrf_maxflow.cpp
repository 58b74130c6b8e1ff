// mrf-maxflow as users run it: its JSON and text reports agree with the library on the same file, the
// cut it writes is a minimum cut, example files are deterministic, and every bad input or command
// line ends with a one-line error and a non-zero exit.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tbb/info.h>
#include <set>
#include <sstream>

#include "mrf/io/dimacs.h"
#include "mrf/memory.h"
#include "mrf/registry.h"
#include "support/test_support.h"

namespace mrf {
namespace {

std::string Program() { return test::AppPath("mrf-maxflow"); }

test::CommandResult Maxflow(const std::string& arguments) { return test::RunCommand(Program() + " " + arguments); }

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The library's answer on the same file, from the reference engine.
Energy LibraryFlow(const std::string& path, const DimacsReadOptions& options = {}) {
  StGraph g = ReadDimacs(path, nullptr, options);
  const Result r = g.maxflow("boost-bk");
  EXPECT_TRUE(r.ok) << r.message;
  return r.flow;
}

nlohmann::json ParseJson(const test::CommandResult& run) {
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // Exactly one JSON object, on one line.
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1) << run.out;
  return nlohmann::json::parse(run.out);
}

// A failure: non-zero exit, nothing on stdout, one stderr line naming the problem.
void ExpectOneLineError(const test::CommandResult& run, int exit_code, const std::string& needle) {
  EXPECT_EQ(run.exit_code, exit_code) << run.err;
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.rfind("mrf-maxflow: error: ", 0), 0u) << run.err;
  EXPECT_NE(run.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << run.err;
}

class MrfMaxflow : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::ScratchDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    example_ = dir_ + "/example.max";
    const auto run = Maxflow("--write-example " + example_ + " --size 23x17 --seed 5");
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  std::string dir_, example_;
};

TEST_F(MrfMaxflow, JsonFlowEqualsTheLibraryFlow) {
  const nlohmann::json j = ParseJson(Maxflow(example_ + " --json"));
  ASSERT_TRUE(j["flow"].is_number_integer()) << j.dump();
  EXPECT_EQ(j["flow"].get<Energy>(), LibraryFlow(example_));
  ASSERT_TRUE(j["backend"].is_string());
  EXPECT_TRUE(Registry::Global().Find(j["backend"].get<std::string>())) << j.dump();
  EXPECT_EQ(j["backend_requested"], "auto");
  for (const char* key : {"solve_ms", "read_ms", "setup_ms", "transfer_ms", "total_ms"})
    EXPECT_TRUE(j[key].is_number()) << key;
  EXPECT_EQ(j["nodes"], 23 * 17 + 2);
  EXPECT_TRUE(j["arcs"].is_number_integer());
  EXPECT_EQ(j["source_side"].get<long long>() + j["sink_side"].get<long long>(), 23 * 17 + 2);
  EXPECT_EQ(j["shape"], "23x17:4");
}

// A file name that is not UTF-8 still gives a JSON report (the byte shown as U+FFFD), not an error after
// the solve.
TEST_F(MrfMaxflow, JsonReportsAFileNameThatIsNotUtf8) {
  const std::string odd = dir_ + "/x\xff.max";
  std::filesystem::copy_file(example_, odd, std::filesystem::copy_options::overwrite_existing);
  const nlohmann::json j = ParseJson(Maxflow("'" + odd + "' --json"));
  EXPECT_EQ(j["file"], dir_ + "/x\xef\xbf\xbd.max");
  EXPECT_EQ(j["flow"].get<Energy>(), LibraryFlow(example_));
}

// --threads bounds the run's TBB loops (tbb-pr's rounds among them) and the report says how many it had;
// without it, or asking for more than the cores, the run has every core (2 on CI's machine), and TBB
// prints no warning about workers it cannot have.
TEST_F(MrfMaxflow, ThreadsAreBoundedAndReported) {
  const int cores = tbb::info::default_concurrency();
  const nlohmann::json one = ParseJson(Maxflow(example_ + " --json --backend tbb-pr --threads 1"));
  EXPECT_EQ(one["threads"], 1) << one.dump();
  EXPECT_EQ(one["flow"].get<Energy>(), LibraryFlow(example_));
  const nlohmann::json all = ParseJson(Maxflow(example_ + " --json --backend tbb-pr"));
  EXPECT_EQ(all["threads"], cores) << all.dump();
  const auto many = Maxflow(example_ + " --json --backend tbb-pr --threads 65536");
  EXPECT_EQ(ParseJson(many)["threads"], cores) << many.out;
  EXPECT_EQ(many.err, "") << "--threads above the cores";
  ExpectOneLineError(Maxflow(example_ + " --threads -1"), 2, "--threads: Value -1 not in range 0 to 65536");
}

TEST_F(MrfMaxflow, EveryMaxFlowBackendGivesTheSameFlow) {
  const Energy expected = LibraryFlow(example_);
  for (const std::string& name : Registry::Global().Names(Algorithm::kMaxFlow)) {
    if (!Registry::Global().IsAvailable(name)) continue;
    const nlohmann::json j = ParseJson(Maxflow(example_ + " --json --backend " + name));
    EXPECT_EQ(j["backend"], name);
    EXPECT_EQ(j["flow"].get<Energy>(), expected) << name;
    // --solver, the name the other programs give the option, picks the same engine.
    const nlohmann::json by_solver = ParseJson(Maxflow(example_ + " --json --solver " + name));
    EXPECT_EQ(by_solver["backend"], name);
    EXPECT_EQ(by_solver["backend_requested"], name);
  }
}

TEST_F(MrfMaxflow, TextReportShowsFlowCutBackendAndTimes) {
  const auto run = Maxflow(example_);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("flow:      " + std::to_string(LibraryFlow(example_)) + "\n"), std::string::npos) << run.out;
  for (const char* part : {"cut:       source side ", "backend:   ", "times:     read ", "setup ", "solve ", "total "})
    EXPECT_NE(run.out.find(part), std::string::npos) << part << " missing in\n" << run.out;
}

// A newline in a path shows as '?' on the report lines naming the file, the cut file and a written
// example, and the files keep their names.
TEST_F(MrfMaxflow, PathsWithNewlinesStayOnTheirReportLines) {
  const std::string file = dir_ + "/exam\nple.max", cut = dir_ + "/c\nut.txt";
  const test::CommandResult wrote = Maxflow("--write-example \"" + file + "\" --size 23x17 --seed 5");
  ASSERT_EQ(wrote.exit_code, 0) << wrote.out << wrote.err;
  EXPECT_EQ(wrote.out.rfind("wrote " + dir_ + "/exam?ple.max: ", 0), 0u) << wrote.out;
  const test::CommandResult r = Maxflow("\"" + file + "\" --cut \"" + cut + "\"");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("file:      " + dir_ + "/exam?ple.max ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cut file:  " + dir_ + "/c?ut.txt (sink-side DIMACS ids)\n"), std::string::npos) << r.out;
  for (const test::CommandResult& run : {wrote, r}) test::ExpectNoLineSplitByPaths(run, {file, cut});
  EXPECT_EQ(Slurp(file), Slurp(example_));  // the files keep their real names
  EXPECT_FALSE(Slurp(cut).empty());
}

TEST_F(MrfMaxflow, CutFileIsAMinimumCut) {
  const std::string cut_path = dir_ + "/cut.txt";
  const nlohmann::json j = ParseJson(Maxflow(example_ + " --json --cut " + cut_path));
  std::set<NodeId> sink_ids;
  std::istringstream in(Slurp(cut_path));
  for (NodeId id; in >> id;) sink_ids.insert(id);
  EXPECT_EQ(static_cast<long long>(sink_ids.size()), j["sink_side"].get<long long>());
  DimacsInfo info;
  StGraph g = ReadDimacs(example_, &info);
  EXPECT_TRUE(sink_ids.count(info.sink));
  EXPECT_FALSE(sink_ids.count(info.source));
  Labeling side(g.num_nodes());
  for (NodeId v = 0; v < g.num_nodes(); ++v) side[v] = sink_ids.count(info.DimacsId(v)) ? 1 : 0;
  EXPECT_EQ(g.CutCapacity(side), j["flow"].get<Energy>());
}

TEST_F(MrfMaxflow, GridOptionImposesAShapeOnAPlainFile) {
  std::string text = Slurp(example_), plain;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("c mrf-grid", 0) != 0) plain += line + "\n";
  const std::string path = dir_ + "/plain.max";
  WriteText(path, plain);
  const nlohmann::json general = ParseJson(Maxflow(path + " --json"));
  const nlohmann::json grid = ParseJson(Maxflow(path + " --json --grid 23x17"));
  EXPECT_EQ(general["shape"], "general");
  EXPECT_EQ(grid["shape"], "23x17:4");
  EXPECT_EQ(general["flow"], grid["flow"]);
  EXPECT_EQ(grid["flow"].get<Energy>(), LibraryFlow(example_));
  ExpectOneLineError(Maxflow(path + " --grid 17x23"), 1, "does not join two neighbours of the grid 17x23");
  ExpectOneLineError(Maxflow(path + " --grid 5x5"), 1, "the imposed grid 5x5, 4-connected has 25 nodes");
  ExpectOneLineError(Maxflow(path + " --grid 5x5:7"), 2, "--grid");
}

TEST_F(MrfMaxflow, ExamplesAreDeterministicAndKeepTheirShape) {
  const std::string again = dir_ + "/again.max", other = dir_ + "/other.max", cube = dir_ + "/cube.max";
  ASSERT_EQ(Maxflow("--write-example " + again + " --size 23x17 --seed 5").exit_code, 0);
  ASSERT_EQ(Maxflow("--write-example " + other + " --size 23x17 --seed 6").exit_code, 0);
  EXPECT_EQ(Slurp(again), Slurp(example_));
  EXPECT_NE(Slurp(other), Slurp(example_));
  ASSERT_EQ(Maxflow("--write-example " + cube + " --size 6x5x4 --seed 2").exit_code, 0);
  const nlohmann::json j = ParseJson(Maxflow(cube + " --json"));
  EXPECT_EQ(j["shape"], "6x5x4:6");
  EXPECT_EQ(j["flow"].get<Energy>(), LibraryFlow(cube));
}

TEST_F(MrfMaxflow, TimeLimitReportsAValidCutThatIsNotMinimal) {
  const Energy exact = LibraryFlow(example_);
  for (const char* backend : {"cpu-bk", "tbb-pr", "boost-bk"}) {
    SCOPED_TRACE(backend);
    const std::string cut_path = dir_ + "/stopped-cut.txt";
    const nlohmann::json j =
        ParseJson(Maxflow(example_ + " --json --time-limit 1e-9 --backend " + std::string(backend) + " --cut " + cut_path));
    EXPECT_FALSE(j["complete"].get<bool>());
    EXPECT_NE(j["message"].get<std::string>().find("stopped early: the time limit (1e-09 s) passed"), std::string::npos)
        << j.dump();
    // The reported capacity is the capacity of the cut written, counted independently here.
    std::set<NodeId> sink_ids;
    std::istringstream in(Slurp(cut_path));
    for (NodeId id; in >> id;) sink_ids.insert(id);
    DimacsInfo info;
    StGraph g = ReadDimacs(example_, &info);
    Labeling side(g.num_nodes());
    for (NodeId v = 0; v < g.num_nodes(); ++v) side[v] = sink_ids.count(info.DimacsId(v)) ? 1 : 0;
    EXPECT_EQ(g.CutCapacity(side), j["cut_capacity"].get<Energy>());
    EXPECT_GE(j["cut_capacity"].get<Energy>(), exact);
    EXPECT_LE(j["flow"].get<Energy>(), exact);
  }
  const auto text = Maxflow(example_ + " --time-limit 1e-9 --backend cpu-bk");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("note:      stopped early"), std::string::npos) << text.out;
  EXPECT_TRUE(ParseJson(Maxflow(example_ + " --json --time-limit 100"))["complete"].get<bool>());
  ExpectOneLineError(Maxflow(example_ + " --time-limit -1"), 2,
                     "--time-limit: must be a finite number >= 0 (got '-1')");
}

TEST_F(MrfMaxflow, BadFilesFailWithOneLine) {
  std::vector<std::pair<std::string, std::string>> cases = {
      {"c nothing\n", "no problem line"},
      {"p max 4 1\nn 1 s\nn 4 t\na 1 12 3\n", "bad.max:4: arc to unknown node 12 (nodes are 1..4)"},
      {"p max 4 1\nn 1 s\nn 4 t\na 1 2 -3\n", "bad.max:4: negative capacity -3"},
      {"p max 4 0\nn 1 s\nn 2 s\nn 4 t\n", "bad.max:3: second source 2"},
      {"p max 4 0\nn 1 s\n", "bad.max: no sink"},
      {"p max 4 1\nn 1 s\nn 4 t\na 1 2 x\n", "capacity 'x' is not an integer"},
      {"p max 4 2\nn 1 s\nn 4 t\na 1 2 9223372036854775807\na 3 4 1\n", "sum to more than 2^63-1"},
      {"p max 4 2\nn 1 s\nn 4 t\na 1 2 9223372036854775807\na 1 2 9\n", "sum to more than 2^63-1"},
      {"p max 4 1\nn 1 s\nn 4 t\na 2 3 99999999999\n", "does not fit in 32 bits"},
      {"p max 4 2\nn 1 s\nn 4 t\na 1 2 3\n", "announces 2 arcs but the file has 1"},
  };
  // A problem line can announce more nodes than memory holds: refused before anything is allocated (on a
  // machine with less than the 128 GiB they would need; elsewhere the case would allocate them).
  if (UsableMemoryBytes() < 64.0 * 2147483645)
    cases.push_back({"p max 2147483647 0\nn 1 s\nn 2 t\n", "bad.max:1: 2147483647 nodes need about 128.0 GiB of memory, more than"});
  const std::string path = dir_ + "/bad.max";
  for (const auto& [text, needle] : cases) {
    WriteText(path, text);
    SCOPED_TRACE(text);
    ExpectOneLineError(test::RunCommand("cd " + dir_ + " && " + Program() + " bad.max"), 1, needle);
    ExpectOneLineError(test::RunCommand("cd " + dir_ + " && " + Program() + " bad.max --json"), 1, needle);
  }
}

// A solve that fails still gives a script its one JSON object (ok false, the reason), then the error
// line and exit status 1: cuda-pr without a GPU, or with one whose memory runs out (an injected fault).
TEST_F(MrfMaxflow, FailedSolveWithJsonPrintsItsObjectThenTheError) {
  const auto run = test::RunCommand("MRF_INJECT_CUDA_FAULT=oom " + Program() + " " + example_ +
                                    " --json --backend cuda-pr");
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1) << run.out;
  const nlohmann::json j = nlohmann::json::parse(run.out);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["file"], example_);
  EXPECT_EQ(j["backend_requested"], "cuda-pr");
  EXPECT_FALSE(j["message"].get<std::string>().empty()) << j.dump();
  EXPECT_NE(run.err.find(j["message"].get<std::string>()), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_EQ(run.err.rfind("mrf-maxflow: error: " + example_ + ": max-flow failed: ", 0), 0u) << run.err;
  EXPECT_TRUE(ParseJson(Maxflow(example_ + " --json --backend cpu-bk"))["ok"].get<bool>());
}

TEST_F(MrfMaxflow, MissingFileUnknownBackendAndBadCommandLines) {
  ExpectOneLineError(Maxflow(dir_ + "/absent.max"), 1, "cannot open DIMACS file '" + dir_ + "/absent.max'");
  const std::string all_names = Registry::Global().NameList(Algorithm::kMaxFlow);
  ExpectOneLineError(Maxflow(example_ + " --backend no-such-engine"), 2,
                     "unknown backend 'no-such-engine' (max-flow backends: auto, " + all_names + ")");
  ExpectOneLineError(Maxflow(""), 2, "no input file");
  ExpectOneLineError(Maxflow(example_ + " --no-such-option"), 2, "--no-such-option");
  ExpectOneLineError(Maxflow(example_ + " --seed 3"), 2, "--seed requires --write-example");
  ExpectOneLineError(Maxflow("--write-example " + dir_ + "/x.max --size 0x5"), 2, "--size");
  ExpectOneLineError(Maxflow(example_ + " --write-example " + dir_ + "/x.max"), 2, "excludes");
  // Checked before the solve: the folder of an output must exist.
  ExpectOneLineError(Maxflow(example_ + " --cut " + dir_ + "/no/such/dir/cut.txt"), 1,
                     "--cut: folder '" + dir_ + "/no/such/dir' does not exist");
  // A write that fails after the solve (a full disk) still ends in one line.
  if (std::filesystem::exists("/dev/full"))
    ExpectOneLineError(Maxflow(example_ + " --cut /dev/full"), 1,
                       "cannot write cut file '/dev/full': No space left on device");
  // Options that only a solve reads are refused where none runs, not ignored.
  ExpectOneLineError(Maxflow("--write-example " + dir_ + "/x.max --json"), 2, "--json excludes --write-example");
  ExpectOneLineError(Maxflow("--write-example " + dir_ + "/x.max --cut " + dir_ + "/c.txt"), 2, "excludes");
  ExpectOneLineError(Maxflow("--list-backends " + example_), 2, "excludes");
}

TEST_F(MrfMaxflow, HelpDocumentsEveryOptionAndBackendsAreListed) {
  const auto help = Maxflow("--help");
  EXPECT_EQ(help.exit_code, 0);
  for (const char* option : {"--backend", "--json", "--cut", "--grid", "--list-backends", "--write-example", "--size",
                             "--seed", "--max-capacity", "--time-limit", "--quiet", "--threads", "FILE"})
    EXPECT_NE(help.out.find(option), std::string::npos) << option;
  const auto list = Maxflow("--list-backends");
  EXPECT_EQ(list.exit_code, 0);
  for (const std::string& name : Registry::Global().Names(Algorithm::kMaxFlow))
    EXPECT_NE(list.out.find("  " + name + " "), std::string::npos) << name << " missing in\n" << list.out;
  // With --json: the max-flow engines only, in registry order, as one JSON array.
  const nlohmann::json listed = nlohmann::json::parse(Maxflow("--list-backends --json").out);
  std::vector<std::string> names;
  for (const auto& e : listed) {
    names.push_back(e["name"]);
    EXPECT_EQ(e["algorithm"], "maxflow");
    EXPECT_EQ(e["available"], Registry::Global().IsAvailable(e["name"]));
  }
  EXPECT_EQ(names, Registry::Global().Names(Algorithm::kMaxFlow));
}

}  // namespace
}  // namespace mrf
