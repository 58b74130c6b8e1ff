// example-custom-energy: how to write your own data term and pairwise table (see energies/custom.h).
//
// The task: split a noisy grey picture into K grey classes. The data term is a real-valued negative
// log-likelihood (Gaussian noise of standard deviation sigma around each class's grey level); the
// pairwise table says that a step to a neighbouring class is cheaper than a jump across several.
// Both are plain C++ callbacks; BuildCustomModel quantises them with a reported scale, mrf::Solve
// minimises the integer energy, and the program checks that energy / scale matches the real energy
// computed directly from the callbacks.
#include <cmath>
#include <cstdio>

#include "common/app.h"
#include "energies/custom.h"
#include "energies/restoration.h"
#include "mrf/io/image.h"
#include "mrf/solve.h"

int main(int argc, char** argv) {
  CLI::App cli{
      "example-custom-energy: K-class segmentation of a grey picture with a custom data term and a "
      "custom pairwise table (the source is the tutorial). With no IMAGE it generates a noisy picture."};
  std::string image_path, output_path, algorithm = "auto", device = "auto";
  int classes = 5;
  double sigma = 25.0, step_cost = 1.0, jump_cost = 1.5;
  std::uint64_t seed = 0;
  auto* image_opt = cli.add_option("IMAGE", image_path, "Grey (or colour, converted to grey) picture");
  cli.add_option("--classes", classes, "Number of grey classes K (labels)")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  cli.add_option("--sigma", sigma, "Noise standard deviation of the data term")
      ->check(mrf::app::FinitePositive())
      ->capture_default_str();
  cli.add_option("--step-cost", step_cost, "Pairwise cost between neighbouring classes")
      ->check(mrf::app::FiniteNonNegative())
      ->capture_default_str();
  cli.add_option("--jump-cost", jump_cost, "Pairwise cost between classes two or more apart")
      ->check(mrf::app::FiniteNonNegative())
      ->capture_default_str();
  cli.add_option("--algorithm", algorithm, "auto|maxflow|expansion|swap|icm|bp (maxflow: two labels only)")->capture_default_str();
  cli.add_option("--device", device, "auto|cpu|cuda")->capture_default_str();
  cli.add_option("--seed", seed, "Seed of the generated picture (without IMAGE)")
      ->check(mrf::app::FiniteNonNegative())
      ->excludes(image_opt)
      ->capture_default_str();
  cli.add_option("-o,--output", output_path, "Write the class map as a grey PNG");

  return mrf::app::Run("example-custom-energy", argc, argv, cli, [&] {
    mrf::app::CheckOutputs({{"IMAGE", image_path}}, {{"-o", output_path}});
    const mrf::Image picture = image_path.empty() ? mrf::MakeSyntheticRestoration(96, 72, seed, 30.0, 0).noisy
                                                  : mrf::ToGrey(mrf::LoadImage(image_path));
    const int width = picture.width, height = picture.height;
    auto level = [&](mrf::Label k) { return 255.0 * k / (classes - 1); };

    // 1. The energy as callbacks returning real numbers.
    mrf::CustomEnergy energy;
    energy.topology = mrf::Topology::Grid2D(width, height, 4);
    energy.num_labels = classes;
    energy.data = [&](mrf::NodeId p, mrf::Label k) {
      const double r = (picture.pixels[p] - level(k)) / sigma;
      return 0.5 * r * r;  // -log of a Gaussian likelihood, without the constant
    };
    energy.distance = [&](mrf::Label a, mrf::Label b) {
      const int gap = std::abs(a - b);
      return gap == 0 ? 0.0 : gap == 1 ? step_cost : jump_cost;
    };
    // 2. Quantise (scale chosen automatically) and 3. solve.
    const mrf::Model model = mrf::BuildCustomModel(energy);
    std::string why;
    const bool metric = model.pairwise.IsMetric(model.num_labels, &why);
    std::printf("model:       %s, %d classes, costs scaled by %g\n", model.topology.Describe().c_str(), classes,
                model.cost_scale);
    std::printf("table:       %s\n", metric ? "a metric (expansion applies)" : ("not a metric: " + why).c_str());

    mrf::SolveOptions options;
    options.algorithm = mrf::ParseAlgorithm(algorithm);
    options.device = mrf::ParseDevice(device);
    const mrf::Result result = mrf::Solve(model, options);
    if (!result.ok) throw mrf::Error(result.message);
    std::printf("%s", result.BriefReport().c_str());

    // The real energy of the answer, straight from the callbacks: it matches energy / scale up to
    // the rounding of each term (at most half a unit each).
    double real = 0;
    for (mrf::NodeId p = 0; p < model.num_nodes(); ++p) real += energy.data(p, result.labels[p]);
    model.topology.ForEachEdge([&](mrf::EdgeId, mrf::NodeId p, mrf::NodeId q) {
      real += energy.distance(result.labels[p], result.labels[q]);
    });
    const double terms = static_cast<double>(model.num_nodes() + model.topology.num_edges());
    std::printf("real energy: %.4f (integer energy / scale = %.4f, rounding bound %.4f)\n", real,
                static_cast<double>(result.energy) / model.cost_scale, 0.5 * terms / model.cost_scale);
    if (std::fabs(real - result.energy / model.cost_scale) > 0.5 * terms / model.cost_scale)
      throw mrf::Error("internal error: the quantised energy does not match the real one");

    if (!output_path.empty()) {
      mrf::Image out = mrf::Image::Filled(width, height, 1);
      for (std::size_t p = 0; p < out.pixels.size(); ++p)
        out.pixels[p] = static_cast<std::uint8_t>(std::lround(level(result.labels[p])));
      mrf::SavePng(output_path, out);
      std::printf("wrote:       %s\n", mrf::app::OneLine(output_path).c_str());
    }
    return 0;
  });
}
