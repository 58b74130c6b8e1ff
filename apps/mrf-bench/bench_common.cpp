#include "mrf-bench/bench_common.h"
#include "mrf/io/read_file.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace mrf::bench {

double Median(std::vector<double> values) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

std::string Cell(double value, const char* format) {
  if (value < 0) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, format, value);
  return buffer;
}

std::vector<std::string> SplitNames(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) names.push_back(name);
  return names;
}

bool IsWanted(const std::vector<std::string>& wanted, const std::string& name) {
  return wanted.empty() || std::find(wanted.begin(), wanted.end(), name) != wanted.end();
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

int Repeats(const BenchOptions& options) { return options.quick ? std::min(options.repeat, 2) : options.repeat; }

std::vector<const SolverEntry*> AvailableSolvers(const std::vector<std::string>& wanted,
                                                 const std::function<bool(const SolverEntry&)>& keep) {
  const Registry& registry = Registry::Global();
  std::vector<const SolverEntry*> solvers;
  for (const SolverEntry& e : registry.entries()) {
    if (!keep(e) || !IsWanted(wanted, e.name)) continue;
    std::string why;
    if (!registry.IsAvailable(e.name, &why)) {
      std::printf("# %s skipped: %s\n", e.name.c_str(), why.c_str());
      continue;
    }
    solvers.push_back(&e);
  }
  return solvers;
}

void WriteJsonFile(const std::string& path, const std::string& text) { mrf::WriteWholeFile(path, text, "--json file"); }

void WriteJsonRows(const std::string& path, const std::vector<std::string>& objects) {
  std::string text = "[\n";
  for (std::size_t i = 0; i < objects.size(); ++i) text += "  " + objects[i] + (i + 1 < objects.size() ? ",\n" : "\n");
  WriteJsonFile(path, text + "]\n");
}

std::vector<int> SceneSides(const BenchOptions& options, std::vector<int> quick_default, std::vector<int> full_default) {
  std::vector<int> sizes = options.sizes;
  if (sizes.empty()) sizes = options.quick ? std::move(quick_default) : std::move(full_default);
  for (int s : sizes)
    if (s < 4 || s > 16384) throw Error("--sizes: side " + std::to_string(s) + " is outside 4..16384");
  return sizes;
}

StGraph SceneGraph(const Model& model) {
  if (model.num_labels != 2 || model.pairwise.kind != PairwiseKind::kPotts || !model.topology.is_grid())
    throw Error("binary suite: the synthetic scene should be a two-label Potts model on a grid");
  StGraph graph(model.topology);
  for (NodeId p = 0; p < model.num_nodes(); ++p) graph.add_tweights(p, model.unary_cost(p, 1), model.unary_cost(p, 0));
  model.topology.ForEachEdge([&](EdgeId slot, NodeId, NodeId) {
    const Cost w = model.pairwise_cost(slot, 0, 1);
    if (w) graph.add_to_edge_slot(slot, w, w);
  });
  return graph;
}

std::int64_t PaintStroke(StGraph* graph, int cx, int cy, int radius, bool foreground) {
  constexpr Energy kForce = 100000;  // more than the four n-links of a pixel together
  const int width = graph->topology().width(), height = graph->topology().height();
  std::int64_t count = 0;
  for (int y = std::max(0, cy - radius); y <= std::min(height - 1, cy + radius); ++y)
    for (int x = std::max(0, cx - radius); x <= std::min(width - 1, cx + radius); ++x)
      if ((x - cx) * (x - cx) + (y - cy) * (y - cy) <= radius * radius) {
        graph->set_tweights(y * width + x, foreground ? 0 : kForce, foreground ? kForce : 0);
        ++count;
      }
  return count;
}

void CheckResolvedFlow(const std::string& solver, Energy resolved, const Result& fresh, const StGraph& graph) {
  if (fresh.flow + graph.constant() != resolved)
    throw Error("FLOW MISMATCH: " + solver + " re-solved " + std::to_string(resolved) + " but a fresh solve found " +
                std::to_string(fresh.flow + graph.constant()));
}

}  // namespace mrf::bench
