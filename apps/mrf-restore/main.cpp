// mrf-restore: denoising and inpainting of grey images as an MRF. Data term: squared difference to the
// observed intensity (zero inside a mask of missing pixels); smoothness: any kind of the model. With no
// image it generates a noisy picture with holes and reports the error against the clean one.
#include <cstdio>
#include <tuple>
#include <nlohmann/json.hpp>

#include "common/app.h"
#include "common/multilabel_cli.h"
#include "energies/restoration.h"
#include "mrf/io/image.h"
#include "mrf/solve.h"

namespace {

const char* kProgram = "mrf-restore";

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "mrf-restore: image restoration (denoising and inpainting) by MRF energy minimisation.\n"
      "Label l is the grey level round(l*255/(levels-1)); the data cost is the squared difference to the observed\n"
      "intensity (zero at missing pixels), the smoothness any kind of the model. Colour images are converted to\n"
      "grey (ITU-R 601 luma). With no IMAGE it generates a noisy picture with holes and reports the error."};
  std::string image_path, mask_path, clean_path, output_path, smoothness = "quadratic", table_path, model_path;
  mrf::RestorationParams params;
  int lambda = params.smoothness.lambda, vmax = params.smoothness.truncation;
  double noise = 20.0;
  int holes = 6, synthetic_width = 128;
  bool json = false, quiet = false, verbose = false;
  mrf::app::SolveCli solve;
  // Expansion with truncation, as the Middlebury benchmark ran restoration: the default truncated
  // quadratic is not a metric, and message passing over 256 labels is slow on a CPU.
  solve.algorithm = "expansion";
  solve.truncate = true;
  cli.add_option("IMAGE", image_path, "Noisy grey (or colour) image");
  cli.add_option("--mask", mask_path, "Mask of missing pixels, same size as IMAGE: white (>= 128) = missing");
  cli.add_option("--clean", clean_path, "Clean image to compare with (reports the RMS error)");
  cli.add_option("--levels", params.num_labels, "Number of grey levels (labels), 2..256")
      ->check(CLI::Range(2, 256))
      ->capture_default_str();
  cli.add_option("--data-truncation", params.data_truncation, "Cap of the squared data difference; 0 = none")
      ->check(mrf::app::FiniteNonNegative())
      ->capture_default_str();
  cli.add_option("--smoothness", smoothness, "Smoothness kind on label differences: potts|linear|quadratic|table")
      ->capture_default_str();
  cli.add_option("--lambda", lambda, "Smoothness weight lambda")->capture_default_str();
  cli.add_option("--vmax", vmax, "Truncation Vmax of the linear/quadratic smoothness")->capture_default_str();
  cli.add_option("--table", table_path, "With --smoothness table: file of levels x levels non-negative integers");
  mrf::app::AddSolveOptions(cli, &solve);
  cli.add_option("-o,--output", output_path, "Write the restored image as a PNG");
  cli.add_option("--save-model", model_path, "Save the model for mrf-solve / mrf-bench (mrf/io/model_file.h)");
  CLI::Option *size_opt = nullptr, *noise_opt = nullptr;  // (not a structured binding: the body lambda uses them)
  std::tie(size_opt, noise_opt) = mrf::app::AddSyntheticInputOptions(cli, "Generated picture", &synthetic_width, &noise);
  CLI::Option* holes_opt = cli.add_option("--holes", holes, "Generated picture: number of missing rectangles")
                               ->check(CLI::Range(0, mrf::kMaxSyntheticHoles))
                               ->capture_default_str();
  cli.add_flag("--json", json, "Print one JSON object (energy, backend, time_ms, rms_error...)");
  cli.add_flag("-v,--verbose", verbose, "Full report: timing split and the per-iteration log");
  cli.add_flag("-q,--quiet", quiet, "No progress messages on stderr");

  return mrf::app::Run(kProgram, argc, argv, cli, [&] {
    mrf::app::SetQuiet(quiet || json);
    mrf::app::CheckOutputs(
        {{"IMAGE", image_path}, {"--mask", mask_path}, {"--clean", clean_path}, {"--table", table_path}},
        {{"-o", output_path}, {"--save-model", model_path}});
    params.smoothness.kind = mrf::ParsePairwiseKind(smoothness);
    mrf::app::CheckVmaxApplies(cli, params.smoothness.kind);
    params.smoothness.lambda = lambda;
    params.smoothness.truncation = params.smoothness.kind == mrf::PairwiseKind::kPotts ? 1 : vmax;
    mrf::app::LoadSmoothnessTable(table_path, params.num_labels, &params.smoothness);
    params.Validate();
    const mrf::SolveOptions options = mrf::app::MakeSolveOptions(solve, kProgram);
    mrf::app::CheckMaxflowLabels(options, params.num_labels);
    const auto gpu_start = mrf::app::StartGpuIfUsed(solve.solver, solve.device);  // while the input loads

    mrf::Image observed, mask, clean;
    std::string problem;
    if (!image_path.empty() && size_opt->count() + noise_opt->count() + holes_opt->count() > 0)
      throw mrf::Error("--synthetic-size, --noise and --holes apply to the generated picture only (no IMAGE)");
    if (image_path.empty()) {
      if (!mask_path.empty()) throw mrf::Error("--mask needs an IMAGE (the generated picture has its own holes)");
      const int height = synthetic_width * 3 / 4;
      mrf::app::Progress(kProgram, "no image given: generating a " + std::to_string(synthetic_width) + "x" +
                                       std::to_string(height) + " picture (seed " + std::to_string(solve.seed) +
                                       ", noise " + mrf::NumberText(noise) + ", " + std::to_string(holes) + " holes)");
      mrf::SyntheticRestoration s = mrf::MakeSyntheticRestoration(synthetic_width, height, solve.seed, noise, holes);
      observed = std::move(s.noisy);
      mask = std::move(s.mask);
      if (clean_path.empty()) clean = std::move(s.clean);
      problem = "synthetic";
    } else {
      mrf::app::Progress(kProgram, "reading " + image_path);
      observed = mrf::LoadImage(image_path);
      if (!mask_path.empty()) mask = mrf::LoadImage(mask_path);
      problem = image_path;
    }
    if (!clean_path.empty()) clean = mrf::LoadImage(clean_path);
    if (clean.width > 0 && (clean.width != observed.width || clean.height != observed.height))
      throw mrf::Error("clean image '" + clean_path + "' is " + std::to_string(clean.width) + "x" +
                       std::to_string(clean.height) + " but the image is " + std::to_string(observed.width) + "x" +
                       std::to_string(observed.height));

    mrf::app::Progress(kProgram, "building the energy: " + params.Describe() + " on " + observed.Describe());
    const mrf::Model model = mrf::BuildRestorationModel(observed, mask, params);
    std::int64_t missing = 0;
    if (mask.width > 0)
      for (int y = 0; y < mask.height; ++y)
        for (int x = 0; x < mask.width; ++x) missing += mrf::IsMissing(mask, x, y);
    const mrf::Result result = mrf::app::SaveCheckAndSolve(kProgram, model, model_path, options, solve);
    if (!result.ok) return mrf::app::ReportFailure(kProgram, result, json);
    const mrf::EnergyBreakdown split = mrf::EvaluateEnergy(model, result.labels);
    const mrf::Image restored = mrf::RestoredImage(result.labels, observed.width, observed.height, params.num_labels);
    const double rms_before = clean.width > 0 ? mrf::RootMeanSquareError(observed, clean) : -1;
    const double rms_after = clean.width > 0 ? mrf::RootMeanSquareError(restored, clean) : -1;
    if (!output_path.empty()) {
      mrf::SavePng(output_path, restored);
      mrf::app::Progress(kProgram, "wrote " + output_path);
    }

    if (json) {
      nlohmann::json j = mrf::app::JsonReport(kProgram, problem, result, params.Describe(), observed.width,
                                              observed.height, params.num_labels, split);
      j["missing_pixels"] = missing;
      j["rms_error_input"] = rms_before >= 0 ? nlohmann::json(rms_before) : nlohmann::json(nullptr);
      j["rms_error"] = rms_after >= 0 ? nlohmann::json(rms_after) : nlohmann::json(nullptr);
      std::printf("%s\n", mrf::app::JsonText(j).c_str());
      return 0;
    }
    std::printf("problem:   %s, %s, %lld missing pixels\n", mrf::app::OneLine(problem).c_str(),
                observed.Describe().c_str(), static_cast<long long>(missing));
    mrf::app::PrintReport(params.Describe(), result, split, verbose);
    if (rms_after >= 0)
      std::printf("RMS error: %.2f grey levels (input %.2f, holes included)\n", rms_after, rms_before);
    return 0;
  });
}
