#pragma once
// Tiny random multilabel models and brute-force move optima for the expansion, swap and ICM tests.

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mrf/model.h"
#include "mrf/options.h"
#include "mrf/solve.h"
#include "support/test_support.h"

namespace mrf::test {

/// One tiny model and a name for failure messages.
struct TinyCase {
  Model model;
  std::string name;
};

/// Small topologies whose L^n labellings brute force can enumerate: 4- and 8-connected grids, a
/// 6-connected 3-D grid (up to 3 labels) and a random edge list (with a repeated edge), sized for
/// `labels`.
inline std::vector<Topology> TinyTopologies(std::mt19937_64& rng, Label labels) {
  std::vector<Topology> t;
  if (labels <= 3) {
    t.push_back(Topology::Grid2D(3, 3, 4));
    t.push_back(Topology::Grid2D(3, 3, 8));
    t.push_back(Topology::Grid3D(2, 2, 2));
  } else {
    t.push_back(Topology::Grid2D(3, 2, 4));
    t.push_back(Topology::Grid2D(2, 4, 8));
  }
  const NodeId n = labels <= 3 ? 8 : 6;
  std::vector<NodeId> from, to;
  std::uniform_int_distribution<NodeId> pick(0, n - 1);
  for (int e = 0; e < 9; ++e) {
    NodeId p = pick(rng), q = pick(rng);
    while (q == p) q = pick(rng);
    from.push_back(p);
    to.push_back(q);
  }
  from.push_back(from[0]);  // a repeated edge, in the other direction
  to.push_back(to[0]);
  std::swap(from.back(), to.back());
  t.push_back(Topology::EdgeList(n, from, to));
  return t;
}

/// A random metric table: distances of random points on a line, capped (a truncated metric), so
/// expansion is exact on it.
inline Pairwise RandomMetricTable(std::mt19937_64& rng, Label labels) {
  std::vector<int> position(static_cast<std::size_t>(labels));
  for (int& x : position) x = static_cast<int>(rng() % 7);
  const int cap = 1 + static_cast<int>(rng() % 6);
  Pairwise v;
  v.kind = PairwiseKind::kTable;
  v.lambda = 1 + static_cast<Cost>(rng() % 3);
  for (Label a = 0; a < labels; ++a)
    for (Label b = 0; b < labels; ++b) v.table.push_back(std::min(std::abs(position[a] - position[b]), cap));
  return v;
}

/// Random metric models: Potts, truncated linear and metric tables, with and without edge weights,
/// 2-5 labels, on every tiny topology. `per_kind` models per combination.
inline std::vector<TinyCase> TinyMetricModels(std::uint64_t seed, int per_kind = 1, Label min_labels = 2,
                                              Label max_labels = 5) {
  std::mt19937_64 rng(seed);
  std::vector<TinyCase> cases;
  for (Label labels = min_labels; labels <= max_labels; ++labels)
    for (const Topology& topology : TinyTopologies(rng, labels))
      for (int kind = 0; kind < 3; ++kind)
        for (int weighted = 0; weighted < 2; ++weighted)
          for (int i = 0; i < per_kind; ++i) {
            Pairwise v;
            if (kind == 0) {
              v.kind = PairwiseKind::kPotts;
              v.lambda = 1 + static_cast<Cost>(rng() % 12);
            } else if (kind == 1) {
              v.kind = PairwiseKind::kTruncatedLinear;
              v.lambda = 1 + static_cast<Cost>(rng() % 6);
              v.truncation = 1 + static_cast<Cost>(rng() % labels);
            } else {
              v = RandomMetricTable(rng, labels);
            }
            TinyCase c;
            c.model = RandomModel(rng, topology, labels, 20, v, weighted ? 4 : 1);
            c.name = topology.Describe() + ", " + std::to_string(labels) + " labels, " + ToString(v.kind) +
                     (weighted ? ", weighted" : "") + " #" + std::to_string(i);
            cases.push_back(std::move(c));
          }
  return cases;
}

/// A truncated-quadratic model (not a metric when truncation > 2).
inline Model TinyQuadraticModel(std::mt19937_64& rng, const Topology& topology, Label labels, Cost truncation) {
  Pairwise v;
  v.kind = PairwiseKind::kTruncatedQuadratic;
  v.lambda = 1 + static_cast<Cost>(rng() % 4);
  v.truncation = truncation;
  return RandomModel(rng, topology, labels, 30, v, 3);
}

/// Options that run one named solver, recording every iteration's energy in `energies`.
inline SolveOptions OptionsFor(const std::string& solver, std::vector<Energy>* energies = nullptr) {
  SolveOptions o;
  o.solver = solver;
  o.max_iterations = 1000;
  if (energies)
    o.callback = [energies](const IterationRecord& r) {
      energies->push_back(r.energy);
      return true;
    };
  return o;
}

/// Checks what every iterative solve must satisfy: ok, the energy matches the labels, the log is
/// non-increasing, starts no higher than the start, and its last entry is the final energy.
inline void ExpectMonotoneRun(const Model& model, const SolveOptions& options, const Result& r,
                              const std::vector<Energy>& callback_energies, const std::string& name) {
  ASSERT_TRUE(r.ok) << name << ": " << r.message;
  const Labeling start = options.initial_labels.empty() ? Labeling(model.num_nodes(), 0) : options.initial_labels;
  const Energy start_energy = EvaluateEnergy(model, start).total;
  EXPECT_EQ(r.energy, EvaluateEnergy(model, r.labels).total) << name;
  ASSERT_FALSE(r.log.empty()) << name;
  ASSERT_EQ(callback_energies.size(), r.log.size()) << name;
  Energy previous = start_energy;
  for (std::size_t i = 0; i < r.log.size(); ++i) {
    EXPECT_EQ(callback_energies[i], r.log[i].energy) << name;
    EXPECT_LE(r.log[i].energy, previous) << name << ": energy rose in iteration " << i + 1;
    previous = r.log[i].energy;
  }
  EXPECT_EQ(r.log.back().energy, r.energy) << name << ": the log's last energy is not the result's";
  EXPECT_EQ(r.iterations, static_cast<std::int64_t>(r.log.size())) << name;
}

/// Solves a tiny case with `solver` and checks the run: monotone, on that solver, converged.
inline Result SolveConvergedRun(const TinyCase& c, const std::string& solver) {
  std::vector<Energy> energies;
  const SolveOptions options = OptionsFor(solver, &energies);
  const Result r = Solve(c.model, options);
  ExpectMonotoneRun(c.model, options, r, energies, c.name);
  EXPECT_EQ(r.backend_used, solver);
  EXPECT_NE(r.message.find("converged"), std::string::npos) << c.name << ": " << r.message;
  return r;
}

/// Checks a run made by calling a move algorithm directly (no mrf::Solve, which scores the result):
/// scores `r` with the reference evaluator, then checks it as ExpectMonotoneRun does.
inline void ExpectMonotoneDirectRun(const Model& model, const SolveOptions& options, Result* r,
                                    const std::vector<Energy>& callback_energies, const std::string& name) {
  r->ok = true;
  r->energy = EvaluateEnergy(model, r->labels).total;
  ExpectMonotoneRun(model, options, *r, callback_energies, name);
}

/// With two labels a move solver must find the exact optimum (brute force) on tiny models.
inline void ExpectExactWithTwoLabels(const std::string& solver, std::uint64_t seed) {
  for (const TinyCase& c : TinyMetricModels(seed, 2, 2, 2)) {
    const Result r = Solve(c.model, OptionsFor(solver));
    ASSERT_TRUE(r.ok) << c.name << ": " << r.message;
    EXPECT_EQ(r.energy, BruteForceMinEnergy(c.model)) << c.name;
  }
}

/// Minimum energy over every labelling that changes only `free` nodes, each to a label `choice`
/// offers (choice(p) lists the labels node p may take, its current one included).
inline Energy BestMove(const Model& model, const Labeling& labels, const std::vector<NodeId>& free,
                       const std::function<std::vector<Label>(NodeId)>& choice, Labeling* best = nullptr) {
  Labeling x = labels;
  Energy best_energy = EvaluateEnergy(model, x).total;
  if (best) *best = x;
  std::vector<std::vector<Label>> options;
  for (NodeId p : free) options.push_back(choice(p));
  std::vector<std::size_t> index(free.size(), 0);
  while (true) {
    for (std::size_t i = 0; i < free.size(); ++i) x[free[i]] = options[i][index[i]];
    const Energy e = EvaluateEnergy(model, x).total;
    if (e < best_energy) {
      best_energy = e;
      if (best) *best = x;
    }
    std::size_t i = 0;
    while (i < free.size() && ++index[i] == options[i].size()) index[i++] = 0;
    if (i == free.size()) break;
  }
  return best_energy;
}

/// The best alpha-expansion of `labels` (every node may keep its label or take alpha), by brute force.
inline Energy BestExpansion(const Model& model, const Labeling& labels, Label alpha) {
  std::vector<NodeId> free;
  for (NodeId p = 0; p < model.num_nodes(); ++p)
    if (labels[p] != alpha) free.push_back(p);
  return BestMove(model, labels, free, [&](NodeId p) { return std::vector<Label>{labels[p], alpha}; });
}

/// The best alpha-beta swap of `labels`, by brute force.
inline Energy BestSwap(const Model& model, const Labeling& labels, Label a, Label b) {
  std::vector<NodeId> free;
  for (NodeId p = 0; p < model.num_nodes(); ++p)
    if (labels[p] == a || labels[p] == b) free.push_back(p);
  return BestMove(model, labels, free, [&](NodeId) { return std::vector<Label>{a, b}; });
}

}  // namespace mrf::test
