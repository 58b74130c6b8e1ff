// mrf-segment: binary segmentation by one exact graph cut (Boykov-Jolly), optionally re-fitting the
// colour models and cutting again (GrabCut). With no image it segments the synthetic scene of
// Hussein et al. (BENCHMARKS.md section 2) and scores the mask against its ground truth.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "common/app.h"
#include "energies/segmentation.h"
#include "energies/synthetic_scene.h"
#include "mrf/io/image.h"
#include "mrf/io/model_file.h"
#include "mrf/registry.h"
#include "mrf/solve.h"

namespace {

constexpr const char* kProgram = "mrf-segment";

using mrf::app::MsSince;

std::string Ms(double ms) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(ms < 10 ? 2 : 1);
  out << ms << " ms";
  return out.str();
}

std::string Number(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", v);
  return buffer;
}

// "512x384" or "512" (square).
void ParseSize(const std::string& text, int* width, int* height) {
  std::istringstream in(text);
  long w = 0, h = 0;
  char x = 0;
  std::string rest;
  bool ok = static_cast<bool>(in >> w);
  if (ok && (in >> x)) ok = (x == 'x' || x == 'X') && static_cast<bool>(in >> h) && !(in >> rest);
  else h = w;
  if (!ok || w < 4 || h < 4 || w > 32768 || h > 32768)
    throw mrf::Error("bad --size '" + text + "' (expected WxH with 4 <= W, H <= 32768, e.g. 512x512)");
  *width = static_cast<int>(w);
  *height = static_cast<int>(h);
}

// Grey or RGB: an alpha channel is dropped.
mrf::Image LoadSegmentationImage(const std::string& path) {
  mrf::Image image = mrf::LoadImage(path);
  if (image.channels == 2 || image.channels == 4) {
    const int keep = image.channels - 1;
    mrf::Image out = mrf::Image::Filled(image.width, image.height, keep);
    for (std::size_t p = 0; p < image.size(); ++p)
      for (int c = 0; c < keep; ++c) out.pixels[p * keep + c] = image.pixels[p * image.channels + c];
    return out;
  }
  return image;
}

mrf::Image MaskImage(const mrf::Labeling& mask, int width, int height) {
  mrf::Image out = mrf::Image::Filled(width, height, 1);
  for (std::size_t p = 0; p < mask.size(); ++p) out.pixels[p] = mask[p] ? 255 : 0;
  return out;
}

// The image in colour, the background dimmed, the mask's outline in red.
mrf::Image OverlayImage(const mrf::Image& image, const mrf::Labeling& mask) {
  const int w = image.width, h = image.height;
  mrf::Image out = mrf::Image::Filled(w, h, 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const std::size_t p = static_cast<std::size_t>(y) * w + x;
      const bool fg = mask[p] != 0;
      bool edge = false;
      if (fg) {
        const int dx[4] = {1, -1, 0, 0}, dy[4] = {0, 0, 1, -1};
        for (int k = 0; k < 4 && !edge; ++k) {
          const int nx = x + dx[k], ny = y + dy[k];
          edge = nx >= 0 && nx < w && ny >= 0 && ny < h && !mask[static_cast<std::size_t>(ny) * w + nx];
        }
      }
      for (int c = 0; c < 3; ++c) {
        const int v = image.pixels[p * image.channels + (image.channels == 1 ? 0 : c)];
        out.pixels[p * 3 + c] = static_cast<std::uint8_t>(edge ? (c == 0 ? 255 : 0) : fg ? v : v * 2 / 5);
      }
    }
  return out;
}

// Creates `folder` and the folders above it, as create_directories does, except that a dangling link
// among them (the folder itself or one above it) gets the folder it points to, as a new file does. A file
// in the way, or a link to one, is refused by the name the user gave.
void CreateFolder(const std::string& what, const std::filesystem::path& folder, int links_followed = 0) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status target = fs::status(folder, ec);
  if (folder.empty() || fs::is_directory(target)) return;
  if (fs::exists(target)) throw mrf::Error(what + ": '" + folder.string() + "' is not a folder");
  // A folder above that cannot be searched hides whether this one exists: say so, as CheckOutputs does
  // (a loop of links is left to the link walk below).
  if (mrf::app::CannotLookUp(ec) && ec != std::errc::too_many_symbolic_link_levels)
    throw mrf::Error(what + ": cannot reach folder '" + folder.string() + "': " + ec.message());
  if (fs::is_symlink(fs::symlink_status(folder, ec))) {
    // (A guard only: status() reports a chain this long as a loop, which EnsureParentDir leaves alone.)
    if (links_followed >= 40)
      throw mrf::Error(what + ": cannot create folder '" + folder.string() + "': Too many levels of symbolic links");
    CreateFolder(what, mrf::app::WhereNewFileGoes(folder.string()), links_followed + 1);
    return;
  }
  CreateFolder(what, folder.parent_path(), links_followed);
  fs::create_directory(folder, ec);
  if (ec) throw mrf::Error(what + ": cannot create folder '" + folder.string() + "': " + ec.message());
}

// Creates the folder that a new output file goes into (WhereNewFileGoes): for a dangling symbolic link, the
// folder the link points into, not the link's own. An output that exists (a file, /dev/stdout) needs no
// folder, and a loop of links is left to CheckOutputs, which refuses both kinds with their messages.
void EnsureParentDir(const mrf::app::NamedFile& output) {
  std::error_code status_ec;
  const std::filesystem::file_status status = std::filesystem::status(output.path, status_ec);
  if (std::filesystem::exists(status) || status_ec == std::errc::too_many_symbolic_link_levels) return;
  CreateFolder(output.option, mrf::app::WhereNewFileGoes(output.path).parent_path());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{
      "mrf-segment: foreground/background segmentation by graph cut (Boykov-Jolly), with GrabCut-style\n"
      "re-estimation. With no IMAGE it generates and segments the synthetic scene of Hussein et al.\n"
      "(ellipses, two 3-component intensity mixtures; BENCHMARKS.md section 2) and reports the pixel\n"
      "error against its ground truth. Scribble colours: red (255,0,0) = foreground, blue (0,0,255) =\n"
      "background, anything else = unknown (grey scribbles: white = foreground, black = background).\n"
      "Energy: sum of -log P(colour | model) plus lambda * exp(-|I_p - I_q|^2 / (2 sigma^2)) / dist(p,q)\n"
      "per cut edge, every cost x100 and rounded to an integer."};
  std::string image_path, scribbles_path, rect_text, size_text = "512x512", model_name = "histogram";
  std::string backend = "auto", output_dir, mask_path, overlay_path, save_model_path;
  std::uint64_t seed = 1;
  int bins = 0, components = 5, iterations = 1, connectivity = 4;
  double lambda = 2.5, sigma = 50.0;
  bool json = false, quiet = false;

  cli.add_option("IMAGE", image_path, "Image to segment (PNG, JPEG, binary PGM/PPM); omit for the synthetic scene");
  auto* scribbles_opt = cli.add_option("--scribbles", scribbles_path,
                                       "Scribble image of IMAGE's size: red = foreground, blue = background seeds");
  auto* rect_opt = cli.add_option("--rect", rect_text,
                                  "Rectangle x,y,w,h around the object: outside = background (GrabCut)");
  auto* size_opt = cli.add_option("--size", size_text, "Synthetic scene size WxH (or N for NxN)")->capture_default_str();
  auto* seed_opt = cli.add_option("--seed", seed, "Synthetic scene seed (same seed, same scene)")
                       ->check(mrf::app::FiniteNonNegative())
                       ->capture_default_str();
  cli.add_option("--model", model_name, "Colour model: histogram or gmm")->capture_default_str();
  auto* bins_opt = cli.add_option("--bins", bins, "Histogram bins per channel (default: 32 for the synthetic scene, 16 for images)")
      ->check(CLI::Range(1, 256));
  auto* components_opt = cli.add_option("--components", components, "Gaussian-mixture components (--model gmm)")
      ->check(CLI::Range(1, mrf::GaussianMixture::kMaxComponents))->capture_default_str();
  cli.add_option("--iterations", iterations,
                 "Graph cuts to run: 1 = one cut; K > 1 re-fits the colour models to the mask and cuts again "
                 "(GrabCut), stopping early when nothing changes; later cuts rewrite the first cut's graph, and "
                 "the backend re-solves from its residual flow where that is quicker than a fresh solve")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  cli.add_option("--lambda", lambda, "Pairwise weight (nats per cut edge between equal colours)")
      ->capture_default_str();
  cli.add_option("--sigma", sigma, "Contrast scale in intensity units (0 = estimate from the image)")
      ->capture_default_str();
  cli.add_option("--connectivity", connectivity, "4 or 8 neighbours (diagonal weights divided by sqrt 2)")
      ->check(CLI::IsMember({4, 8}))->capture_default_str();
  cli.add_option("--backend,--solver", backend,
                 "Max-flow backend: auto or one of " + mrf::Registry::Global().NameList(mrf::Algorithm::kMaxFlow) +
                     " (--solver is the other programs' name for it; messages call it --backend)")
      ->capture_default_str();
  cli.add_option("--output-dir", output_dir,
                 "Write mask.png and overlay.png into this folder (created if needed, as are the folders of -o, "
                 "--overlay and --save-model; for an output that is a dangling link, the folder it points into)");
  cli.add_option("-o,--output", mask_path, "Write the mask here (PNG, white = foreground)");
  cli.add_option("--overlay", overlay_path, "Write the overlay here (PNG: background dimmed, outline in red)");
  cli.add_option("--save-model", save_model_path,
                 "Save the model of the last cut for mrf-solve / mrf-bench --suite models (mrf/io/model_file.h)");
  cli.add_flag("--json", json, "Print one JSON object instead of the report");
  cli.add_flag("-q,--quiet", quiet, "No progress messages on stderr");

  return mrf::app::Run(kProgram, argc, argv, cli, [&] {
    const auto start = std::chrono::steady_clock::now();
    mrf::app::SetQuiet(quiet || json);
    const bool synthetic = image_path.empty();

    // ---- Check the command line before any work ----
    if (synthetic && (!scribbles_path.empty() || !rect_text.empty()))
      throw mrf::Error("--scribbles and --rect need an IMAGE");
    if (!synthetic && scribbles_path.empty() && rect_text.empty())
      throw mrf::Error("IMAGE needs seeds: --scribbles FILE or --rect x,y,w,h");
    if (!scribbles_path.empty() && !rect_text.empty()) throw mrf::Error("give --scribbles or --rect, not both");
    if (!synthetic && (size_opt->count() > 0 || seed_opt->count() > 0))
      throw mrf::Error("--size and --seed apply to the synthetic scene only (no IMAGE)");
    (void)scribbles_opt;
    (void)rect_opt;
    if (backend != "auto") mrf::Registry::Global().Choose(backend, mrf::Algorithm::kMaxFlow, mrf::Device::kAuto);
    std::optional<mrf::Rect> rect;
    if (!rect_text.empty()) rect = mrf::ParseRect(rect_text);
    if (!output_dir.empty()) {
      if (mask_path.empty()) mask_path = (std::filesystem::path(output_dir) / "mask.png").string();
      if (overlay_path.empty()) overlay_path = (std::filesystem::path(output_dir) / "overlay.png").string();
    }
    mrf::SegmentationOptions options;
    options.colour_model = mrf::ParseColourModelKind(model_name);
    const bool histogram = options.colour_model == mrf::ColourModelKind::kHistogram;
    if (histogram && components_opt->count() > 0) throw mrf::Error("--components applies to --model gmm");
    if (!histogram && bins_opt->count() > 0) throw mrf::Error("--bins applies to --model histogram");
    // Output folders are created as needed (--output-dir's promise), before the outputs are checked.
    const std::vector<mrf::app::NamedFile> outputs = {
        {"the mask (-o)", mask_path}, {"the overlay (--overlay)", overlay_path}, {"--save-model", save_model_path}};
    for (const mrf::app::NamedFile& output : outputs)  // every output named as a folder, before any folder is made
      if (!output.path.empty()) mrf::app::RefuseFolderName(output);
    for (const mrf::app::NamedFile& output : outputs)
      if (!output.path.empty()) EnsureParentDir(output);
    mrf::app::CheckOutputs({{"IMAGE", image_path}, {"--scribbles", scribbles_path}}, outputs);

    options.histogram_bins = bins > 0 ? bins : (synthetic ? 32 : 16);
    options.gmm.components = components;
    options.iterations = iterations;
    options.contrast.lambda = lambda;
    options.contrast.sigma = sigma;
    options.contrast.connectivity = connectivity;
    options.contrast.cost_scale = 100.0;
    std::string error;
    if (!options.IsValid(&error)) throw mrf::Error(error);

    // ---- The input: the synthetic scene, or an image and its seeds (the GPU starts meanwhile) ----
    const auto gpu_start = mrf::app::StartGpuIfUsed(backend);
    mrf::Image image;
    mrf::Seeds seeds;
    mrf::Labeling truth;
    std::string source;
    const auto input_start = std::chrono::steady_clock::now();
    if (synthetic) {
      mrf::SyntheticSceneOptions scene_options;
      ParseSize(size_text, &scene_options.width, &scene_options.height);
      mrf::CheckSegmentationFits(scene_options.width, scene_options.height, backend);  // before making the scene
      scene_options.seed = seed;
      scene_options.histogram_bins = options.histogram_bins;
      scene_options.pairwise_weight = lambda;
      scene_options.sigma = sigma > 0 ? sigma : 50.0;
      scene_options.with_model = false;  // SegmentImage() builds it
      mrf::app::Progress(kProgram, "generating the synthetic scene " + size_text + ", seed " + std::to_string(seed));
      mrf::SyntheticScene scene = mrf::MakeSyntheticScene(scene_options);
      seeds = mrf::SyntheticSceneSeeds(scene);
      truth = std::move(scene.truth);
      image = std::move(scene.image);
      source = "synthetic scene (Hussein et al.), seed " + std::to_string(seed) + ", " +
               std::to_string(scene.num_ellipses) + " ellipses, " + std::to_string(scene.patch_size) + "x" +
               std::to_string(scene.patch_size) + " training patches";
    } else {
      image = LoadSegmentationImage(image_path);
      mrf::CheckSegmentationFits(image.width, image.height, backend);  // before reading the seeds
      if (rect) {
        seeds = mrf::SeedsFromRectangle(image.width, image.height, *rect);
        source = image_path + ", rectangle " + rect_text;
      } else {
        seeds = mrf::SeedsFromScribbles(mrf::LoadImage(scribbles_path), image.width, image.height, scribbles_path);
        source = image_path + ", scribbles " + scribbles_path + " (" +
                 std::to_string(seeds.Count(mrf::SeedLabel::kForeground)) + " foreground, " +
                 std::to_string(seeds.Count(mrf::SeedLabel::kBackground)) + " background pixels)";
      }
    }
    const double input_ms = MsSince(input_start);

    // ---- Segment ----
    mrf::SolveOptions solve;
    solve.solver = backend;
    solve.algorithm = mrf::Algorithm::kMaxFlow;
    auto on_round = [&](const mrf::SegmentationRound& r) {
      if (iterations <= 1) return;
      std::string line = "round " + std::to_string(r.round) + ": energy " + std::to_string(r.energy);
      if (r.energy_before >= 0) line += " (previous mask under the re-fitted models: " + std::to_string(r.energy_before) + ")";
      line += ", " + std::to_string(r.changed) + " pixels changed";
      mrf::app::Progress(kProgram, line);
    };
    mrf::Segmentation seg = mrf::SegmentImage(image, seeds, options, solve, on_round);
    const mrf::Result& result = seg.result;
    double cuts_ms = 0, models_ms = 0;
    for (const auto& r : seg.rounds) {
      cuts_ms += r.solve_ms;
      models_ms += r.model_ms;
    }
    const double setup_ms = input_ms + seg.setup_ms;

    // ---- Outputs ----
    if (!mask_path.empty()) mrf::SavePng(mask_path, MaskImage(seg.mask, image.width, image.height));
    if (!overlay_path.empty()) mrf::SavePng(overlay_path, OverlayImage(image, seg.mask));
    if (!save_model_path.empty()) {
      mrf::SaveModel(seg.model, save_model_path);
      mrf::app::Progress(kProgram, "model saved to " + save_model_path);
    }
    const double total_ms = MsSince(start);
    const double error_percent = truth.empty() ? -1.0 : mrf::MaskErrorPercent(seg.mask, truth);
    std::int64_t foreground = 0;
    for (mrf::Label l : seg.mask) foreground += l;

    if (json) {
      nlohmann::json j = nlohmann::json::parse(result.ToJson());
      j["program"] = kProgram;
      j["source"] = synthetic ? "synthetic" : "image";
      j["input"] = source;
      j["width"] = image.width;
      j["height"] = image.height;
      j["channels"] = image.channels;
      if (synthetic) j["seed"] = seed;
      j["colour_model"] = mrf::ToString(options.colour_model);
      j["lambda"] = lambda;
      j["sigma"] = sigma;
      j["connectivity"] = connectivity;
      j["foreground_pixels"] = foreground;
      j["error_percent"] = truth.empty() ? nlohmann::json(nullptr) : nlohmann::json(error_percent);
      j["solve_ms"] = result.timings.solve_ms;      // the max-flow of the last cut
      j["cut_ms"] = cuts_ms;                        // every mrf::Solve call, graph building included
      j["input_ms"] = input_ms;                     // scene generation or image loading, seeds
      j["model_ms"] = seg.setup_ms + models_ms - seg.rounds.front().model_ms;  // colour models, weights
      j["time_ms"] = total_ms;                      // the whole run
      nlohmann::json rounds = nlohmann::json::array();
      for (const auto& r : seg.rounds)
        rounds.push_back({{"round", r.round},
                          {"energy", r.energy},
                          {"energy_before", r.energy_before >= 0 ? nlohmann::json(r.energy_before) : nlohmann::json(nullptr)},
                          {"changed", r.changed},
                          {"foreground", r.foreground},
                          {"model_ms", r.model_ms},
                          {"solve_ms", r.solve_ms},
                          {"foreground_model", r.foreground_model},
                          {"background_model", r.background_model}});
      j["rounds"] = rounds;
      j["mask"] = mask_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(mask_path);
      j["overlay"] = overlay_path.empty() ? nlohmann::json(nullptr) : nlohmann::json(overlay_path);
      std::printf("%s\n", mrf::app::JsonText(j).c_str());
      return 0;
    }

    const mrf::SegmentationRound& last = seg.rounds.back();
    const std::string sigma_text =
        sigma > 0 ? Number(sigma) : Number(mrf::EstimateContrastSigma(image, connectivity)) + " (estimated)";
    std::printf("input:       %s\n", mrf::app::OneLine(source).c_str());
    std::printf("image:       %s\n", image.Describe().c_str());
    std::printf("model:       data = -log P(colour) by %s; pairwise lambda %g, sigma %s, %d-connected; costs x%g\n",
                last.foreground_model.rfind("histogram", 0) == 0
                    ? ("histograms (" + std::to_string(options.histogram_bins) + " bins per channel)").c_str()
                    : ("Gaussian mixtures (" + std::to_string(components) + " components)").c_str(),
                lambda, sigma_text.c_str(), connectivity, options.contrast.cost_scale);
    std::printf("backend:     %s (requested %s)\n", result.backend_used.c_str(), result.backend_requested.c_str());
    if (!result.fallback_reason.empty()) std::printf("fallback:    %s\n", result.fallback_reason.c_str());
    if (seg.rounds.size() > 1 || iterations > 1) {
      std::printf("rounds:      %zu of at most %d (GrabCut re-estimation)\n", seg.rounds.size(), iterations);
      for (const auto& r : seg.rounds) {
        std::printf("  [%d] energy %lld", r.round, static_cast<long long>(r.energy));
        if (r.energy_before >= 0)
          std::printf(" (previous mask, re-fitted models: %lld)", static_cast<long long>(r.energy_before));
        std::printf(", %lld pixels changed, %s\n", static_cast<long long>(r.changed), Ms(r.solve_ms).c_str());
      }
    }
    std::printf("energy:      %lld (integer; real energy x%g)\n", static_cast<long long>(result.energy),
                result.cost_scale);
    std::printf("flow:        %lld%s\n", static_cast<long long>(result.flow),
                result.flow == result.energy ? " (= energy: the cut is a minimum)" : "");
    std::printf("foreground:  %lld of %zu pixels (%.2f%%)\n", static_cast<long long>(foreground), seg.mask.size(),
                100.0 * static_cast<double>(foreground) / static_cast<double>(seg.mask.size()));
    if (!truth.empty()) std::printf("error:       %.2f%% of pixels differ from the ground truth\n", error_percent);
    std::printf("time:        setup %s (input %s, colour models and weights %s), max-flow %s, cut total %s%s, "
                "total %s\n",
                Ms(setup_ms).c_str(), Ms(input_ms).c_str(), Ms(seg.setup_ms).c_str(),
                Ms(result.timings.solve_ms).c_str(), Ms(cuts_ms).c_str(),
                seg.rounds.size() > 1 ? (" over " + std::to_string(seg.rounds.size()) + " cuts").c_str() : "",
                Ms(total_ms).c_str());
    if (mask_path.empty() && overlay_path.empty()) {
      std::printf("wrote:       nothing (use --output-dir DIR, -o mask.png or --overlay overlay.png)\n");
    } else {
      if (!mask_path.empty())
        std::printf("wrote:       %s (mask, white = foreground)\n", mrf::app::OneLine(mask_path).c_str());
      if (!overlay_path.empty()) std::printf("wrote:       %s (overlay)\n", mrf::app::OneLine(overlay_path).c_str());
    }
    return 0;
  });
}
