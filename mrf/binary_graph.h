#pragma once
/// @file binary_graph.h
/// @brief Builds the s-t graph whose minimum cut minimises a two-label model (Kolmogorov-Zabih).

#include <memory>
#include <string>

#include "mrf/model.h"
#include "mrf/st_graph.h"

namespace mrf {

/// A one-cut solve's s-t graph and max-flow engine, kept for the next solve of a model that differs
/// only in its unary costs (GrabCut's rounds, the frames of a video): give the same one to those
/// solves through SolveOptions::kept_cut. The next solve of a grid model by the same engine, whose
/// graph has the same topology and edge capacities, rewrites the terminal capacities that changed
/// and hands the engine a re-solve: cpu-bk and small grids re-solve from the residual graph (dynamic
/// graph cuts, Kohli and Torr); the push-relabel engines solve dense edits of large grids afresh on
/// their kept workspace (PushRelabelEngine::DenseEditFraction); boost-bk always solves afresh. Any
/// other solve builds afresh and keeps its own graph; a failed one leaves nothing kept. Edge lists
/// are always built afresh. One solve at a time.
struct KeptCut {
  std::string engine_name;                ///< The registry name of the engine below.
  std::unique_ptr<StGraph> graph;         ///< The last solve's graph (changes recorded since it).
  std::unique_ptr<MaxFlowEngine> engine;  ///< The engine that solved it, with its workspace.
};

/// Builds the graph of a submodular two-label model. Grid models give grid-shaped graphs, edge
/// lists give general graphs. Label 0 is the source side. For every labelling x,
/// E(x) = cut capacity(x) + `*energy_offset`, so the minimum cut gives the minimum energy.
/// Throws mrf::Error if the model is invalid, has other than 2 labels or is not submodular.
StGraph BuildBinaryGraph(const Model& model, Energy* energy_offset);
/// The checks BuildBinaryGraph() starts with: throws mrf::Error if the model is invalid, has other
/// than 2 labels or is not submodular.
void CheckBinaryModel(const Model& model);
/// BuildBinaryGraph() for a model that has passed CheckBinaryModel(), without repeating the checks.
StGraph BuildCheckedBinaryGraph(const Model& model, Energy* energy_offset);
/// Rewrites the terminal capacities of `graph`, built by BuildBinaryGraph() for a grid model of the
/// same topology and edge terms, for `model` (which has passed CheckBinaryModel()), on all cores,
/// and sets `*energy_offset`; the nodes whose capacities changed are recorded for a re-solve.
/// Returns false, leaving the graph to be rebuilt, when the model is not a grid, its topology
/// differs, the graph has a constant() (negative capacities were added to it) or any edge's capacity
/// would differ (found while the rows are rewritten).
bool UpdateBinaryGridTerminals(const Model& model, StGraph* graph, Energy* energy_offset);

}  // namespace mrf
