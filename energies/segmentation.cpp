#include "energies/segmentation.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <sstream>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include "mrf/binary_graph.h"
#include "mrf/memory.h"
#include "mrf/solve.h"

namespace mrf {

namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// QuantizeCost without building the error text unless it is needed (it runs once per pixel).
template <class Describe>
Cost Quantize(double value, double scale, Describe&& what) {
  const double scaled = std::round(value * scale);
  if (value >= 0 && scaled <= static_cast<double>(kMaxCost)) return static_cast<Cost>(scaled);
  return QuantizeCost(value, scale, what());  // throws with a message naming the term
}

void CheckContrast(const ContrastOptions& o) {
  if (!(o.lambda >= 0) || !std::isfinite(o.lambda))
    throw Error("pairwise weight lambda must be a finite number >= 0 (got " + NumberText(o.lambda) + ")");
  if (!(o.sigma >= 0) || !std::isfinite(o.sigma))
    throw Error("contrast sigma must be a finite number >= 0 (0 = estimate from the image; got " + NumberText(o.sigma) + ")");
  if (o.sigma > 0 && !(o.sigma * o.sigma > 0))  // a square that underflows makes every weight 0 / 0
    throw Error("contrast sigma " + NumberText(o.sigma) + " is too small (its square is 0)");
  if (o.connectivity != 4 && o.connectivity != 8)
    throw Error("connectivity must be 4 or 8 (got " + std::to_string(o.connectivity) + ")");
  if (!(o.cost_scale > 0) || !std::isfinite(o.cost_scale))
    throw Error("cost scale must be positive (got " + NumberText(o.cost_scale) + ")");
}

void CheckImage(const Image& image) {
  if (image.width <= 0 || image.height <= 0 || image.pixels.size() != image.size() * image.channels)
    throw Error("segmentation: image has an inconsistent shape");
  if (image.channels != 1 && image.channels != 3)
    throw Error("segmentation needs a grey or RGB image (this one has " + std::to_string(image.channels) +
                " channels)");
}

std::int64_t SquaredDifference(const Image& image, NodeId p, NodeId q) {
  std::int64_t d2 = 0;
  for (int c = 0; c < image.channels; ++c) {
    const int d = int{image.pixels[static_cast<std::size_t>(p) * image.channels + c]} -
                  image.pixels[static_cast<std::size_t>(q) * image.channels + c];
    d2 += d * d;
  }
  return d2;
}

}  // namespace

double EstimateContrastSigma(const Image& image, int connectivity) {
  CheckImage(image);
  const Topology grid = Topology::Grid2D(image.width, image.height, connectivity);
  // An integer sum by rows on all cores: exact, so the same sigma as a serial pass.
  const std::int64_t sum = tbb::parallel_reduce(
      tbb::blocked_range<int>(0, image.height), std::int64_t{0},
      [&](const tbb::blocked_range<int>& rows, std::int64_t total) {
        grid.ForEachEdgeInRows(rows.begin(), rows.end(),
                               [&](EdgeId, NodeId p, NodeId q) { total += SquaredDifference(image, p, q); });
        return total;
      },
      std::plus<std::int64_t>());
  const EdgeId edges = grid.num_edges();
  const double mean = edges ? static_cast<double>(sum) / static_cast<double>(edges) : 0.0;
  return mean > 0 ? std::sqrt(mean) : 1.0;
}

std::vector<Cost> ContrastWeights(const Image& image, const Topology& grid, const ContrastOptions& options) {
  CheckImage(image);
  CheckContrast(options);
  if (grid.kind() != TopologyKind::kGrid4 && grid.kind() != TopologyKind::kGrid8)
    throw Error("contrast weights need a 2-D grid (got " + grid.Describe() + ")");
  if (grid.width() != image.width || grid.height() != image.height)
    throw Error("contrast weights: grid " + grid.Describe() + " does not match image " + image.Describe());
  const double sigma = options.sigma > 0 ? options.sigma : EstimateContrastSigma(image, options.connectivity);
  // Squared differences are integers up to channels * 255^2: tabulate the quantised weights once.
  const std::int64_t max_d2 = std::int64_t{image.channels} * 255 * 255;
  std::vector<Cost> straight(static_cast<std::size_t>(max_d2 + 1)), diagonal(straight.size());
  for (std::int64_t d2 = 0; d2 <= max_d2; ++d2) {
    const double w = options.lambda * std::exp(-static_cast<double>(d2) / (2.0 * sigma * sigma));
    auto what = [&] { return "contrast weight for squared difference " + std::to_string(d2); };
    straight[d2] = Quantize(w, options.cost_scale, what);
    diagonal[d2] = Quantize(w / std::sqrt(2.0), options.cost_scale, what);
  }
  std::vector<Cost> weights = NewZeroedVector<Cost>(static_cast<std::size_t>(grid.num_edge_slots()));
  const NodeId n = grid.num_nodes();
  tbb::parallel_for(tbb::blocked_range<int>(0, image.height), [&](const tbb::blocked_range<int>& rows) {
    grid.ForEachEdgeInRows(rows.begin(), rows.end(), [&](EdgeId slot, NodeId p, NodeId q) {
      const bool is_diagonal = slot >= EdgeId{2} * n;  // directions 2 and 3 are the diagonals
      weights[static_cast<std::size_t>(slot)] = (is_diagonal ? diagonal : straight)[SquaredDifference(image, p, q)];
    });
  });
  return weights;
}

// ---- Seeds ---------------------------------------------------------------------------------------

Seeds Seeds::Unknown(int width, int height) {
  Seeds s;
  s.width = width;
  s.height = height;
  s.labels.assign(static_cast<std::size_t>(width) * height, static_cast<std::uint8_t>(SeedLabel::kUnknown));
  return s;
}

std::int64_t Seeds::Count(SeedLabel label) const {
  return std::count(labels.begin(), labels.end(), static_cast<std::uint8_t>(label));
}

Seeds SeedsFromScribbles(const Image& scribbles, int width, int height, const std::string& path) {
  const std::string shown = PrintableText(path);  // one line, whatever the path holds
  if (scribbles.width != width || scribbles.height != height)
    throw Error("scribbles '" + shown + "' are " + std::to_string(scribbles.width) + "x" +
                std::to_string(scribbles.height) + " but the image is " + std::to_string(width) + "x" +
                std::to_string(height));
  CheckImageShape(scribbles, "scribbles '" + shown + "'");
  Seeds seeds = Seeds::Unknown(width, height);
  const int ch = scribbles.channels;
  for (std::size_t p = 0; p < scribbles.size(); ++p) {
    const std::uint8_t* v = &scribbles.pixels[p * ch];
    SeedLabel label = SeedLabel::kUnknown;
    if (ch >= 3) {
      if (v[0] >= 200 && v[1] <= 60 && v[2] <= 60) label = SeedLabel::kForeground;
      else if (v[2] >= 200 && v[0] <= 60 && v[1] <= 60) label = SeedLabel::kBackground;
    } else {
      if (v[0] >= 200) label = SeedLabel::kForeground;
      else if (v[0] <= 55) label = SeedLabel::kBackground;
    }
    if (ch == 2 || ch == 4) {
      if (v[ch - 1] < 128) label = SeedLabel::kUnknown;  // transparent pixels say nothing
    }
    seeds.labels[p] = static_cast<std::uint8_t>(label);
  }
  const char* colours = ch >= 3 ? "red" : "white";
  if (seeds.Count(SeedLabel::kForeground) == 0)
    throw Error("scribbles '" + shown + "' mark no foreground (" + colours + ") pixel");
  if (seeds.Count(SeedLabel::kBackground) == 0)
    throw Error("scribbles '" + shown + "' mark no background (" + std::string(ch >= 3 ? "blue" : "black") +
                ") pixel");
  return seeds;
}

Rect ParseRect(const std::string& text) {
  Rect r;
  std::istringstream in(text);
  char c1 = 0, c2 = 0, c3 = 0;
  std::string rest;
  if (!(in >> r.x >> c1 >> r.y >> c2 >> r.width >> c3 >> r.height) || c1 != ',' || c2 != ',' || c3 != ',' ||
      (in >> rest))
    throw Error("bad rectangle '" + text + "' (expected x,y,w,h, e.g. 40,30,200,150)");
  if (r.width <= 0 || r.height <= 0)
    throw Error("bad rectangle '" + text + "': width and height must be positive");
  if (r.x < 0 || r.y < 0) throw Error("bad rectangle '" + text + "': x and y must be >= 0");
  return r;
}

Seeds SeedsFromRectangle(int width, int height, const Rect& r) {
  const std::string text = std::to_string(r.x) + "," + std::to_string(r.y) + "," + std::to_string(r.width) + "," +
                           std::to_string(r.height);
  if (r.width <= 0 || r.height <= 0) throw Error("rectangle " + text + " is empty");
  if (r.x < 0 || r.y < 0 || std::int64_t{r.x} + r.width > width || std::int64_t{r.y} + r.height > height)
    throw Error("rectangle " + text + " does not fit in the " + std::to_string(width) + "x" + std::to_string(height) +
                " image");
  if (r.width == width && r.height == height)
    throw Error("rectangle " + text + " covers the whole image: no background pixels to learn from");
  Seeds seeds = Seeds::Unknown(width, height);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      if (x < r.x || x >= r.x + r.width || y < r.y || y >= r.y + r.height)
        seeds.labels[static_cast<std::size_t>(y) * width + x] = static_cast<std::uint8_t>(SeedLabel::kBackground);
  return seeds;
}

// ---- The model -----------------------------------------------------------------------------------

Cost HardConstraintCost(const Model& model) {
  model.CheckShapeOrThrow(false);  // it reads the weights only
  const Topology& t = model.topology;
  Energy most = 0;  // the largest sum of weights around one node
  if (t.is_grid()) {
    // Rows of nodes on all cores, each summing its edges both ways: no per-node array to fill.
    const NodeId n = t.num_nodes();
    most = tbb::parallel_reduce(
        tbb::blocked_range<std::int64_t>(0, std::int64_t{t.height()} * t.depth()), Energy{0},
        [&](const tbb::blocked_range<std::int64_t>& rows, Energy best) {
          for (std::int64_t row = rows.begin(); row < rows.end(); ++row) {
            const int y = static_cast<int>(row % t.height()), z = static_cast<int>(row / t.height());
            for (int x = 0; x < t.width(); ++x) {
              const NodeId p = static_cast<NodeId>(row * t.width() + x);
              Energy sum = 0;
              for (int d = 0; d < t.num_directions(); ++d) {
                if (t.ForwardNeighbor(x, y, z, d) >= 0) sum += model.edge_weight(EdgeId{d} * n + p);
                const NodeId r = t.BackwardNeighbor(x, y, z, d);
                if (r >= 0) sum += model.edge_weight(EdgeId{d} * n + r);
              }
              best = std::max(best, sum * model.pairwise.lambda);
            }
          }
          return best;
        },
        [](Energy a, Energy b) { return std::max(a, b); });
  } else {
    std::vector<Energy> incident(static_cast<std::size_t>(model.num_nodes()), 0);
    t.ForEachEdge([&](EdgeId slot, NodeId p, NodeId q) {
      const Energy w = Energy{model.edge_weight(slot)} * model.pairwise.lambda;
      incident[p] += w;
      incident[q] += w;
    });
    most = incident.empty() ? 0 : *std::max_element(incident.begin(), incident.end());
  }
  const Energy k = 1 + most;
  if (k > kMaxCost)
    throw Error("hard-constraint cost " + std::to_string(k) + " does not fit a 32-bit cost (lower --lambda)");
  return static_cast<Cost>(k);
}

void SetSegmentationUnaries(Model* model, const Image& image, const ColourModel& foreground,
                            const ColourModel& background, const Seeds* seeds) {
  CheckImage(image);
  if (foreground.channels() != image.channels || background.channels() != image.channels)
    throw Error("colour models read " + std::to_string(foreground.channels()) + " channels, the image has " +
                std::to_string(image.channels));
  if (model->num_nodes() != static_cast<NodeId>(image.size()))
    throw Error("segmentation model has " + std::to_string(model->num_nodes()) + " nodes for " +
                std::to_string(image.size()) + " pixels");
  if (seeds && (seeds->width != image.width || seeds->height != image.height ||
                seeds->labels.size() != image.size()))
    throw Error("seeds are " + std::to_string(seeds->width) + "x" + std::to_string(seeds->height) +
                " but the image is " + std::to_string(image.width) + "x" + std::to_string(image.height));
  if (model->num_labels != 2)
    throw Error("segmentation model has " + std::to_string(model->num_labels) + " labels, not 2");
  const double scale = model->cost_scale;
  if (model->unary.size() != image.size() * 2) model->unary = NewZeroedVector<Cost>(image.size() * 2);
  const Cost hard = seeds ? HardConstraintCost(*model) : 0;  // (after the unary costs' resize: it checks the shape)

  // Grey images have 256 values: tabulate. Colour images are evaluated per pixel.
  Cost table[2][256];
  const bool grey = image.channels == 1;
  auto cost_of = [&](const ColourModel& m, const std::uint8_t* v, const char* which) {
    return Quantize(m.NegLogProbability(v), scale, [&] {
      return std::string(which) + " data cost of colour " + std::to_string(v[0]) + "...";
    });
  };
  if (grey)
    for (int v = 0; v < 256; ++v) {
      const std::uint8_t value = static_cast<std::uint8_t>(v);
      table[0][v] = cost_of(background, &value, "background");
      table[1][v] = cost_of(foreground, &value, "foreground");
    }
  auto set_pixel = [&](std::size_t p) {
    const SeedLabel seed = seeds ? static_cast<SeedLabel>(seeds->labels[p]) : SeedLabel::kUnknown;
    Cost bg = 0, fg = 0;
    if (seed == SeedLabel::kForeground) {
      bg = hard;
    } else if (seed == SeedLabel::kBackground) {
      fg = hard;
    } else if (grey) {
      bg = table[0][image.pixels[p]];
      fg = table[1][image.pixels[p]];
    } else {
      bg = cost_of(background, &image.pixels[p * 3], "background");
      fg = cost_of(foreground, &image.pixels[p * 3], "foreground");
    }
    model->unary[2 * p] = bg;
    model->unary[2 * p + 1] = fg;
  };
  // Blocks of pixels on all cores. A cost that cannot be quantised stops its block; the first such
  // pixel is then set again on this thread, which throws the message a serial pass would have.
  std::atomic<std::size_t> first_bad{image.size()};
  tbb::parallel_for(tbb::blocked_range<std::size_t>(0, image.size(), 1 << 14), [&](const tbb::blocked_range<std::size_t>& r) {
    for (std::size_t p = r.begin(); p < r.end(); ++p) {
      try {
        set_pixel(p);
      } catch (const Error&) {
        std::size_t seen = first_bad.load();
        while (p < seen && !first_bad.compare_exchange_weak(seen, p)) {
        }
        return;
      }
    }
  });
  if (first_bad.load() < image.size()) set_pixel(first_bad.load());
}

Model BuildSegmentationModel(const Image& image, const ColourModel& foreground, const ColourModel& background,
                             const Seeds* seeds, const ContrastOptions& contrast) {
  CheckImage(image);
  Model model;
  model.topology = Topology::Grid2D(image.width, image.height, contrast.connectivity);
  model.num_labels = 2;
  model.cost_scale = contrast.cost_scale;
  model.pairwise.kind = PairwiseKind::kPotts;
  model.pairwise.lambda = 1;
  model.edge_weights = ContrastWeights(image, model.topology, contrast);
  SetSegmentationUnaries(&model, image, foreground, background, seeds);
  model.ValidateOrThrow();
  return model;
}

double MaskErrorPercent(const Labeling& mask, const Labeling& truth) {
  if (mask.size() != truth.size())
    throw Error("mask has " + std::to_string(mask.size()) + " pixels, the ground truth " +
                std::to_string(truth.size()));
  if (mask.empty()) return 0.0;
  std::int64_t wrong = 0;
  for (std::size_t p = 0; p < mask.size(); ++p) wrong += (mask[p] != 0) != (truth[p] != 0);
  return 100.0 * static_cast<double>(wrong) / static_cast<double>(mask.size());
}

// ---- The Boykov-Jolly / GrabCut loop -------------------------------------------------------------

const char* ToString(ColourModelKind kind) { return kind == ColourModelKind::kGmm ? "gmm" : "histogram"; }

ColourModelKind ParseColourModelKind(const std::string& name) {
  if (name == "histogram") return ColourModelKind::kHistogram;
  if (name == "gmm") return ColourModelKind::kGmm;
  throw Error("unknown colour model '" + name + "' (expected histogram or gmm)");
}

bool SegmentationOptions::IsValid(std::string* error) const {
  auto fail = [&](const std::string& m) {
    if (error) *error = m;
    return false;
  };
  if (histogram_bins < 1 || histogram_bins > 256)
    return fail("histogram bins must be in 1..256 (got " + std::to_string(histogram_bins) + ")");
  if (!(histogram_prior > 0)) return fail("histogram prior must be positive");
  if (gmm.components < 1 || gmm.components > GaussianMixture::kMaxComponents)
    return fail("GMM components must be in 1.." + std::to_string(GaussianMixture::kMaxComponents) + " (got " +
                std::to_string(gmm.components) + ")");
  if (iterations < 1 || iterations > 1000)
    return fail("iterations must be in 1..1000 (got " + std::to_string(iterations) + ")");
  try {
    CheckContrast(contrast);
  } catch (const Error& e) {
    return fail(e.what());
  }
  return true;
}

namespace {

// Fits one colour model to the pixels where mask == value; `previous` (may be null) warm-starts
// Gaussian mixtures (the GrabCut re-estimation).
std::unique_ptr<ColourModel> FitModel(const Image& image, const std::vector<std::uint8_t>& mask, std::uint8_t value,
                                      const SegmentationOptions& o, const ColourModel* previous) {
  if (o.colour_model == ColourModelKind::kHistogram) {
    auto h = std::make_unique<ColourHistogram>(image.channels, o.histogram_bins, o.histogram_prior);
    h->AddPixels(image, mask, value);
    return h;
  }
  if (const auto* g = dynamic_cast<const GaussianMixture*>(previous))
    return std::make_unique<GaussianMixture>(g->RefitPixels(image, mask, value, o.gmm));
  return std::make_unique<GaussianMixture>(GaussianMixture::FitPixels(image, mask, value, o.gmm));
}

}  // namespace

double SegmentationBytes(int width, int height, const std::string& backend) {
  const double per_pixel = backend == "boost-bk" ? 750 : backend == "tbb-pr" ? 130 : 170;  // the peaks, rounded up
  return per_pixel * width * height;
}

void CheckSegmentationFits(int width, int height, const std::string& backend) {
  CheckFitsInMemory(SegmentationBytes(width, height, backend),
                    "the image, models and graph of " + std::to_string(width) + "x" + std::to_string(height) + " pixels");
}

Segmentation SegmentImage(const Image& image, const Seeds& seeds, const SegmentationOptions& options,
                          const SolveOptions& solve, const std::function<void(const SegmentationRound&)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  CheckImage(image);
  CheckSegmentationFits(image.width, image.height, solve.solver);
  std::string error;
  if (!options.IsValid(&error)) throw Error(error);
  if (seeds.width != image.width || seeds.height != image.height || seeds.labels.size() != image.size())
    throw Error("seeds are " + std::to_string(seeds.width) + "x" + std::to_string(seeds.height) +
                " but the image is " + std::to_string(image.width) + "x" + std::to_string(image.height));

  if (!seeds.training.empty() && seeds.training.size() != image.size())
    throw Error("seed training labels have " + std::to_string(seeds.training.size()) + " values for " +
                std::to_string(image.size()) + " pixels");

  // First fit: the training labels, else the foreground seeds or (a rectangle: no foreground
  // seeds) every unknown pixel, and the background seeds.
  const std::size_t n = image.size();
  std::vector<std::uint8_t> fit_mask(n);  // 1 = foreground sample, 2 = background sample, 0 = none
  const bool has_fg_seeds = seeds.Count(SeedLabel::kForeground) > 0;
  for (std::size_t p = 0; p < n; ++p) {
    const auto s = static_cast<SeedLabel>(seeds.training.empty() ? seeds.labels[p] : seeds.training[p]);
    if (s == SeedLabel::kBackground) fit_mask[p] = 2;
    else if (s == SeedLabel::kForeground || (seeds.training.empty() && !has_fg_seeds)) fit_mask[p] = 1;
    else fit_mask[p] = 0;
  }
  if (std::count(fit_mask.begin(), fit_mask.end(), 1) == 0)
    throw Error("no foreground pixels to learn the foreground colours from");
  if (std::count(fit_mask.begin(), fit_mask.end(), 2) == 0)
    throw Error("no background pixels to learn the background colours from");

  Segmentation out;
  SolveOptions solve_options = solve;
  solve_options.algorithm = Algorithm::kMaxFlow;
  if (options.keep_graph && options.iterations > 1 && !solve_options.kept_cut)
    solve_options.kept_cut = std::make_shared<KeptCut>();

  auto model_start = std::chrono::steady_clock::now();
  std::unique_ptr<ColourModel> fg = FitModel(image, fit_mask, 1, options, nullptr);
  std::unique_ptr<ColourModel> bg = FitModel(image, fit_mask, 2, options, nullptr);
  out.model = BuildSegmentationModel(image, *fg, *bg, &seeds, options.contrast);
  double model_ms = MsSince(model_start);
  out.setup_ms = MsSince(start);

  for (int round = 1; round <= options.iterations; ++round) {
    SegmentationRound r;
    r.round = round;
    if (round > 1) {
      // GrabCut: re-fit both models to the current mask. A class that vanished keeps its model.
      model_start = std::chrono::steady_clock::now();
      for (std::size_t p = 0; p < n; ++p) fit_mask[p] = out.mask[p] ? 1 : 2;
      const std::int64_t fg_count = std::count(fit_mask.begin(), fit_mask.end(), 1);
      if (fg_count > 0) fg = FitModel(image, fit_mask, 1, options, fg.get());
      if (fg_count < static_cast<std::int64_t>(n)) bg = FitModel(image, fit_mask, 2, options, bg.get());
      SetSegmentationUnaries(&out.model, image, *fg, *bg, &seeds);
      model_ms = MsSince(model_start);
      r.energy_before = EvaluateEnergy(out.model, out.mask).total;
    }
    r.model_ms = model_ms;
    r.foreground_model = fg->Describe();
    r.background_model = bg->Describe();
    Result result = Solve(out.model, solve_options);
    if (!result.ok) throw Error("graph cut failed: " + result.message);
    r.solve_ms = result.timings.total_ms;
    r.energy = result.energy;
    // On all cores, as the 64 MB copy of a 4096 x 4096 mask (one core: about 40 ms on the GPU machine).
    std::atomic<std::int64_t> foreground{0}, changed{0};
    const Label* labels = result.labels.data();
    const Label* before = round == 1 ? nullptr : out.mask.data();
    ForPiecesOfLabels(n, [&](std::size_t begin, std::size_t end) {
      std::int64_t piece_foreground = 0, piece_changed = 0;
      for (std::size_t p = begin; p < end; ++p) {
        piece_foreground += labels[p];
        piece_changed += labels[p] != (before ? before[p] : 0);
      }
      foreground += piece_foreground;
      changed += piece_changed;
    });
    r.foreground = foreground;
    r.changed = changed;
    AssignLabeling(&out.mask, result.labels);
    out.result = std::move(result);
    out.rounds.push_back(r);
    if (progress) progress(r);
    if (round > 1 && r.changed == 0 && options.stop_when_converged) break;
  }
  return out;
}

}  // namespace mrf
