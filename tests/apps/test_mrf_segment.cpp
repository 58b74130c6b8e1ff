// mrf-segment, run as a program: outputs, the JSON report, and one-line errors for bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "energies/segmentation.h"
#include "energies/synthetic_scene.h"
#include "mrf/io/image.h"
#include "mrf/memory.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf {
namespace {

std::string Segment(const std::string& args) { return test::AppPath("mrf-segment") + " " + args; }

// Exit status non-zero and exactly one stderr line "mrf-segment: error: ..." containing `needle`.
void ExpectOneLineError(const test::CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.rfind("mrf-segment: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
  EXPECT_EQ(r.out, "") << "nothing on stdout after an error";
}

// A small RGB image: a bright disc on a dark background, and scribbles inside and outside it.
void WriteDiscAndScribbles(const std::string& dir, int w, int h) {
  Image img = Image::Filled(w, h, 3);
  Image scribbles = Image::Filled(w, h, 3, 255);  // white = unknown
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const int dx = x - w / 2, dy = y - h / 2;
      const bool inside = dx * dx + dy * dy < (h / 3) * (h / 3);
      for (int c = 0; c < 3; ++c) img.at(x, y, c) = static_cast<std::uint8_t>((inside ? 190 : 50) + (x * 7 + y * 13 + c) % 30);
    }
  for (int x = w / 2 - 3; x <= w / 2 + 3; ++x) {  // red stroke in the disc
    scribbles.at(x, h / 2, 0) = 255;
    scribbles.at(x, h / 2, 1) = 0;
    scribbles.at(x, h / 2, 2) = 0;
  }
  for (int y = 0; y < h; ++y) {  // blue stroke down the left edge
    scribbles.at(1, y, 0) = 0;
    scribbles.at(1, y, 1) = 0;
    scribbles.at(1, y, 2) = 255;
  }
  SavePng(dir + "/disc.png", img);
  SavePng(dir + "/scribbles.png", scribbles);
}

TEST(MrfSegment, DefaultRunReportsAndWritesBothPngs) {
  const std::string dir = test::ScratchDir("mrf_segment_default") + "/out";
  const test::CommandResult r = test::RunCommand(Segment("--output-dir " + dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* field : {"energy:", "flow:", "backend:", "error:", "time:", "mask.png", "overlay.png"})
    EXPECT_NE(r.out.find(field), std::string::npos) << field << " missing from:\n" << r.out;
  const Image mask = LoadImage(dir + "/mask.png");
  const Image overlay = LoadImage(dir + "/overlay.png");
  EXPECT_EQ(mask.width, 512);
  EXPECT_EQ(mask.height, 512);
  EXPECT_EQ(mask.channels, 1);
  EXPECT_EQ(overlay.width, 512);
  EXPECT_EQ(overlay.channels, 3);
  for (std::uint8_t v : mask.pixels) ASSERT_TRUE(v == 0 || v == 255);
}

TEST(MrfSegment, JsonMatchesAnInProcessSolve) {
  const test::CommandResult r = test::RunCommand(Segment("--size 96x64 --seed 5 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);  // throws (fails the test) if not one JSON object
  ASSERT_TRUE(j.is_object());
  for (const char* field : {"energy", "flow", "backend", "solve_ms", "time_ms", "error_percent", "mask", "overlay"})
    EXPECT_TRUE(j.contains(field)) << field;
  EXPECT_TRUE(j["energy"].is_number_integer());
  EXPECT_TRUE(j["flow"].is_number_integer());
  EXPECT_EQ(j["flow"], j["energy"]);
  EXPECT_FALSE(j["backend"].get<std::string>().empty());
  EXPECT_GE(j["solve_ms"].get<double>(), 0.0);
  EXPECT_TRUE(j["mask"].is_null());
  // The program's energy is the minimum of the library's scene model for the same size and seed.
  const SyntheticScene scene = MakeSyntheticScene(96, 64, 5);
  const Result reference = Solve(scene.model);
  ASSERT_TRUE(reference.ok) << reference.message;
  EXPECT_EQ(j["energy"].get<Energy>(), reference.energy);
  EXPECT_NEAR(j["error_percent"].get<double>(), MaskErrorPercent(reference.labels, scene.truth), 1e-9);
  // One thread (the scene's construction and tbb-pr's rounds on it): the same minimum, and the report says so.
  const test::CommandResult one = test::RunCommand(Segment("--size 96x64 --seed 5 --json --backend tbb-pr --threads 1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const nlohmann::json j1 = nlohmann::json::parse(one.out);
  EXPECT_EQ(j1["threads"], 1) << one.out;
  EXPECT_EQ(j1["energy"].get<Energy>(), reference.energy);
  // --solver, the name the other programs give the option, picks the engine as --backend does.
  const test::CommandResult by_solver = test::RunCommand(Segment("--size 96x64 --seed 5 --json --solver boost-bk"));
  ASSERT_EQ(by_solver.exit_code, 0) << by_solver.err;
  const nlohmann::json j2 = nlohmann::json::parse(by_solver.out);
  EXPECT_EQ(j2["backend"], "boost-bk") << by_solver.out;
  EXPECT_EQ(j2["energy"].get<Energy>(), reference.energy);
}

TEST(MrfSegment, ScribblesAreRespected) {
  const std::string dir = test::ScratchDir("mrf_segment_scribbles");
  WriteDiscAndScribbles(dir, 40, 30);
  const test::CommandResult r = test::RunCommand(
      Segment(dir + "/disc.png --scribbles " + dir + "/scribbles.png --connectivity 8 -o " + dir + "/m.png --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["error_percent"].is_null());
  const Image mask = LoadImage(dir + "/m.png");
  for (int x = 40 / 2 - 3; x <= 40 / 2 + 3; ++x) EXPECT_EQ(mask.at(x, 15), 255);
  for (int y = 0; y < 30; ++y) EXPECT_EQ(mask.at(1, y), 0);
  EXPECT_EQ(mask.at(20, 10), 255);  // inside the disc, no seed
  EXPECT_EQ(mask.at(35, 3), 0);     // outside, no seed
}

TEST(MrfSegment, RectangleWithGrabCutRounds) {
  const std::string dir = test::ScratchDir("mrf_segment_rect");
  WriteDiscAndScribbles(dir, 40, 30);
  const test::CommandResult r =
      test::RunCommand(Segment(dir + "/disc.png --rect 5,2,30,26 --model gmm --components 2 --iterations 3 --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["rounds"].is_array());
  EXPECT_GE(j["rounds"].size(), 1u);
  EXPECT_LE(j["rounds"].size(), 3u);
  EXPECT_EQ(j["rounds"].back()["energy"], j["energy"]);
  EXPECT_EQ(j["colour_model"], "gmm");
}

// Output folders are created as needed; for an output that is a dangling symbolic link, the folder created
// is the one the link points into (the link's own folder exists), and the file is written there.
TEST(MrfSegment, OutputThroughADanglingLinkGoesWhereItPoints) {
  const std::string dir = test::ScratchDir("mrf_segment_link");
  std::filesystem::create_symlink("masks/new/mask.png", dir + "/link.png");  // masks/ does not exist yet
  const test::CommandResult r = test::RunCommand(Segment("--size 32x32 -q -o " + dir + "/link.png"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const Image mask = LoadImage(dir + "/masks/new/mask.png");
  EXPECT_EQ(mask.width, 32);
  EXPECT_EQ(mask.height, 32);
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/link.png"));
  // The same for a file of --output-dir: the link's target is taken from the link's folder.
  std::filesystem::create_directories(dir + "/out");
  std::filesystem::create_symlink("../overlays/o.png", dir + "/out/overlay.png");
  const test::CommandResult in_dir = test::RunCommand(Segment("--size 32x32 -q --output-dir " + dir + "/out"));
  ASSERT_EQ(in_dir.exit_code, 0) << in_dir.out << in_dir.err;
  EXPECT_EQ(LoadImage(dir + "/overlays/o.png").channels, 3);
  EXPECT_EQ(LoadImage(dir + "/out/mask.png").channels, 1);
  // --output-dir itself a dangling link, and a folder above -o's file one: their targets are created.
  std::filesystem::create_symlink("made/by/link", dir + "/out-link");
  const test::CommandResult dir_link = test::RunCommand(Segment("--size 32x32 -q --output-dir " + dir + "/out-link"));
  ASSERT_EQ(dir_link.exit_code, 0) << dir_link.out << dir_link.err;
  EXPECT_EQ(LoadImage(dir + "/made/by/link/mask.png").channels, 1);
  std::filesystem::create_symlink("elsewhere", dir + "/up");
  const test::CommandResult above = test::RunCommand(Segment("--size 32x32 -q -o " + dir + "/up/sub/m.png"));
  ASSERT_EQ(above.exit_code, 0) << above.out << above.err;
  EXPECT_EQ(LoadImage(dir + "/elsewhere/sub/m.png").width, 32);
  // A link to a file, where a folder should be, is refused by the name given (as the other programs do).
  std::ofstream(dir + "/plain.txt") << "not a folder";
  std::filesystem::create_symlink("plain.txt", dir + "/file-link");
  ExpectOneLineError(test::RunCommand(Segment("--size 32x32 -q -o " + dir + "/file-link/m.png")),
                     "the mask (-o): '" + dir + "/file-link' is not a folder");
  // A link to a folder's name ("t2/") names no file: refused before any folder is made.
  std::filesystem::create_symlink("t2/", dir + "/dir-link.png");
  ExpectOneLineError(test::RunCommand(Segment("--size 32x32 -q -o " + dir + "/dir-link.png")),
                     "the mask (-o): '" + dir + "/dir-link.png' names a folder, not a file (the link points to '" +
                         dir + "/t2/')");
  EXPECT_FALSE(std::filesystem::exists(dir + "/t2"));
  ExpectOneLineError(test::RunCommand(Segment("--size 32x32 -q -o " + dir + "/new-folder/")),
                     "the mask (-o): '" + dir + "/new-folder/' names a folder, not a file");
  EXPECT_FALSE(std::filesystem::exists(dir + "/new-folder"));
  for (const char* dots : {"/dot-folder/.", "/dot-folder/.."})
    ExpectOneLineError(test::RunCommand(Segment(std::string("--size 32x32 -q -o ") + dir + dots)),
                       "the mask (-o): '" + dir + dots + "' names a folder, not a file");
  EXPECT_FALSE(std::filesystem::exists(dir + "/dot-folder"));
  // Every output is checked before any folder is made: the mask's folder is not left behind.
  ExpectOneLineError(test::RunCommand(Segment("--size 32x32 -q -o " + dir + "/made1/m.png --overlay " + dir + "/made2/")),
                     "the overlay (--overlay): '" + dir + "/made2/' names a folder, not a file");
  EXPECT_FALSE(std::filesystem::exists(dir + "/made1"));
  // Folders that are a loop of links are refused in one line.
  std::filesystem::create_symlink("loop-d2", dir + "/loop-d1");
  std::filesystem::create_symlink("loop-d1", dir + "/loop-d2");
  ExpectOneLineError(test::RunCommand(Segment("--size 32x32 -q --output-dir " + dir + "/loop-d1")),
                     "Too many levels of symbolic links");
  // A loop of links is still refused before the solve, with the message the other programs give.
  std::filesystem::create_symlink("loop-b.png", dir + "/loop-a.png");
  std::filesystem::create_symlink("loop-a.png", dir + "/loop-b.png");
  ExpectOneLineError(test::RunCommand(Segment("--size 32x32 -q -o " + dir + "/loop-a.png")),
                     "the mask (-o): cannot write '" + dir + "/loop-a.png': Too many levels of symbolic links");
}

// A newline in a path shows as '?' on the report, progress and input lines, and the files keep their names.
TEST(MrfSegment, PathsWithNewlinesStayOnTheirReportLines) {
  const std::string dir = test::ScratchDir("mrf_segment_newline");
  WriteDiscAndScribbles(dir, 40, 30);
  const std::string image = dir + "/di\nsc.png", scribbles = dir + "/scrib\nbles.png";
  std::filesystem::rename(dir + "/disc.png", image);
  std::filesystem::rename(dir + "/scribbles.png", scribbles);
  const std::string mask = dir + "/ma\nsk.png", overlay = dir + "/over\nlay.png", model = dir + "/mo\ndel.mrf";
  const test::CommandResult r = test::RunCommand(Segment("\"" + image + "\" --scribbles \"" + scribbles + "\" -o \"" +
                                                         mask + "\" --overlay \"" + overlay + "\" --save-model \"" +
                                                         model + "\""));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("input:       " + dir + "/di?sc.png, scribbles " + dir + "/scrib?bles.png ("),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote:       " + dir + "/ma?sk.png (mask, white = foreground)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote:       " + dir + "/over?lay.png (overlay)\n"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("mrf-segment: model saved to " + dir + "/mo?del.mrf\n"), std::string::npos) << r.err;
  test::ExpectNoLineSplitByPaths(r, {image, scribbles, mask, overlay, model});
  for (const std::string& written : {mask, overlay, model})
    EXPECT_TRUE(std::filesystem::exists(written)) << written;  // the file keeps its real name
}

TEST(MrfSegment, HelpListsEveryOption) {
  const test::CommandResult r = test::RunCommand(Segment("--help"));
  ASSERT_EQ(r.exit_code, 0);
  for (const char* option : {"--scribbles", "--rect", "--size", "--seed", "--model", "--bins", "--components",
                             "--iterations", "--lambda", "--sigma", "--connectivity", "--backend", "--output-dir",
                             "--output", "--overlay", "--json", "--quiet", "--threads", "boost-bk"})
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
}

TEST(MrfSegment, UnreadableImage) {
  ExpectOneLineError(test::RunCommand(Segment("/nonexistent/photo.png --rect 1,1,2,2")), "/nonexistent/photo.png");
  const std::string dir = test::ScratchDir("mrf_segment_unreadable");
  std::ofstream(dir + "/text.png") << "not an image at all";
  ExpectOneLineError(test::RunCommand(Segment(dir + "/text.png --rect 1,1,2,2")), "text.png");
}

TEST(MrfSegment, TruncatedPng) {
  const std::string dir = test::ScratchDir("mrf_segment_truncated");
  WriteDiscAndScribbles(dir, 40, 30);
  std::ifstream in(dir + "/disc.png", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir + "/cut.png", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  ExpectOneLineError(test::RunCommand(Segment(dir + "/cut.png --scribbles " + dir + "/scribbles.png")), "cut.png");
}

TEST(MrfSegment, ScribblesOfTheWrongSize) {
  const std::string dir = test::ScratchDir("mrf_segment_wrong_size");
  WriteDiscAndScribbles(dir, 40, 30);
  SavePng(dir + "/small.png", Image::Filled(20, 30, 3, 255));
  ExpectOneLineError(test::RunCommand(Segment(dir + "/disc.png --scribbles " + dir + "/small.png")), "20x30");
}

// A scene the machine cannot hold is refused before it is made, with the library's figures (the run
// used to spend minutes making it, then ended in "out of memory" or was killed).
TEST(MrfSegment, SizesBeyondTheMemoryAreRefusedFirst) {
  EXPECT_GT(SegmentationBytes(100, 100, "boost-bk"), SegmentationBytes(100, 100, "cpu-bk"));
  EXPECT_GT(SegmentationBytes(100, 100, "cpu-bk"), SegmentationBytes(100, 100, "tbb-pr"));
  EXPECT_NO_THROW(CheckSegmentationFits(64, 64, "auto"));
  int refused = 0;
  for (const char* backend : {"cpu-bk", "boost-bk"}) {
    const double bytes = SegmentationBytes(32768, 32768, backend);
    if (bytes <= UsableMemoryBytes()) continue;  // this machine holds it
    const test::CommandResult r = test::RunCommand(Segment(std::string("--size 32768x32768 -q --backend ") + backend));
    ExpectOneLineError(r, MemoryShortfall(bytes, "the image, models and graph of 32768x32768 pixels"));
    ++refused;
  }
  if (refused == 0) GTEST_SKIP() << "this machine holds a 32768x32768 segmentation with either backend";
}

TEST(MrfSegment, UnknownBackend) {
  ExpectOneLineError(test::RunCommand(Segment("--size 32x32 --backend no-such-engine")), "no-such-engine");
}

TEST(MrfSegment, BadRectangles) {
  const std::string dir = test::ScratchDir("mrf_segment_bad_rect");
  WriteDiscAndScribbles(dir, 40, 30);
  ExpectOneLineError(test::RunCommand(Segment(dir + "/disc.png --rect 1,2,3")), "1,2,3");
  ExpectOneLineError(test::RunCommand(Segment(dir + "/disc.png --rect 30,2,20,5")), "does not fit");
  ExpectOneLineError(test::RunCommand(Segment(dir + "/disc.png --rect 0,0,40,30")), "whole image");
}

TEST(MrfSegment, OtherBadCommandLines) {
  ExpectOneLineError(test::RunCommand(Segment("--size 2x2")), "--size");
  ExpectOneLineError(test::RunCommand(Segment("--model kmeans")), "kmeans");
  ExpectOneLineError(test::RunCommand(Segment("/nonexistent.png")), "--scribbles");
}

}  // namespace
}  // namespace mrf
