#pragma once
/// @file dimacs.h
/// @brief DIMACS max-flow files (`p max`): a strict, fast reader and a writer that keeps grid shapes.
///
/// The format (see docs/dimacs.md): `c` comment lines, one problem line `p max NODES ARCS`, one
/// `n ID s` and one `n ID t` line, then `a FROM TO CAPACITY` lines; node ids run from 1 to NODES.
///
/// The reader returns an StGraph holding the non-terminal nodes, in id order (graph node k is the
/// k-th id that is neither source nor sink). Arcs are mapped as follows:
/// - source -> v becomes source capacity of v, v -> sink sink capacity of v (repeated arcs add up);
/// - arcs into the source, out of the sink and loops v -> v cannot carry flow: they are checked, then
///   dropped (DimacsInfo::ignored_arcs counts them);
/// - a direct source -> sink arc of capacity c adds c to both terminal capacities of graph node 0,
///   which raises every cut, and so the maximum flow, by exactly c;
/// - arcs between non-terminal nodes become edges (capacity at most 2^31-1 each).
/// Terminal capacities are 64-bit; the sum of all capacities must fit in 64 bits, so that no flow or
/// cut value can overflow.
///
/// @code
///   mrf::DimacsInfo info;
///   mrf::StGraph g = mrf::ReadDimacs("problem.max", &info);
///   mrf::Result r = g.maxflow("auto");
///   mrf::WriteDimacs(g, "copy.max");   // reads back to the same maximum flow (and grid shape)
/// @endcode

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <optional>
#include <string>

#include "mrf/st_graph.h"
#include "mrf/topology.h"
#include "mrf/types.h"

namespace mrf {

/// What the reader learnt about a file besides the graph.
struct DimacsInfo {
  NodeId num_nodes = 0;           ///< Nodes on the problem line, source and sink included.
  std::int64_t num_arcs = 0;      ///< Arcs on the problem line (the reader checks the file has exactly these).
  NodeId source = 0;              ///< DIMACS id (1-based) of the source.
  NodeId sink = 0;                ///< DIMACS id (1-based) of the sink.
  std::int64_t ignored_arcs = 0;  ///< Arcs that cannot carry flow: into the source, out of the sink, loops.
  Energy source_sink_capacity = 0;  ///< Total capacity of direct source -> sink arcs.
  bool grid_from_comment = false;   ///< True when the grid shape came from a `c mrf-grid` comment.
  Energy flow_offset = 0;         ///< Value of a `c mrf-flow-offset` comment (<= 0); 0 when absent.
  /// True when the file has no non-terminal node: the graph then holds one extra node, with no
  /// DIMACS id, so that it can be solved (a direct source -> sink arc lands on it).
  bool extra_node = false;

  /// DIMACS id of graph node `node` (0 for the extra node).
  NodeId DimacsId(NodeId node) const;
};

/// Settings of the reader.
struct DimacsReadOptions {
  /// When set (a grid kind), the file is read into a grid-shaped graph of this shape, exactly as if
  /// it held the matching `c mrf-grid` comment. A comment naming another shape is an error.
  std::optional<Topology> grid;
  /// Files whose problem line announces more nodes than this are refused before anything is
  /// allocated: a guard for untrusted input, since the graph holds every announced node.
  NodeId max_nodes = std::numeric_limits<NodeId>::max();
};

/// Reads a DIMACS max-flow file. Throws mrf::Error with a one-line message of the form
/// "PATH:LINE: problem" for a missing or unreadable file and for any malformed content (no or a
/// second problem line, a type other than max, unknown nodes, negative or non-numeric
/// capacities, trailing fields, two or no sources or sinks, a wrong arc count, capacities that
/// do not fit or whose sums overflow 64 bits, arcs that are not grid neighbours in a grid file).
/// `info`, when given, receives what else the file said.
StGraph ReadDimacs(const std::string& path, DimacsInfo* info = nullptr, const DimacsReadOptions& options = {});

/// Reads DIMACS max-flow text from a stream; `name_for_messages` starts every error message.
StGraph ReadDimacs(std::istream& in, const std::string& name_for_messages, DimacsInfo* info = nullptr,
                   const DimacsReadOptions& options = {});

/// Writes `graph` as a DIMACS max-flow file: graph node k gets id k+1, the source id n+1 and the
/// sink id n+2 (n = graph.num_nodes()); zero capacities are left out. Grid-shaped graphs also get a
/// `c mrf-grid WIDTH HEIGHT DEPTH CONNECTIVITY` comment, and graphs with a non-zero constant()
/// (from negative terminal weights) a `c mrf-flow-offset VALUE` comment, so that ReadDimacs()
/// gives back a graph of the same shape and maximum flow. Throws mrf::Error if the file cannot be
/// written.
void WriteDimacs(const StGraph& graph, const std::string& path);

/// Writes `graph` as DIMACS max-flow text to a stream (see the path overload).
void WriteDimacs(const StGraph& graph, std::ostream& out);

/// Parses a grid shape for command lines: "WxH" (4-connected), "WxH:8", "WxHxD" (6-connected),
/// "WxHxD:6". Throws mrf::Error naming the text when it is malformed.
Topology ParseGridShape(const std::string& text);

/// The inverse of ParseGridShape: "640x480:4", "64x64x32:6".
std::string FormatGridShape(const Topology& grid);

}  // namespace mrf
