#pragma once
/// @file binary_graph.h
/// @brief Builds the s-t graph whose minimum cut minimises a two-label model (Kolmogorov-Zabih).

#include "mrf/model.h"
#include "mrf/st_graph.h"

namespace mrf {

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

}  // namespace mrf
