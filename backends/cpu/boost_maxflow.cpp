#include "backends/cpu/boost_maxflow.h"

// Boost Graph 1.74 trips GCC 12's -Wmaybe-uninitialized inside its own iterators.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <chrono>

namespace mrf {
namespace {

using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
using BoostGraph = boost::adjacency_list<
    boost::vecS, boost::vecS, boost::directedS,
    boost::property<boost::vertex_index_t, long,
                    boost::property<boost::vertex_color_t, boost::default_color_type,
                                    boost::property<boost::vertex_distance_t, long,
                                                    boost::property<boost::vertex_predecessor_t,
                                                                    Traits::edge_descriptor>>>>,
    boost::property<boost::edge_capacity_t, Energy,
                    boost::property<boost::edge_residual_capacity_t, Energy,
                                    boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

class BoostMaxFlowEngine final : public MaxFlowEngine {
 public:
  std::string name() const override { return "boost-bk"; }

  void Solve(const StGraph& graph, Result* out) override {
    const auto t0 = std::chrono::steady_clock::now();
    const NodeId n = graph.num_nodes();
    BoostGraph g(static_cast<std::size_t>(n) + 2);
    const auto source = boost::vertex(n, g), sink = boost::vertex(n + 1, g);
    auto capacity = boost::get(boost::edge_capacity, g);
    auto reverse = boost::get(boost::edge_reverse, g);
    auto add_pair = [&](std::size_t u, std::size_t v, Energy cap, Energy rev_cap) {
      const auto e = boost::add_edge(u, v, g).first, r = boost::add_edge(v, u, g).first;
      capacity[e] = cap;
      capacity[r] = rev_cap;
      reverse[e] = r;
      reverse[r] = e;
    };
    for (NodeId v = 0; v < n; ++v) {
      // Net the two terminal edges: the common part flows straight through.
      const Energy s = graph.source_cap(v), t = graph.sink_cap(v);
      if (s > t) add_pair(source, v, s - t, 0);
      else if (t > s) add_pair(v, sink, t - s, 0);
    }
    Energy through = 0;
    for (NodeId v = 0; v < n; ++v) through += std::min(graph.source_cap(v), graph.sink_cap(v));
    graph.topology().ForEachEdge([&](EdgeId e, NodeId p, NodeId q) {
      if (graph.edge_cap(e) || graph.edge_rev_cap(e)) add_pair(p, q, graph.edge_cap(e), graph.edge_rev_cap(e));
    });
    const auto t1 = std::chrono::steady_clock::now();
    const Energy flow = boost::boykov_kolmogorov_max_flow(g, source, sink);
    const auto t2 = std::chrono::steady_clock::now();
    // Nodes the source tree does not reach (color other than black) are on the sink side.
    auto color = boost::get(boost::vertex_color, g);
    out->labels.assign(n, 0);
    for (NodeId v = 0; v < n; ++v)
      out->labels[v] = color[boost::vertex(v, g)] == boost::black_color ? 0 : 1;
    out->flow = flow + through;
    out->timings.setup_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    out->timings.solve_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  }
};

}  // namespace

std::unique_ptr<MaxFlowEngine> MakeBoostMaxFlowEngine() { return std::make_unique<BoostMaxFlowEngine>(); }

}  // namespace mrf
