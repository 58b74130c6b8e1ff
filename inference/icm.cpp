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
  if (options.initial_labels.empty()) {
    // The classic start (and the reference implementation's): every node's cheapest data label.
    for (NodeId p = 0; p < model.num_nodes(); ++p) {
      Label best = 0;
      for (Label l = 1; l < model.num_labels; ++l)
        if (model.unary_cost(p, l) < model.unary_cost(p, best)) best = l;
      labels[p] = best;
    }
  }
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
      // The lowest label of least local cost, as the reference implementation picks it: never
      // worse than the current label, and the same labelling whatever the sweep saw before.
      const Label current = labels[p];
      Energy current_cost = 0, best_cost = 0;
      Label best = 0;
      for (Label l = 0; l < num_labels; ++l) {
        const Energy c = local_cost(p, l);
        if (l == current) current_cost = c;
        if (l == 0 || c < best_cost) {
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
             ": every node has its best label given its neighbours";
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
