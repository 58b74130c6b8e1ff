// Bad input to the programs, class by class (docs/errors.md lists them, with the DIMACS cases of
// test_mrf_maxflow.cpp and the library cases of test_bad_input.cpp): each case must end with exit
// code 1 (bad input) or 2 (bad command line) and, as the last line on stderr, exactly
// "PROGRAM: error: MESSAGE", the only error line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "mrf/config.h"
#include "mrf/io/image.h"
#include "mrf/io/model_file.h"
#include "mrf/registry.h"
#include "support/test_support.h"

namespace mrf {
namespace {

struct Case {
  const char* what;     // the class, as docs/errors.md names it
  const char* program;  // under test::AppPath()
  std::string args;     // $D stands for the scratch folder with the sample files
  int exit_code;
  std::string message;  // after "PROGRAM: error: "
};

std::string Expand(std::string text, const std::string& dir) {
  for (std::size_t at; (at = text.find("$D")) != std::string::npos;) text.replace(at, 2, dir);
  return text;
}

void WriteFile(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// Sample inputs: good and bad images, tables and models.
std::string MakeSamples() {
  const std::string d = test::ScratchDir("bad_input_apps");
  WriteFile(d + "/rgb.ppm", "P6\n8 6\n255\n" + std::string(8 * 6 * 3, '\x40'));
  WriteFile(d + "/rgb9.ppm", "P6\n9 6\n255\n" + std::string(9 * 6 * 3, '\x40'));
  WriteFile(d + "/grey.pgm", "P5\n8 6\n255\n" + std::string(8 * 6, '\x40'));
  WriteFile(d + "/deep.pgm", "P5\n8 6\n65535\n" + std::string(8 * 6 * 2, '\x02'));  // 16-bit samples
  WriteFile(d + "/grey16.pgm", "P5\n16 12\n255\n" + std::string(16 * 12, '\x40'));
  WriteFile(d + "/grey17.pgm", "P5\n17 12\n255\n" + std::string(17 * 12, '\x40'));
  WriteFile(d + "/short.pgm", "P5\n8 6\n255\n" + std::string(10, '\x40'));
  WriteFile(d + "/empty.png", "");
  WriteFile(d + "/text.png", "hello\n");
  // A PNG whose second chunk, CRCs intact, is an unknown critical one named "A\nBC": stb quotes the name.
  const std::string signature = "\x89PNG\r\n\x1a\n";
  const std::string ihdr = test::PngChunk("IHDR", std::string("\0\0\0\x10\0\0\0\x0c\x08\x02\0\0\0", 13));
  WriteFile(d + "/chunk.png", signature + ihdr + test::PngChunk("A\nBC", "") + test::PngChunk("IEND", ""));
  // The same with a damaged IHDR: its CRC fails.
  std::string bad_ihdr = ihdr;
  bad_ihdr[10] ^= 0x01;
  WriteFile(d + "/crc.png", signature + bad_ihdr + test::PngChunk("IEND", ""));
  WriteFile(d + "/t3.txt", "0 1 1\n");
  WriteFile(d + "/tx.txt", "0 1 x 0\n");
  WriteFile(d + "/tneg.txt", "0 -1 1 0\n");
  WriteFile(d + "/tbig.txt", "+0 1\n1 99999999999999999999\n");  // "+0": a sign is read as streams read it
  const char newer[] = "MRFMODEL\x03\0\0\0 and then anything";  // version 3
  WriteFile(d + "/model.mrf", std::string(newer, sizeof newer - 1));
  Model m;
  m.topology = Topology::Grid2D(4, 3);
  m.num_labels = 3;
  m.unary.assign(36, 1);
  SaveModel(m, d + "/three.mrf");
  std::ifstream in(d + "/three.mrf", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  WriteFile(d + "/truncated.mrf", bytes.substr(0, bytes.size() - 9));
  std::string damaged = bytes;
  damaged[damaged.size() / 2] ^= 0x10;
  WriteFile(d + "/damaged.mrf", damaged);
  std::filesystem::create_directories(d + "/folder.png");
  // Another name for three.mrf, and a link to a file no one has written yet.
  std::filesystem::remove(d + "/hard.mrf");
  std::filesystem::create_hard_link(d + "/three.mrf", d + "/hard.mrf");
  std::filesystem::remove(d + "/dangling.png");
  std::filesystem::create_symlink("not-yet.png", d + "/dangling.png");
  std::filesystem::remove(d + "/astray.png");
  std::filesystem::create_symlink("no/such/out.png", d + "/astray.png");  // into a folder that is missing
  for (const char* name : {"/loop-a.png", "/loop-b.png"}) std::filesystem::remove(d + name);
  std::filesystem::create_symlink("loop-b.png", d + "/loop-a.png");  // two links naming each other
  std::filesystem::create_symlink("loop-a.png", d + "/loop-b.png");
  return d;
}

const std::string kPerSecond = "must be a finite number >= 0";

std::vector<Case> Cases() {
  return {
      // ---- Images: missing, unreadable, empty, wrong format, truncated ----
      {"image missing", "mrf-stereo", "$D/missing.png $D/rgb.ppm", 1,
       "cannot open image '$D/missing.png': No such file or directory"},
      {"image unreadable (a folder)", "mrf-stereo", "$D/folder.png $D/rgb.ppm", 1,
       "cannot read image '$D/folder.png': Is a directory"},
      {"image empty", "mrf-restore", "$D/empty.png", 1, "cannot read image '$D/empty.png': file is empty"},
      {"image of another format", "mrf-segment", "$D/text.png --rect 1,1,2,2", 1,
       "cannot read image '$D/text.png': not a PNG, JPEG or binary PGM/PPM image"},
      {"image truncated", "mrf-stereo", "$D/short.pgm $D/rgb.ppm", 1,
       "cannot read image '$D/short.pgm': file is truncated (10 of 48 pixel bytes)"},
      // ---- Images: wrong size, wrong channels ----
      {"stereo pair of two sizes", "mrf-stereo", "$D/rgb.ppm $D/rgb9.ppm --labels 4", 1,
       "left and right images differ in size: left is 8x6, right is 9x6"},
      {"stereo pair grey and colour", "mrf-stereo", "$D/grey.pgm $D/rgb.ppm --labels 4", 1,
       "left and right images differ in colour: left is 8x6 grey, right is 8x6 RGB"},
      {"stereo preset on grey images", "mrf-stereo", "$D/grey.pgm $D/grey.pgm --preset tsukuba", 1,
       "stereo preset 'tsukuba' is defined on colour (RGB) images, but the images are grey (8x6 grey)"},
      {"stereo: more disparities than columns", "mrf-stereo", "$D/rgb.ppm $D/rgb.ppm --labels 9", 1,
       "stereo: 9 disparity labels but the images are only 8 pixels wide (labels must not exceed the width)"},
      {"stereo ground truth of another size", "mrf-stereo", "$D/rgb.ppm $D/rgb.ppm --labels 4 --gt $D/rgb9.ppm", 1,
       "ground truth '$D/rgb9.ppm' is 9x6 but the images are 8x6"},
      {"restoration mask of another size", "mrf-restore", "$D/grey16.pgm --mask $D/grey17.pgm --levels 8", 1,
       "restoration: the mask is 17x12 but the image is 16x12"},
      {"restoration clean image of another size", "mrf-restore", "$D/grey16.pgm --clean $D/grey17.pgm --levels 8", 1,
       "clean image '$D/grey17.pgm' is 17x12 but the image is 16x12"},
      {"segmentation scribbles of another size", "mrf-segment", "$D/rgb.ppm --scribbles $D/rgb9.ppm", 1,
       "scribbles '$D/rgb9.ppm' are 9x6 but the image is 8x6"},
      {"segmentation scribbles without foreground", "mrf-segment", "$D/rgb.ppm --scribbles $D/rgb.ppm", 1,
       "scribbles '$D/rgb.ppm' mark no foreground (red) pixel"},
      {"segmentation rectangle outside the image", "mrf-segment", "$D/rgb.ppm --rect 1,1,200,2", 1,
       "rectangle 1,1,200,2 does not fit in the 8x6 image"},
      {"segmentation rectangle covering the image", "mrf-segment", "$D/rgb.ppm --rect 0,0,8,6", 1,
       "rectangle 0,0,8,6 covers the whole image: no background pixels to learn from"},
      // ---- Smoothness tables ----
      {"table missing", "mrf-stereo", "--smoothness table --table $D/none.txt --labels 2", 1,
       "cannot open smoothness table '$D/none.txt': No such file or directory"},
      {"table of the wrong size", "mrf-stereo", "--smoothness table --table $D/t3.txt --labels 2", 1,
       "smoothness table '$D/t3.txt' has 3 entries, expected 2 x 2"},
      {"table entry not an integer", "mrf-stereo", "--smoothness table --table $D/tx.txt --labels 2", 1,
       "smoothness table '$D/tx.txt': entry 3 (V(1,0)) 'x' is not an integer"},
      {"table entry negative", "mrf-restore", "--smoothness table --table $D/tneg.txt --levels 2", 1,
       "smoothness table '$D/tneg.txt': entry 2 (V(0,1)) = -1 is outside 0..2147483647"},
      {"table entry past 64 bits", "mrf-stereo", "--smoothness table --table $D/tbig.txt --labels 2", 1,
       "smoothness table '$D/tbig.txt': entry 4 (V(1,1)) = 99999999999999999999 is outside 0..2147483647"},
      {"table unreadable (a folder)", "mrf-stereo", "--smoothness table --table $D/folder.png --labels 2", 1,
       "cannot read smoothness table '$D/folder.png': Is a directory"},
      // ---- Model files ----
      {"model file missing", "mrf-solve", "$D/missing.mrf", 1,
       "cannot open model file '$D/missing.mrf': No such file or directory"},
      {"model file unreadable (a folder)", "mrf-solve", "$D/folder.png", 1,
       "cannot read model file '$D/folder.png': Is a directory"},
      {"model file of another format", "mrf-solve", "$D/rgb.ppm", 1,
       "$D/rgb.ppm: not an mrf model file (bad magic)"},
      {"model file truncated", "mrf-solve", "$D/truncated.mrf", 1,
       "$D/truncated.mrf: checksum mismatch (file is corrupt or truncated)"},
      {"model file damaged", "mrf-bench", "--suite models --model $D/damaged.mrf", 1,
       "$D/damaged.mrf: checksum mismatch (file is corrupt or truncated)"},
      {"model file of another version", "mrf-solve", "$D/model.mrf", 1,
       "$D/model.mrf: unsupported model file version 3 (this build reads versions 1 to 2)"},
      // ---- Models: values out of range, overflow, solver requirements ----
      {"negative smoothness weight", "mrf-stereo", "--lambda -3 --synthetic-size 16 --labels 4", 1,
       "stereo: lambda must be non-negative (got -3)"},
      {"negative restoration weight", "mrf-restore", "--lambda -1 --synthetic-size 16 --levels 8", 1,
       "restoration: lambda must be non-negative (got -1)"},
      {"negative segmentation weight", "mrf-segment", "--lambda -1 --size 16", 1,
       "pairwise weight lambda must be a finite number >= 0 (got -1)"},
      {"NaN segmentation weight", "mrf-segment", "--lambda nan --size 16", 1,
       "pairwise weight lambda must be a finite number >= 0 (got nan)"},
      {"infinite segmentation weight", "mrf-segment", "--lambda 1e400 --size 16", 1,
       "pairwise weight lambda must be a finite number >= 0 (got inf)"},
      {"negative contrast scale", "mrf-segment", "--sigma -1 --size 16", 1,
       "contrast sigma must be a finite number >= 0 (0 = estimate from the image; got -1)"},
      {"32-bit pairwise term overflow", "mrf-stereo", "--lambda 2000000000 --synthetic-size 16 --labels 4", 1,
       "pairwise term overflows 32 bits: edge weight 2 x lambda 2000000000 x distance 2 > 2147483647"},
      {"32-bit pairwise term overflow", "mrf-restore", "--levels 256 --lambda 2000000000 --synthetic-size 16", 1,
       "pairwise term overflows 32 bits: edge weight 1 x lambda 2000000000 x distance 200 > 2147483647"},
      {"non-metric smoothness for expansion", "mrf-stereo",
       "--smoothness quadratic --vmax 100 --synthetic-size 16 --labels 4", 1,
       "smoothness 'quadratic' is not a metric (triangle inequality fails: V(0,2) > V(0,1) + V(1,2)): "
       "alpha-expansion needs one; add --truncate to truncate non-submodular terms, or use --algorithm swap, bp or "
       "icm"},
      {"max-flow on a multilabel model", "mrf-solve", "$D/three.mrf --solver cpu-bk", 1,
       "backend 'cpu-bk' cannot solve this problem: max-flow solves two-label models only"},
      {"max-flow on a multilabel model", "mrf-stereo", "--algorithm maxflow --synthetic-size 16 --labels 4", 1,
       "--algorithm maxflow solves two-label problems only (this one has 4 labels: use expansion, swap, icm, bp or auto)"},
      // ---- Options: unknown names ----
      {"unknown solver", "mrf-solve", "$D/three.mrf --solver fast", 1,
       "unknown backend 'fast' (known: cpu-bk, boost-bk, tbb-pr, cuda-pr, cpu-expansion, cuda-expansion, cpu-swap, "
       "cuda-swap, cpu-icm, tbb-bp, cuda-bp)"},
      {"unknown algorithm", "mrf-solve", "$D/three.mrf --algorithm fast", 1,
       "unknown algorithm 'fast' (expected one of: auto, maxflow, expansion, swap, icm, bp)"},
      {"unknown device", "mrf-stereo", "--device gpu", 1, "unknown device 'gpu' (expected one of: auto, cpu, cuda)"},
      {"unknown label order", "mrf-restore", "--label-order shuffled", 1,
       "unknown label order 'shuffled' (expected one of: sequential, random, frequent)"},
      {"label order frequent for swap", "mrf-restore", "--algorithm swap --label-order frequent", 1,
       "label order frequent orders labels, and swap moves are label pairs: use sequential or random"},
      {"unknown start", "mrf-restore", "--start wta", 1, "unknown start 'wta' (expected one of: zero, bp)"},
      {"unknown BP schedule", "mrf-stereo", "--bp-schedule zigzag", 1,
       "options.bp.schedule must be auto, bpm, sync or tiled (got 'zigzag')"},
      {"unknown max-flow engine for moves", "mrf-solve", "$D/three.mrf --solver cpu-expansion --maxflow-backend nope",
       1,
       "max-flow engine for the moves: unknown backend 'nope' (known: cpu-bk, boost-bk, tbb-pr, cuda-pr, "
       "cpu-expansion, cuda-expansion, cpu-swap, cuda-swap, cpu-icm, tbb-bp, cuda-bp)"},
      {"wrong kind of max-flow engine", "mrf-segment", "--backend cpu-icm --size 16", 1,
       "backend 'cpu-icm' runs icm, not maxflow (maxflow backends: cpu-bk, boost-bk, tbb-pr, cuda-pr)"},
      {"unknown preset", "mrf-stereo", "--preset middlebury", 1,
       "unknown stereo preset 'middlebury' (expected tsukuba|venus|teddy)"},
      {"unknown data cost", "mrf-stereo", "--data-cost cubic", 1, "unknown data cost 'cubic' (expected absolute or squared)"},
      {"unknown smoothness kind", "mrf-restore", "--smoothness cubic", 1,
       "unknown smoothness kind 'cubic' (expected potts, linear, quadratic or table)"},
      {"unknown colour model", "mrf-segment", "--model neural", 1, "unknown colour model 'neural' (expected histogram or gmm)"},
      {"unknown suite", "mrf-bench", "--suite fastest", 1,
       "unknown suite 'fastest' (expected binary|bp|expansion|gpuexpansion|models|multilabel|pushrelabel or all)"},
      {"solver of another suite", "mrf-bench", "--suite binary --solvers cpu-icm", 1,
       "--solvers: 'cpu-icm' is not a max-flow solver (max-flow solvers: cpu-bk, boost-bk, tbb-pr, cuda-pr, "
       "kolmogorov-bk)"},
      {"solver list naming none", "mrf-bench", "--suite binary --solvers ,,", 1, "--solvers ',,' names no solver"},
      {"models suite without models", "mrf-bench", "--suite models", 1,
       "the models suite replays saved models: name them with --model FILE or --models DIR"},
      {"unknown tuning name", "mrf-bench", "--suite pushrelabel --tuning speed=9", 1,
       "push-relabel tuning: unknown name 'speed' (known: tile_x, tile_y, tile3d_x, tile3d_y, tile3d_z, "
       "local_iterations, resolve_local_iterations, rounds_per_global_relabel, resolve_push_rounds, "
       "bfs_check_every, cuda_graphs, fused_bfs_start, incremental_relabel, wave_relabel, wave_push, "
       "local_resolve, repair_violations, settle_hops, settle_passes, max_push_rounds, trace)"},
      {"unknown option", "mrf-solve", "$D/three.mrf --fast", 2, "The following argument was not expected: --fast"},
      // ---- Options: numbers out of range ----
      {"iterations out of range", "mrf-stereo", "--iterations 0", 2, "--iterations: Value 0 not in range 1 to 1000000"},
      {"negative thread count", "mrf-restore", "--threads -1", 2, "--threads: Value -1 not in range 0 to 65536"},
      {"negative time limit", "mrf-solve", "$D/three.mrf --time-limit -1", 2, "--time-limit: " + kPerSecond + " (got '-1')"},
      {"NaN time limit", "mrf-stereo", "--time-limit nan", 2, "--time-limit: " + kPerSecond + " (got 'nan')"},
      {"infinite noise", "mrf-restore", "--noise inf", 2, "--noise: " + kPerSecond + " (got 'inf')"},
      {"negative seed", "mrf-segment", "--seed -1", 2, "--seed: " + kPerSecond + " (got '-1')"},
      {"negative bad-pixel threshold", "mrf-stereo", "--bad-threshold -1", 2, "--bad-threshold: " + kPerSecond + " (got '-1')"},
      {"output scale out of range", "mrf-stereo", "--output-scale 300", 2, "--output-scale: Value 300 not in range 1 to 255"},
      {"negative data truncation", "mrf-restore", "--data-truncation -5", 2, "--data-truncation: " + kPerSecond + " (got '-5')"},
      {"levels out of range", "mrf-restore", "--levels 300", 2, "--levels: Value 300 not in range 2 to 256"},
      {"connectivity out of range", "mrf-segment", "--connectivity 6", 2, "--connectivity: 6 not in {4,8}"},
      {"scene size out of range", "mrf-segment", "--size 2x2", 1,
       "bad --size '2x2' (expected WxH with 4 <= W, H <= 32768, e.g. 512x512)"},
      {"malformed rectangle", "mrf-segment", "$D/rgb.ppm --rect a,b", 1,
       "bad rectangle 'a,b' (expected x,y,w,h, e.g. 40,30,200,150)"},
      {"problem size out of range", "mrf-bench", "--suite binary --sizes 2", 1, "--sizes: side 2 is outside 4..16384"},
      {"repeat out of range", "mrf-bench", "--suite binary --repeat 0", 2, "--repeat: Value 0 not in range 1 to 1000"},
      {"integer beyond its type", "mrf-stereo", "--lambda 99999999999999999999", 2,
       "--lambda: '99999999999999999999' is not an integer, or is out of its range"},
      {"word for a number", "mrf-stereo", "--labels many", 2, "--labels: 'many' is not an integer, or is out of its range"},
      {"hexadecimal number", "mrf-segment", "--size 16 --lambda 0x1p3", 2, "--lambda: must be a decimal number (got '0x1p3')"},
      {"option given twice", "mrf-restore", "--lambda 3 --lambda 4", 2,
       "--lambda: takes one value but got 2 (given more than once?)"},
      {"labels out of range", "mrf-stereo", "--labels 0", 1, "stereo: number of labels must be at least 1 (got 0)"},
      // ---- Options: conflicting or incomplete ----
      {"LEFT without RIGHT", "mrf-stereo", "$D/rgb.ppm", 1, "LEFT given without RIGHT (give both images, or neither)"},
      {"option needing images", "mrf-stereo", "--gt $D/rgb.ppm", 1,
       "--gt needs LEFT and RIGHT images (the synthetic pair has its own)"},
      {"option needing images", "mrf-stereo", "--downsample 2", 1,
       "--downsample needs LEFT and RIGHT images (use --synthetic-size)"},
      {"option needing an image", "mrf-restore", "--mask $D/grey16.pgm --synthetic-size 16", 1,
       "--mask needs an IMAGE (the generated picture has its own holes)"},
      {"table without --smoothness table", "mrf-stereo", "--table $D/t3.txt", 1,
       "--table is only used with --smoothness table"},
      {"--smoothness table without a table", "mrf-restore", "--smoothness table", 1,
       "--smoothness table needs --table FILE"},
      {"image without seeds", "mrf-segment", "$D/rgb.ppm", 1, "IMAGE needs seeds: --scribbles FILE or --rect x,y,w,h"},
      {"both kinds of seeds", "mrf-segment", "$D/rgb.ppm --rect 1,1,2,2 --scribbles $D/rgb.ppm", 1,
       "give --scribbles or --rect, not both"},
      {"seeds without an image", "mrf-segment", "--rect 1,1,2,2", 1, "--scribbles and --rect need an IMAGE"},
      {"scene options with an image", "mrf-segment", "$D/rgb.ppm --rect 1,1,2,2 --size 64", 1,
       "--size and --seed apply to the synthetic scene only (no IMAGE)"},
      {"no model given", "mrf-solve", "", 1, "no MODEL file given (see --help)"},
      // ---- Outputs that cannot be written ----
      // Outputs are checked before the solve, which may take hours.
      {"output folder missing", "mrf-stereo", "--synthetic-size 16 --labels 4 -o $D/no/such/out.png", 1,
       "-o: folder '$D/no/such' does not exist"},
      {"model output folder missing", "mrf-restore", "--synthetic-size 16 --levels 4 --save-model $D/no/m.mrf", 1,
       "--save-model: folder '$D/no' does not exist"},
      {"labels output folder missing", "mrf-solve", "$D/three.mrf --solver cpu-icm --labels $D/no/labels.txt", 1,
       "--labels: folder '$D/no' does not exist"},
      {"output folder that is a file", "mrf-restore", "--synthetic-size 16 --levels 4 -o $D/grey.pgm/out.png", 1,
       "-o: '$D/grey.pgm' is not a folder"},
      {"output folder that is a file, where folders are made", "mrf-segment", "--size 16 -o $D/grey.pgm/sub/m.png", 1,
       "the mask (-o): '$D/grey.pgm' is not a folder"},
      {"output through a link into a missing folder", "mrf-stereo", "--synthetic-size 16 --labels 4 -o $D/astray.png",
       1, "-o: folder '$D/no/such' does not exist (the link '$D/astray.png' points into it)"},
      {"output through a loop of links", "mrf-restore", "--synthetic-size 16 --levels 4 -o $D/loop-a.png", 1,
       "-o: cannot write '$D/loop-a.png': Too many levels of symbolic links"},
      {"output named as a folder", "mrf-stereo", "--synthetic-size 16 --labels 4 -o $D/new/", 1,
       "-o: '$D/new/' names a folder, not a file"},
      {"output named as a folder, by '..'", "mrf-solve", "$D/three.mrf --solver cpu-icm --labels $D/new/..", 1,
       "--labels: '$D/new/..' names a folder, not a file"},
      {"output a folder", "mrf-restore", "--synthetic-size 16 --levels 4 -o $D", 1, "-o: '$D' is a folder, not a file"},
      // An output never overwrites an input, and two outputs never share a file (devices may repeat).
      {"output over an input", "mrf-stereo", "$D/rgb.ppm $D/rgb.ppm --labels 2 -o $D/rgb.ppm", 1,
       "-o: '$D/rgb.ppm' is also LEFT: the output would overwrite it"},
      {"output over an input, another spelling", "mrf-solve", "$D/three.mrf --labels $D/../bad_input_apps/three.mrf", 1,
       "--labels: '$D/../bad_input_apps/three.mrf' is also MODEL: the output would overwrite it"},
      {"output over an input's hard link", "mrf-solve", "$D/hard.mrf --labels $D/three.mrf", 1,
       "--labels: '$D/three.mrf' is also MODEL: the output would overwrite it"},
      {"outputs meeting behind a link", "mrf-restore",
       "--synthetic-size 16 --levels 4 -o $D/dangling.png --save-model $D/not-yet.png", 1,
       "--save-model: '$D/not-yet.png' is also -o: give each output its own file"},
      {"benchmark rows over a model", "mrf-bench", "--suite models --model $D/three.mrf --json $D/three.mrf", 1,
       "--json: '$D/three.mrf' is also --model: the output would overwrite it"},
      {"benchmark rows over a model of a folder", "mrf-bench", "--suite models --models $D --json $D/three.mrf", 1,
       "--json: '$D/three.mrf' is also --models: the output would overwrite it"},
      {"two outputs in one file", "mrf-restore", "--synthetic-size 16 --levels 4 -o $D/same.png --save-model $D/same.png",
       1, "--save-model: '$D/same.png' is also -o: give each output its own file"},
      {"JSON output folder missing", "mrf-bench", "--suite binary --json $D/no/rows.json", 1,
       "--json: folder '$D/no' does not exist"},
      {"plot output a folder", "mrf-bench", "--suite multilabel --plot $D", 1, "--plot: '$D' is a folder, not a file"},
      {"plot for a suite that draws none", "mrf-bench", "--suite binary --plot $D/p.svg", 1,
       "--plot applies to the multilabel suite, not binary"},
      {"sizes for a suite of fixed problems", "mrf-bench", "--suite bp --sizes 64", 1,
       "--sizes applies to the binary or pushrelabel suite, not bp"},
      {"disparity map past 8 bits", "mrf-stereo", "--synthetic-size 32 --labels 8 --output-scale 100 -o $D/os.png", 1,
       "-o: disparity 7 x scale 100 passes 255, the largest grey value of the 8-bit map (lower --output-scale, or use "
       "--colour)"},
      {"16-bit ground truth", "mrf-stereo", "$D/rgb.ppm $D/rgb.ppm --labels 2 --gt $D/deep.pgm", 1,
       "cannot read image '$D/deep.pgm': it stores samples up to 65535, which would be rescaled to 0..255; values "
       "such as disparities must be stored as 8-bit samples"},
      // Options that would be ignored in the run asked for are refused instead.
      {"output scale without an output", "mrf-stereo", "--synthetic-size 16 --labels 4 --output-scale 10", 2,
       "--output-scale requires --output"},
      {"truncation of a Potts smoothness", "mrf-restore", "--synthetic-size 16 --levels 4 --smoothness potts --vmax 5",
       1, "--vmax applies to linear and quadratic smoothness, not potts"},
      {"mixture size for histograms", "mrf-segment", "--size 16 --components 3", 1, "--components applies to --model gmm"},
      {"seed of the generated picture with a picture", "example-custom-energy", "$D/grey.pgm --seed 5", 2,
       "IMAGE excludes --seed"},
      // An empty path is a mistake, not "not given" (which would quietly run the built-in input).
      {"empty input path", "mrf-restore", "''", 2, "IMAGE: is empty"},
      {"empty output path", "mrf-stereo", "--synthetic-size 16 --labels 4 -o ''", 2, "--output: is empty"},
      // The report itself must reach stdout: a full device there is an error, not exit 0.
      {"report on a full device", "mrf-solve", "$D/three.mrf --solver cpu-icm --json >/dev/full", 1,
       "cannot write to standard output: No space left on device"},
      // Writes are checked up to closing the file: a full device is an error, not a short file.
      {"PNG output on a full device", "mrf-stereo", "--synthetic-size 16 --labels 4 -o /dev/full", 1,
       "cannot write PNG '/dev/full': No space left on device"},
      {"labels output on a full device", "mrf-solve", "$D/three.mrf --solver cpu-icm --labels /dev/full", 1,
       "cannot write labels to '/dev/full': No space left on device"},
      // A device that never ends is read up to a bound, and a model file no further than its magic.
      {"endless model input", "mrf-solve", "/dev/zero", 1, "/dev/zero: not an mrf model file (bad magic)"},
      {"endless image input", "mrf-restore", "/dev/zero", 1,
       "cannot read image '/dev/zero': not a regular file, and longer than 1 GiB"},
      // Integers are decimal: CLI11 alone would read 010 as 8 and 0x10 as 16, and clamp past 64 bits.
      {"octal-looking integer", "mrf-stereo", "--synthetic-size 16 --labels 4 --lambda 010", 2,
       "--lambda: must be a decimal integer without leading zeros (got '010')"},
      {"hexadecimal integer", "mrf-restore", "--synthetic-size 16 --levels 0x10", 2,
       "--levels: must be a decimal integer without leading zeros (got '0x10')"},
      {"integer beyond 64 bits", "mrf-segment", "--size 16 --seed 18446744073709551616", 2,
       "--seed: out of range (got '18446744073709551616')"},
      {"infinite ground-truth scale", "mrf-stereo", "--synthetic-size 16 --labels 4 --gt-scale inf", 2,
       "--gt-scale: must be a finite number >= 0 (got 'inf')"},
      {"benchmark with nothing to measure", "mrf-bench", "--suite expansion --quick --data-dir $D", 1,
       "the expansion suite measured nothing (its skipped lines say why)"},
      {"data folder missing", "mrf-bench", "--suite expansion --quick --data-dir $D/no", 2,
       "--data-dir: Directory does not exist: $D/no"},
      {"PNG chunk with a bad CRC", "mrf-stereo", "$D/crc.png $D/crc.png", 1,
       "cannot read image '$D/crc.png': PNG chunk 'IHDR' at byte 8 fails its CRC check (the file is damaged)"},
      {"PNG chunk name with a line break", "mrf-restore", "$D/chunk.png", 1,
       "cannot read image '$D/chunk.png': corrupt or truncated PNG data (stb_image: A?BC PNG chunk not known)"},
      {"huge segmentation weight", "mrf-segment", "--size 16 --lambda 1e300", 1,
       "contrast weight for squared difference 0 = 1e+300 x scale 100 does not fit a 32-bit cost"},
      {"contrast scale whose square underflows", "mrf-segment", "--size 16 --sigma 1e-300", 1,
       "contrast sigma 1e-300 is too small (its square is 0)"},
      {"synthetic-pair option with images", "mrf-stereo", "$D/rgb.ppm $D/rgb.ppm --labels 4 --noise 3", 1,
       "--synthetic-size and --noise apply to the synthetic pair only (no LEFT and RIGHT)"},
      {"generated-picture option with an image", "mrf-restore", "$D/grey.pgm --levels 4 --holes 2", 1,
       "--synthetic-size, --noise and --holes apply to the generated picture only (no IMAGE)"},
      {"option of another suite", "mrf-bench", "--suite binary --problems tsukuba", 1,
       "--problems applies to the gpuexpansion suite, not binary"},
      {"cycle limit for a suite without cycles", "mrf-bench", "--suite pushrelabel --cycles 1", 1,
       "--cycles applies to the gpuexpansion suite, not pushrelabel"},
      {"failed solve with --json", "mrf-solve", "$D/three.mrf --solver cpu-bk --json", 1,
       "backend 'cpu-bk' cannot solve this problem: max-flow solves two-label models only"},
  };
}

TEST(BadInputApps, EveryCaseEndsWithItsOneLineError) {
  const std::string dir = MakeSamples();
  for (const Case& c : Cases()) {
    const std::string args = Expand(c.args, dir), message = Expand(c.message, dir);
    SCOPED_TRACE(std::string(c.what) + ": " + c.program + " " + args);
    // Quiet where the program has it: example-custom-energy prints no progress and has no -q.
    const std::string program = c.program;
    const std::string quiet =
        program == "example-custom-energy" ? "" : program == "mrf-solve" ? " --quiet" : " -q";
    const test::CommandResult r = test::RunCommand(test::AppPath(program) + " " + args + quiet);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
    std::string last = r.err;
    if (!last.empty() && last.back() == '\n') last.pop_back();
    const std::size_t line_start = last.rfind('\n');
    const std::string line = line_start == std::string::npos ? last : last.substr(line_start + 1);
    const std::string prefix = std::string(c.program) + ": error: ";
    std::string expected = prefix + message;
    if (c.exit_code == 2) expected += " (see --help)";  // command-line errors point at --help
    EXPECT_EQ(line, expected);
    EXPECT_EQ(r.err.find(prefix), last.size() - line.size()) << "more than one error line:\n" << r.err;
  }
}

// Not in the table above: the list of known engines depends on the build.
TEST(BadInputApps, UnknownMaxflowBackendIsRefusedEvenWhereNoMoveUsesIt) {
  const std::string known = "(known: auto, " + Registry::Global().NameList(Algorithm::kMaxFlow) + ")";
  for (const char* args : {"--synthetic-size 16 --labels 4 --maxflow-backend nope",
                           "--synthetic-size 16 --labels 4 --algorithm icm --maxflow-backend nope"}) {
    const test::CommandResult r = test::RunCommand(test::AppPath("mrf-stereo") + " " + args + " -q");
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err, "mrf-stereo: error: --maxflow-backend: unknown max-flow backend 'nope' " + known + " (see --help)\n")
        << args;
  }
}

// Not in the table above: it needs a user whom permissions stop. Root is not stopped by them, so as root
// the programs run as "nobody" (setpriv); where that user cannot run them at all, the test is skipped.
TEST(BadInputApps, OutputFolderThatCannotBeSearchedIsNotCalledMissing) {
  const std::string dir = test::ScratchDir("bad_input_unsearchable");
  std::filesystem::create_directories(dir + "/locked/sub");  // it exists, but no one may look inside locked
  const std::string as_other = ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  // The user must reach the scratch folder, or every message below would be about another folder.
  const test::CommandResult probe = test::RunCommand(as_other + test::AppPath("mrf-restore") + " --version && " +
                                                     as_other + "test -x '" + dir + "/locked/sub'");
  if (probe.exit_code != 0)
    GTEST_SKIP() << "cannot run the programs as another user with the scratch folder in reach here: " << probe.err;
  std::filesystem::permissions(dir + "/locked", std::filesystem::perms::none);
  struct Unlock {  // on every way out, so that the next run can remove the folder
    std::string path;
    ~Unlock() { std::filesystem::permissions(path, std::filesystem::perms::owner_all); }
  } unlock{dir + "/locked"};
  const struct {
    const char* program;
    std::string args, message;
  } cases[] = {
      {"mrf-restore", "--synthetic-size 16 --levels 4 -o " + dir + "/locked/sub/out.png",
       "-o: cannot reach folder '" + dir + "/locked/sub': Permission denied"},
      {"mrf-segment", "--size 16 -o " + dir + "/locked/sub/new/m.png",
       "the mask (-o): cannot reach folder '" + dir + "/locked/sub/new': Permission denied"},
  };
  for (const auto& c : cases) {
    const test::CommandResult r = test::RunCommand(as_other + test::AppPath(c.program) + " " + c.args + " -q");
    EXPECT_EQ(r.exit_code, 1) << c.program << ": " << r.err;
    EXPECT_EQ(r.err, std::string(c.program) + ": error: " + c.message + "\n");
  }
}

const char* const kPrograms[] = {"mrf-stereo", "mrf-restore", "mrf-segment", "mrf-maxflow", "mrf-solve", "mrf-bench",
                                 "example-custom-energy"};

// The engines' environment variables are part of every program's --help, with the page that explains
// them, and so are --threads and --version, which every program takes.
TEST(BadInputApps, EveryHelpNamesTheEnvironmentVariables) {
  for (const char* program : kPrograms) {
    const test::CommandResult r = test::RunCommand(test::AppPath(program) + " --help");
    EXPECT_EQ(r.exit_code, 0) << program;
    for (const char* name : {"MRF_PR_TUNING", "MRF_CUDA_EXPANSION_TUNING", "MRF_BP_CUDA_LAUNCH", "MRF_BP_CUDA_KERNEL",
                             "MRF_BP_LABELS_PER_LANE", "MRF_BP_CUDA_MAIL", "MRF_BP_CUDA_SETUP", "MRF_CUDA_UPLOAD", "MRF_CUDA_DEBUG_SYNC", "MRF_INJECT_CUDA_FAULT",
                             "MRF_CUDA_KEPT_POISON", "docs/environment.md", "--threads", "--version"})
      EXPECT_NE(r.out.find(name), std::string::npos) << program << " --help lacks " << name;
  }
}

// --version names the program, the library's version from CMake and whether the GPU backends are in.
TEST(BadInputApps, EveryProgramPrintsItsVersion) {
  const std::string build = MRF_HAVE_CUDA ? "CUDA backends compiled in" : "CPU-only build";
  for (const char* program : kPrograms) {
    const test::CommandResult r = test::RunCommand(test::AppPath(program) + " --version");
    EXPECT_EQ(r.exit_code, 0) << program << ": " << r.err;
    EXPECT_EQ(r.out, std::string(program) + " (mrf " + MRF_VERSION + ", " + build + ")\n");
    EXPECT_EQ(r.err, "") << program;
  }
}

}  // namespace
}  // namespace mrf
