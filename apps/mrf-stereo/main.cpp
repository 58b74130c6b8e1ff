// mrf-stereo: dense stereo matching as an MRF. Builds the Middlebury benchmark energies (--preset) or
// an energy from explicit parameters, minimises it with any multilabel solver, and reports energy,
// backend, time and, with ground truth, the bad-pixel rate. With no images it makes a synthetic pair.
#include <algorithm>
#include <cstdio>
#include <tuple>
#include <nlohmann/json.hpp>

#include "common/app.h"
#include "common/multilabel_cli.h"
#include "energies/stereo.h"
#include "mrf/io/image.h"
#include "mrf/solve.h"

namespace {

const char* kProgram = "mrf-stereo";

double DefaultGtScale(const std::string& preset) {
  if (preset == "tsukuba") return 16;
  if (preset == "venus") return 8;
  if (preset == "teddy") return 4;
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "mrf-stereo: dense stereo matching by MRF energy minimisation.\n"
      "With LEFT and RIGHT it matches left pixel (x,y) with right pixel (x-d,y) for disparities d in 0..labels-1;\n"
      "with no images it generates a synthetic pair with known disparities and reports the error.\n"
      "--preset builds exactly the Middlebury MRF benchmark energies (BENCHMARKS.md section 1); presets need\n"
      "colour images and run expansion with truncation of non-submodular terms, as the reference did."};
  std::string left_path, right_path, preset, data_cost = "absolute", smoothness = "linear", table_path;
  std::string gt_path, output_path, colour_path, model_path;
  const mrf::StereoParams defaults;  // the Tsukuba energy
  mrf::Label labels = defaults.num_labels;
  int truncation = defaults.truncation, lambda = defaults.smoothness.lambda, vmax = defaults.smoothness.truncation;
  int gradient_threshold = defaults.gradient_threshold, gradient_penalty = defaults.gradient_penalty;
  bool no_bt = false, json = false, quiet = false, verbose = false;
  double gt_scale = 0, bad_threshold = 1.0, noise = 4.0;
  int output_scale = 0, downsample = 1, synthetic_width = 256, synthetic_height = 192;
  mrf::app::SolveCli solve;
  cli.add_option("LEFT", left_path, "Left image (PNG, JPEG, binary PGM/PPM)");
  cli.add_option("RIGHT", right_path, "Right image, same size as LEFT");
  cli.add_option("--preset", preset,
                 "Benchmark energy: " + mrf::StereoParams::PresetNames() +
                     "; energy options given explicitly override the preset's values");
  cli.add_option("--labels", labels, "Number of disparities (labels 0..N-1); at most the image width")
      ->capture_default_str();
  cli.add_option("--data-cost", data_cost, "Channel differences summed as absolute|squared")->capture_default_str();
  cli.add_flag("--no-bt", no_bt, "Plain pixel differences instead of Birchfield-Tomasi's sampling-insensitive ones");
  cli.add_option("--data-truncation", truncation,
                 "Data cost truncation T (absolute sums capped at channels*T, squared at T*T); 0 = none")
      ->capture_default_str();
  cli.add_option("--smoothness", smoothness, "Smoothness kind: potts|linear|quadratic|table")->capture_default_str();
  cli.add_option("--lambda", lambda, "Smoothness weight lambda")->capture_default_str();
  cli.add_option("--vmax", vmax, "Smoothness truncation Vmax of linear/quadratic: lambda*min(|a-b|^k, Vmax)")
      ->capture_default_str();
  cli.add_option("--table", table_path, "With --smoothness table: file of labels x labels non-negative integers");
  cli.add_option("--gradient-threshold", gradient_threshold,
                 "Gradient threshold g: edges whose colour difference^2 summed over channels is < channels*g*g "
                 "get the penalty weight; 0 = no gradient weights")
      ->capture_default_str();
  cli.add_option("--gradient-penalty", gradient_penalty, "Edge weight of low-gradient edges")->capture_default_str();
  cli.add_option("--downsample", downsample, "Shrink images (box filter) and ground truth by this factor first")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  mrf::app::AddSolveOptions(cli, &solve);
  auto* gt_opt =
      cli.add_option("--gt", gt_path, "Ground-truth disparity image (grey; 0 = unknown) for the bad-pixel rate");
  cli.add_option("--gt-scale", gt_scale,
                 "Ground-truth value per disparity unit; 0 (the default) picks the preset's: 16 tsukuba, 8 venus, 4 teddy, else 1")
      ->check(mrf::app::FiniteNonNegative())
      ->needs(gt_opt);
  cli.add_option("--bad-threshold", bad_threshold, "A pixel is bad when its disparity error exceeds this")
      ->check(mrf::app::FiniteNonNegative())
      ->capture_default_str();
  auto* output_opt =
      cli.add_option("-o,--output", output_path, "Write the disparity map as a grey PNG (value = disparity x scale)");
  cli.add_option("--output-scale", output_scale,
                 "Grey value per disparity in --output, 1..255 (default: the ground-truth scale, else 255/(labels-1))")
      ->check(CLI::Range(1, 255))
      ->needs(output_opt);
  cli.add_option("--colour", colour_path, "Also write a colour-mapped disparity PNG (blue far, red near)");
  cli.add_option("--save-model", model_path, "Save the model for mrf-solve / mrf-bench (mrf/io/model_file.h)");
  CLI::Option *size_opt = nullptr, *noise_opt = nullptr;  // (not a structured binding: the body lambda uses them)
  std::tie(size_opt, noise_opt) = mrf::app::AddSyntheticInputOptions(cli, "Synthetic pair", &synthetic_width, &noise);
  cli.add_flag("--json", json, "Print one JSON object (energy, backend, time_ms, bad_pixels_percent...)");
  cli.add_flag("-v,--verbose", verbose, "Full report: timing split and the per-iteration log");
  cli.add_flag("-q,--quiet", quiet, "No progress messages on stderr");

  return mrf::app::Run(kProgram, argc, argv, cli, [&] {
    mrf::app::SetQuiet(quiet || json);
    if (!left_path.empty() && right_path.empty())
      throw mrf::Error("LEFT given without RIGHT (give both images, or neither)");
    mrf::app::CheckOutputs(
        {{"LEFT", left_path}, {"RIGHT", right_path}, {"--gt", gt_path}, {"--table", table_path}},
        {{"-o", output_path}, {"--colour", colour_path}, {"--save-model", model_path}});
    const bool synthetic = left_path.empty();
    if (synthetic && !gt_path.empty())
      throw mrf::Error("--gt needs LEFT and RIGHT images (the synthetic pair has its own)");
    if (synthetic && downsample > 1)
      throw mrf::Error("--downsample needs LEFT and RIGHT images (use --synthetic-size)");

    // ---- The energy: a preset (or the defaults), then every energy option given explicitly ----
    mrf::StereoParams params = defaults;
    if (!preset.empty()) {
      params = mrf::StereoParams::Preset(preset);
      // The reference expansion truncates non-submodular terms (Venus' quadratic), unless told not to.
      if (cli.count("--truncate") == 0) solve.truncate = true;
    }
    std::string overridden;
    auto given = [&](const char* name) {
      if (cli.count(name) == 0) return false;
      overridden += std::string(overridden.empty() ? "" : " ") + name;
      return true;
    };
    if (given("--labels")) params.num_labels = labels;
    if (given("--data-cost")) params.cost = mrf::ParseStereoCost(data_cost);
    if (given("--no-bt")) params.birchfield_tomasi = false;
    if (given("--data-truncation")) params.truncation = truncation;
    if (given("--smoothness")) params.smoothness.kind = mrf::ParsePairwiseKind(smoothness);
    if (given("--lambda")) params.smoothness.lambda = lambda;
    if (given("--vmax")) params.smoothness.truncation = vmax;
    if (given("--gradient-threshold")) params.gradient_threshold = gradient_threshold;
    if (given("--gradient-penalty")) params.gradient_penalty = gradient_penalty;
    mrf::app::CheckVmaxApplies(cli, params.smoothness.kind);
    if (params.smoothness.kind == mrf::PairwiseKind::kPotts) params.smoothness.truncation = 1;
    mrf::app::LoadSmoothnessTable(table_path, params.num_labels, &params.smoothness);
    if (!preset.empty() && !overridden.empty()) params.preset = preset + " modified by " + overridden;
    params.Validate();
    mrf::SolveOptions options = mrf::app::MakeSolveOptions(solve, kProgram);
    mrf::app::CheckMaxflowLabels(options, params.num_labels);
    const auto gpu_start = mrf::app::StartGpuIfUsed(solve.solver, solve.device);  // while the input loads

    mrf::Image left, right, gt;
    mrf::Labeling true_disparity;
    std::string problem;
    if (!synthetic && size_opt->count() + noise_opt->count() > 0)
      throw mrf::Error("--synthetic-size and --noise apply to the synthetic pair only (no LEFT and RIGHT)");
    if (synthetic) {
      synthetic_height = synthetic_width * 3 / 4;
      mrf::app::Progress(kProgram, "no images given: generating a synthetic " + std::to_string(synthetic_width) + "x" +
                                       std::to_string(synthetic_height) + " pair (seed " + std::to_string(solve.seed) +
                                       ", noise " + mrf::NumberText(noise) + ")");
      mrf::SyntheticStereo pair =
          mrf::MakeSyntheticStereo(synthetic_width, synthetic_height, params.num_labels, solve.seed, noise);
      left = std::move(pair.left);
      right = std::move(pair.right);
      true_disparity = std::move(pair.disparity);
      problem = "synthetic";
    } else {
      mrf::app::Progress(kProgram, "reading " + left_path + " and " + right_path);
      left = mrf::LoadImage(left_path);  // alpha channels are ignored by the energy
      right = mrf::LoadImage(right_path);
      problem = left_path;
      if (!gt_path.empty()) {
        gt = mrf::LoadGreyValues(gt_path);
        if (gt.width != left.width || gt.height != left.height)
          throw mrf::Error("ground truth '" + gt_path + "' is " + std::to_string(gt.width) + "x" +
                           std::to_string(gt.height) + " but the images are " + std::to_string(left.width) + "x" +
                           std::to_string(left.height));
      }
      if (gt_scale == 0) gt_scale = DefaultGtScale(preset);
      if (!(gt_scale > 0)) throw mrf::Error("--gt-scale must be positive (got " + mrf::NumberText(gt_scale) + ")");
      if (downsample > 1) {
        // Check sizes on the originals, so the error names what the user gave.
        if (left.width != right.width || left.height != right.height)
          throw mrf::Error("left and right images differ in size: left is " + std::to_string(left.width) + "x" +
                           std::to_string(left.height) + ", right is " + std::to_string(right.width) + "x" +
                           std::to_string(right.height));
        left = mrf::ShrinkImage(left, downsample);
        right = mrf::ShrinkImage(right, downsample);
        if (!gt_path.empty()) gt = mrf::ShrinkGroundTruth(gt, downsample);
        gt_scale *= downsample;  // a ground-truth value now means downsample times fewer pixels
      }
    }
    // The grey value of disparity d in the -o map is d x scale: checked before the solve to fit 8 bits.
    int scale = output_scale;
    if (scale <= 0)
      scale = !gt_path.empty() ? std::max(1, static_cast<int>(gt_scale / downsample))
                               : std::max(1, 255 / std::max(1, params.num_labels - 1));
    if (!output_path.empty() && std::int64_t{params.num_labels - 1} * scale > 255)
      throw mrf::Error("-o: disparity " + std::to_string(params.num_labels - 1) + " x scale " + std::to_string(scale) +
                       " passes 255, the largest grey value of the 8-bit map (lower --output-scale, or use --colour)");
    mrf::app::Progress(kProgram, "building the energy: " + params.Describe() + " on " + left.Describe());
    const mrf::Model model = mrf::BuildStereoModel(left, right, params);

    // ---- Solve ----
    const mrf::Result result = mrf::app::SaveCheckAndSolve(kProgram, model, model_path, options, solve);
    if (!result.ok) return mrf::app::ReportFailure(kProgram, result, json);
    const mrf::EnergyBreakdown split = mrf::EvaluateEnergy(model, result.labels);

    // ---- Errors against the truth ----
    double bad = -1;
    std::int64_t known = 0;
    if (synthetic) {
      std::int64_t wrong = 0;
      for (std::size_t p = 0; p < result.labels.size(); ++p)
        wrong += std::abs(result.labels[p] - true_disparity[p]) > bad_threshold;
      known = static_cast<std::int64_t>(result.labels.size());
      bad = 100.0 * static_cast<double>(wrong) / static_cast<double>(known);
    } else if (!gt_path.empty()) {
      bad = mrf::BadPixelPercent(result.labels, gt, gt_scale, bad_threshold);
      for (std::uint8_t v : gt.pixels) known += v != 0;
    }

    // ---- Outputs ----
    if (!output_path.empty()) {
      mrf::SavePng(output_path, mrf::DisparityToImage(result.labels, left.width, left.height, scale));
      mrf::app::Progress(kProgram,
                         "wrote " + output_path + " (grey value = disparity x " + std::to_string(scale) + ")");
    }
    if (!colour_path.empty()) {
      mrf::SavePng(colour_path, mrf::DisparityToColour(result.labels, left.width, left.height, params.num_labels));
      mrf::app::Progress(kProgram, "wrote " + colour_path);
    }

    if (json) {
      nlohmann::json j = mrf::app::JsonReport(kProgram, problem, result, params.Describe(), left.width, left.height,
                                              params.num_labels, split);
      j["preset"] = params.preset;
      j["bad_pixels_percent"] = bad >= 0 ? nlohmann::json(bad) : nlohmann::json(nullptr);
      j["bad_threshold"] = bad_threshold;
      j["pixels_with_ground_truth"] = known;
      std::printf("%s\n", mrf::app::JsonText(j).c_str());
      return 0;
    }
    std::printf("problem:   %s, %s\n", mrf::app::OneLine(problem).c_str(), left.Describe().c_str());
    mrf::app::PrintReport(params.Describe(), result, split, verbose);
    if (bad >= 0)
      std::printf("bad pixels: %.2f%% of %lld pixels with known disparity (error > %g)\n", bad,
                  static_cast<long long>(known), bad_threshold);
    return 0;
  });
}
