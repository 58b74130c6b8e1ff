#include "inference/icm.h"

#include <chrono>

#include "inference/iteration_control.h"
#include "inference/move_graph.h"

namespace mrf {

void RunIcm(const Model& model, const SolveOptions& options, Result* out) {
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  if (!options.IsValid(&error)) throw Error(error);
  model.ValidateOrThrow();
  Labeling labels = InitialLabels(model, options);
  const LabelCosts cost(model);
  const Adjacency adjacency(model.topology);
  Energy energy = EvaluateEnergy(model, labels).total;
  out->timings.setup_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  IterationControl control(options, out);
  const NodeId n = model.num_nodes();
  const Label num_labels = model.num_labels;
  // The cost of giving `node` the label `l`, its neighbours keeping theirs.
  auto local_cost = [&](NodeId node, Label l) {
    Energy e = model.unary_cost(node, l);
    for (const Adjacency::Entry* edge = adjacency.begin(node); edge != adjacency.end(node); ++edge) {
      const Label other = labels[edge->other];
      e += edge->node_is_from ? cost.edge(edge->slot, l, other) : cost.edge(edge->slot, other, l);
    }
    return e;
  };
  std::string stop;
  for (int sweep = 1;; ++sweep) {
    std::int64_t changed = 0;
    for (NodeId p = 0; p < n; ++p) {
      const Label current = labels[p];
      const Energy current_cost = local_cost(p, current);
      Energy best_cost = current_cost;
      Label best = current;
      for (Label l = 0; l < num_labels; ++l) {
        if (l == current) continue;
        const Energy c = local_cost(p, l);
        if (c < best_cost) {
          best_cost = c;
          best = l;
        }
      }
      if (best != current) {
        labels[p] = best;
        energy += best_cost - current_cost;  // only p's terms change
        ++changed;
      }
    }
    const bool go_on = control.Record(sweep, energy, std::to_string(changed) + " nodes changed");
    if (changed == 0) {
      stop = "converged after " + std::to_string(sweep) + (sweep == 1 ? " sweep" : " sweeps") +
             ": no single node can lower the energy";
      break;
    }
    if (!go_on) {
      stop = "stopped by the callback after sweep " + std::to_string(sweep);
      break;
    }
    if (control.TimeUp()) {
      stop = "stopped by the time limit (" + SecondsText(options.time_limit_s) + ") after sweep " +
             std::to_string(sweep);
      break;
    }
    if (sweep >= options.max_iterations) {
      stop = "stopped at the iteration limit (" + std::to_string(options.max_iterations) + " sweeps)";
      break;
    }
  }
  out->message = stop;
  out->labels = std::move(labels);
  out->timings.solve_ms = control.elapsed_ms();
}

}  // namespace mrf
