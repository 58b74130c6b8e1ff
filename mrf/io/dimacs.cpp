#include "mrf/io/dimacs.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <functional>
#include <istream>
#include <limits>
#include <memory>
#include <ostream>
#include <string_view>
#include <vector>

#include "mrf/memory.h"

namespace mrf {

NodeId DimacsInfo::DimacsId(NodeId node) const {
  if (extra_node) return 0;
  // Graph nodes are the non-terminal ids in order: skip the source and the sink.
  NodeId id = node + 1;
  const NodeId low = std::min(source, sink), high = std::max(source, sink);
  if (id >= low) ++id;
  if (id >= high) ++id;
  return id;
}

namespace {

constexpr std::int64_t kMaxEnergy = std::numeric_limits<Energy>::max();
constexpr std::size_t kMaxLineBytes = std::size_t{16} << 20;

// ---- Input: whole lines out of big buffered reads (no per-character stream calls) ----------------

class LineReader {
 public:
  // `fill` copies up to n bytes into the buffer and returns how many (0 at the end); it throws on
  // read errors.
  explicit LineReader(std::function<std::size_t(char*, std::size_t)> fill)
      : fill_(std::move(fill)), buffer_(std::size_t{1} << 20) {}

  // The next line without its '\n' (and a '\r' before it); false at the end of the input.
  bool Next(std::string_view* line) {
    for (;;) {
      char* start = buffer_.data() + begin_;
      const std::size_t available = end_ - begin_;
      auto* newline = static_cast<char*>(std::memchr(start, '\n', available));
      if (newline || (eof_ && available > 0)) {
        const std::size_t length = newline ? static_cast<std::size_t>(newline - start) : available;
        begin_ += newline ? length + 1 : length;
        ++line_number_;
        *line = std::string_view(start, length);
        if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
        return true;
      }
      if (eof_) return false;
      // Keep the partial line, then read more behind it.
      std::memmove(buffer_.data(), start, available);
      begin_ = 0;
      end_ = available;
      if (end_ == buffer_.size()) {
        if (buffer_.size() >= kMaxLineBytes) throw LineTooLong{line_number_ + 1};
        buffer_.resize(buffer_.size() * 2);
      }
      const std::size_t got = fill_(buffer_.data() + end_, buffer_.size() - end_);
      if (got == 0) eof_ = true;
      end_ += got;
    }
  }
  std::int64_t line_number() const { return line_number_; }

  struct LineTooLong {
    std::int64_t line;
  };

 private:
  std::function<std::size_t(char*, std::size_t)> fill_;
  std::vector<char> buffer_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::int64_t line_number_ = 0;
};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Splits a line at white space; keeps at most kMax fields but counts them all.
struct Fields {
  static constexpr int kMax = 6;
  std::string_view field[kMax];
  int count = 0;
};

void Split(std::string_view line, Fields* f) {
  f->count = 0;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsSpace(line[i])) ++i;
    if (i == line.size()) break;
    const std::size_t start = i;
    while (i < line.size() && !IsSpace(line[i])) ++i;
    if (f->count < Fields::kMax) f->field[f->count] = line.substr(start, i - start);
    ++f->count;
  }
}

// A field for an error message: printable, and short enough to keep the message on one line.
std::string Quote(std::string_view text) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < 40; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += (c >= 32 && c < 127) ? static_cast<char>(c) : '?';
  }
  if (text.size() > 40) out += "...";
  return out + "'";
}

// The common arc line "a FROM TO CAPACITY" with plain non-negative numbers of at most 18 digits, in
// one pass. Anything else (signs, long numbers, missing or extra fields) returns false and goes
// through the general path, which says what is wrong.
bool ParsePlainArc(std::string_view line, std::int64_t value[3]) {
  const char* p = line.data();
  const char* const end = p + line.size();
  if (p == end || *p != 'a') return false;
  ++p;
  for (int k = 0; k < 3; ++k) {
    if (p == end || (*p != ' ' && *p != '\t')) return false;
    while (p != end && (*p == ' ' || *p == '\t')) ++p;
    const char* const start = p;
    std::int64_t v = 0;
    while (p != end && static_cast<unsigned>(*p - '0') < 10) {
      if (p - start == 18) return false;  // may not fit: the general path decides
      v = v * 10 + (*p++ - '0');
    }
    if (p == start) return false;
    value[k] = v;
  }
  while (p != end && IsSpace(*p)) ++p;
  return p == end;
}

enum class Parsed { kOk, kNotInteger, kTooLarge };

// A decimal integer with an optional sign; kTooLarge when it does not fit in 64 bits.
Parsed ParseInteger(std::string_view text, std::int64_t* value) {
  std::size_t i = 0;
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    i = 1;
  }
  if (i == text.size()) return Parsed::kNotInteger;
  for (std::size_t k = i; k < text.size(); ++k)
    if (text[k] < '0' || text[k] > '9') return Parsed::kNotInteger;
  const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : static_cast<std::uint64_t>(kMaxEnergy);
  std::uint64_t v = 0;
  for (; i < text.size(); ++i) {
    const std::uint64_t digit = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (limit - digit) / 10) return Parsed::kTooLarge;
    v = v * 10 + digit;
  }
  *value = negative ? static_cast<std::int64_t>(0 - v) : static_cast<std::int64_t>(v);
  return Parsed::kOk;
}

Topology GridFromComment(std::int64_t width, std::int64_t height, std::int64_t depth, std::int64_t connectivity) {
  const auto max_side = std::numeric_limits<int>::max();
  const std::string size = std::to_string(width) + "x" + std::to_string(height) +
                           (depth == 1 ? std::string() : "x" + std::to_string(depth));
  if (width < 1 || height < 1 || depth < 1) throw Error("grid size " + size + " is not positive");
  if (width > max_side || height > max_side || depth > max_side)
    throw Error("grid size " + size + " has a side above " + std::to_string(max_side));
  const int w = static_cast<int>(width), h = static_cast<int>(height), d = static_cast<int>(depth);
  if (connectivity == 6) return Topology::Grid3D(w, h, d);
  if (connectivity == 4 || connectivity == 8) {
    if (depth != 1)
      throw Error("connectivity " + std::to_string(connectivity) + " needs depth 1 (got " + std::to_string(depth) +
                  "); 3-D grids are 6-connected");
    return Topology::Grid2D(w, h, static_cast<int>(connectivity));
  }
  throw Error("grid connectivity must be 4, 8 or 6 (got " + std::to_string(connectivity) + ")");
}

// ---- The parser: one call per line, then Finish() -----------------------------------------------

class DimacsParser {
 public:
  DimacsParser(std::string name, const DimacsReadOptions& options)
      : name_(std::move(name)), max_nodes_(options.max_nodes) {
    if (options.grid) {
      if (!options.grid->is_grid()) throw Error(name_ + ": the shape imposed on the file is not a grid");
      grid_ = *options.grid;
      grid_imposed_ = true;
    }
  }

  void Line(std::int64_t line_number, std::string_view line) {
    line_ = line_number;
    std::int64_t arc[3];
    if (problem_line_ > 0 && ParsePlainArc(line, arc)) return Arc(arc[0], arc[1], arc[2]);
    std::size_t first = 0;
    while (first < line.size() && IsSpace(line[first])) ++first;
    if (first == line.size()) return;  // blank line
    if (line[first] == 'c') return Comment(line);
    Split(line, &fields_);
    const std::string_view type = fields_.field[0];
    if (type == "p") return Problem();
    if (type == "n") return NodeLine();
    if (type == "a") return ArcLine();
    Fail("unknown line type " + Quote(type) + " (expected c, p, n or a)");
  }

  StGraph Finish(DimacsInfo* info) {
    line_ = 0;
    if (problem_line_ == 0) FailFile("no problem line ('p max NODES ARCS')");
    if (source_ == 0) FailFile("no source (a line 'n ID s')");
    if (sink_ == 0) FailFile("no sink (a line 'n ID t')");
    if (arcs_seen_ != num_arcs_)
      FailFile("the problem line (line " + std::to_string(problem_line_) + ") announces " +
               std::to_string(num_arcs_) + " arcs but the file has " + std::to_string(arcs_seen_));
    if (!built_) Build();
    FlushPending();
    if (source_sink_cap_ > 0) {
      // Adding c to both terminal capacities of one node raises every cut by exactly c.
      AddToTotal(source_sink_cap_, st_line_);
      AddToTotal(source_sink_cap_, st_line_);
      const auto where = [] { return std::string("source -> sink, added to both terminal arcs of graph node 0,"); };
      CheckTerminalSum(graph_.source_cap(0), source_sink_cap_, st_line_, where);
      CheckTerminalSum(graph_.sink_cap(0), source_sink_cap_, st_line_, where);
      graph_.add_tweights(0, source_sink_cap_, source_sink_cap_);
    }
    if (info) {
      *info = DimacsInfo{};
      info->num_nodes = num_nodes_;
      info->num_arcs = num_arcs_;
      info->source = source_;
      info->sink = sink_;
      info->ignored_arcs = ignored_arcs_;
      info->source_sink_capacity = source_sink_cap_;
      info->grid_from_comment = grid_ && !grid_imposed_;
      info->flow_offset = flow_offset_;
      info->extra_node = num_nodes_ == 2;
    }
    return std::move(graph_);
  }

 private:
  struct PendingArc {
    NodeId from, to;
    std::int64_t capacity;
    std::int64_t line;
  };

  [[noreturn]] void Fail(const std::string& message) const {
    throw Error(name_ + ":" + std::to_string(line_) + ": " + message);
  }
  [[noreturn]] void FailAt(std::int64_t line, const std::string& message) const {
    throw Error(name_ + ":" + std::to_string(line) + ": " + message);
  }
  [[noreturn]] void FailFile(const std::string& message) const { throw Error(name_ + ": " + message); }

  std::string Nodes() const { return "(nodes are 1.." + std::to_string(num_nodes_) + ")"; }

  // Rejects fields beyond `expected`, naming the first extra one.
  void CheckFieldCount(int expected, const char* syntax, const char* what) {
    if (fields_.count < expected) Fail(std::string("malformed ") + what + " (expected '" + syntax + "')");
    if (fields_.count > expected)
      Fail("unexpected " + Quote(fields_.field[expected]) + " after the " + what + " (expected '" + syntax + "')");
  }

  std::int64_t Integer(std::string_view text, const char* what) {
    std::int64_t value = 0;
    switch (ParseInteger(text, &value)) {
      case Parsed::kOk: return value;
      case Parsed::kNotInteger: Fail(std::string(what) + " " + Quote(text) + " is not an integer");
      case Parsed::kTooLarge: Fail(std::string(what) + " " + std::string(text.substr(0, 40)) + " does not fit in 64 bits");
    }
    return value;
  }

  void Comment(std::string_view line) {
    Split(line, &fields_);
    if (fields_.count < 2 || fields_.field[0] != "c") return;
    if (fields_.field[1] == "mrf-grid") return GridComment();
    if (fields_.field[1] == "mrf-flow-offset") return OffsetComment();
  }

  void CheckBeforeArcs(const char* comment) {
    if (arcs_seen_ > 0)
      Fail(std::string("the ") + comment + " comment must come before the first arc (line " +
           std::to_string(first_arc_line_) + ")");
  }

  void GridComment() {
    const char* syntax = "c mrf-grid WIDTH HEIGHT DEPTH CONNECTIVITY";
    if (fields_.count != 6) Fail(std::string("malformed mrf-grid comment (expected '") + syntax + "')");
    if (grid_line_ > 0) Fail("second mrf-grid comment (the first is on line " + std::to_string(grid_line_) + ")");
    CheckBeforeArcs("mrf-grid");
    std::int64_t v[4];
    for (int i = 0; i < 4; ++i) v[i] = Integer(fields_.field[2 + i], "mrf-grid field");
    Topology grid;
    try {
      grid = GridFromComment(v[0], v[1], v[2], v[3]);
    } catch (const Error& e) {
      Fail(std::string("bad mrf-grid comment: ") + e.what());
    }
    if (grid_imposed_ && grid != *grid_)
      Fail("the mrf-grid comment says " + grid.Describe() + " but the reader was asked for " + grid_->Describe());
    grid_ = grid;
    grid_line_ = line_;
  }

  void OffsetComment() {
    if (fields_.count != 3) Fail("malformed mrf-flow-offset comment (expected 'c mrf-flow-offset VALUE')");
    if (offset_line_ > 0)
      Fail("second mrf-flow-offset comment (the first is on line " + std::to_string(offset_line_) + ")");
    CheckBeforeArcs("mrf-flow-offset");
    const std::int64_t offset = Integer(fields_.field[2], "flow offset");
    if (offset > 0) Fail("flow offset " + std::to_string(offset) + " is positive (it must be <= 0)");
    if (offset == std::numeric_limits<std::int64_t>::min()) Fail("flow offset does not fit in 64 bits");
    flow_offset_ = offset;
    offset_line_ = line_;
  }

  void Problem() {
    if (problem_line_ > 0)
      Fail("second problem line (the first is on line " + std::to_string(problem_line_) + ")");
    if (fields_.count >= 2 && fields_.field[1] != "max")
      Fail("problem type " + Quote(fields_.field[1]) + " is not 'max' (this reader takes max-flow files)");
    CheckFieldCount(4, "p max NODES ARCS", "problem line");
    const std::int64_t nodes = Integer(fields_.field[2], "node count");
    const std::int64_t arcs = Integer(fields_.field[3], "arc count");
    if (nodes < 2)
      Fail("a max-flow problem needs at least 2 nodes (a source and a sink); the problem line says " +
           std::to_string(nodes));
    if (nodes > std::numeric_limits<NodeId>::max())
      Fail("node count " + std::to_string(nodes) + " exceeds the supported 2147483647");
    if (arcs < 0) Fail("negative arc count " + std::to_string(arcs));
    if (nodes > max_nodes_)
      Fail("the problem line announces " + std::to_string(nodes) + " nodes, more than the " +
           std::to_string(max_nodes_) + " this reader was allowed");
    num_nodes_ = static_cast<NodeId>(nodes);
    num_arcs_ = arcs;
    problem_line_ = line_;
  }

  NodeId NodeField(std::string_view text, const char* what) {
    const std::int64_t id = Integer(text, what);
    if (id < 1 || id > num_nodes_) Fail(std::string(what) + " " + std::to_string(id) + " is not a node " + Nodes());
    return static_cast<NodeId>(id);
  }

  void NodeLine() {
    if (problem_line_ == 0) Fail("node line before the problem line");
    CheckFieldCount(3, "n ID s' or 'n ID t", "node line");
    const std::string_view kind = fields_.field[2];
    if (kind != "s" && kind != "t") Fail("node designator " + Quote(kind) + " is neither 's' nor 't'");
    const bool is_source = kind == "s";
    const NodeId id = NodeField(fields_.field[1], is_source ? "source" : "sink");
    NodeId& mine = is_source ? source_ : sink_;
    std::int64_t& mine_line = is_source ? source_line_ : sink_line_;
    const NodeId other = is_source ? sink_ : source_;
    const std::int64_t other_line = is_source ? sink_line_ : source_line_;
    const char* role = is_source ? "source" : "sink";
    if (mine != 0)
      Fail(std::string("second ") + role + " " + std::to_string(id) + " (node " + std::to_string(mine) +
           " is the " + role + ", line " + std::to_string(mine_line) + "); only one is allowed");
    if (other == id)
      Fail("node " + std::to_string(id) + " cannot be both source and sink (it is the " +
           (is_source ? "sink" : "source") + " since line " + std::to_string(other_line) + ")");
    mine = id;
    mine_line = line_;
  }

  void ArcLine() {
    if (problem_line_ == 0) Fail("arc before the problem line");
    CheckFieldCount(4, "a FROM TO CAPACITY", "arc");
    const std::int64_t from = Integer(fields_.field[1], "arc start");
    const std::int64_t to = Integer(fields_.field[2], "arc end");
    const std::int64_t capacity = Integer(fields_.field[3], "capacity");
    Arc(from, to, capacity);
  }

  void Arc(std::int64_t from, std::int64_t to, std::int64_t capacity) {
    if (from < 1 || from > num_nodes_) Fail("arc from unknown node " + std::to_string(from) + " " + Nodes());
    if (to < 1 || to > num_nodes_) Fail("arc to unknown node " + std::to_string(to) + " " + Nodes());
    if (capacity < 0)
      Fail("negative capacity " + std::to_string(capacity) + " on arc " + std::to_string(from) + "->" +
           std::to_string(to));
    if (arcs_seen_ == num_arcs_)
      Fail("more arcs than the " + std::to_string(num_arcs_) + " announced by the problem line (line " +
           std::to_string(problem_line_) + ")");
    if (arcs_seen_++ == 0) first_arc_line_ = line_;
    if (source_ == 0 || sink_ == 0) {
      // The arc cannot be placed before both terminals are known: keep it for later.
      pending_.push_back({static_cast<NodeId>(from), static_cast<NodeId>(to), capacity, line_});
      return;
    }
    if (!built_) Build();
    FlushPending();
    AddArc(static_cast<NodeId>(from), static_cast<NodeId>(to), capacity, line_);
  }

  void Build() {
    const NodeId inner = num_nodes_ - 2;
    // A 40-byte file can announce two billion nodes. Refuse a graph that, with a solver's work arrays
    // (about 64 bytes a node), could not fit in this machine's memory, instead of paging until killed.
    const std::string shortfall = MemoryShortfall(64.0 * static_cast<double>(inner), std::to_string(num_nodes_) + " nodes");
    if (!shortfall.empty()) FailAt(problem_line_, shortfall);
    if (grid_) {
      if (grid_->num_nodes() != inner) {
        const std::string origin = grid_imposed_ ? "the imposed " : "the mrf-grid comment's ";
        const std::string message = origin + grid_->Describe() + " has " + std::to_string(grid_->num_nodes()) +
                                    " nodes but the file has " + std::to_string(inner) +
                                    " non-terminal nodes";
        if (grid_imposed_) FailFile(message);
        FailAt(grid_line_, message);
      }
      graph_ = StGraph(*grid_);
    } else {
      graph_ = StGraph();
      const EdgeId expected_edges = std::min<std::int64_t>(num_arcs_, std::int64_t{1} << 20);
      graph_.reserve(std::max<NodeId>(inner, 1), expected_edges);
      graph_.add_node(std::max<NodeId>(inner, 1));
    }
    // A negative constant: on a fresh node, equal negative terminal weights only lower the constant.
    if (flow_offset_ < 0) graph_.add_tweights(0, flow_offset_, flow_offset_);
    built_ = true;
  }

  void FlushPending() {
    if (pending_.empty()) return;
    for (const PendingArc& a : pending_) AddArc(a.from, a.to, a.capacity, a.line);
    pending_.clear();
    pending_.shrink_to_fit();
  }

  // The grid slot joining p and q, or -1: one coordinate difference instead of trying every
  // direction (Topology::grid_slot), which matters for files of millions of arcs.
  EdgeId GridSlot(NodeId p, NodeId q) const {
    const std::int64_t width = grid_->width(), plane = width * grid_->height();
    const std::int64_t pz = p / plane, qz = q / plane, pr = p - pz * plane, qr = q - qz * plane;
    const std::int64_t py = pr / width, qy = qr / width;
    const std::int64_t dx = (qr - qy * width) - (pr - py * width), dy = qy - py, dz = qz - pz;
    for (int d = 0; d < grid_->num_directions(); ++d) {
      const auto off = Topology::GridOffset(grid_->kind(), d);
      if (dx == off[0] && dy == off[1] && dz == off[2]) return EdgeId{d} * grid_->num_nodes() + p;
      if (dx == -off[0] && dy == -off[1] && dz == -off[2]) return EdgeId{d} * grid_->num_nodes() + q;
    }
    return -1;
  }

  NodeId GraphNode(NodeId id) const { return id - 1 - (id > source_) - (id > sink_); }

  void AddToTotal(std::int64_t capacity, std::int64_t line) {
    if (__builtin_add_overflow(total_capacity_, capacity, &total_capacity_))
      FailAt(line, "the capacities sum to more than 2^63-1: flows and cuts would overflow 64 bits");
  }

  // Fails when adding `capacity` to a terminal capacity overflows; `arcs` names them (built only then).
  template <class Describe>
  void CheckTerminalSum(Energy current, std::int64_t capacity, std::int64_t line, Describe arcs) const {
    Energy sum = 0;
    if (__builtin_add_overflow(current, capacity, &sum))
      FailAt(line, "the capacities of the arcs " + arcs() + " sum to more than 2^63-1 (64-bit overflow)");
  }

  void AddArc(NodeId from, NodeId to, std::int64_t capacity, std::int64_t line) {
    if (from == to || to == source_ || from == sink_) {
      ++ignored_arcs_;  // cannot carry flow from the source to the sink
      return;
    }
    if (from == source_ && to == sink_) {
      if (__builtin_add_overflow(source_sink_cap_, capacity, &source_sink_cap_))
        FailAt(line, "the capacities of the source -> sink arcs sum to more than 2^63-1 (64-bit overflow)");
      st_line_ = line;
      return;
    }
    if (from == source_) {
      const NodeId v = GraphNode(to);
      CheckTerminalSum(graph_.source_cap(v), capacity, line,
                       [&] { return "from the source into node " + std::to_string(to); });
      AddToTotal(capacity, line);
      graph_.add_tweights(v, capacity, 0);
      return;
    }
    if (to == sink_) {
      const NodeId v = GraphNode(from);
      CheckTerminalSum(graph_.sink_cap(v), capacity, line,
                       [&] { return "from node " + std::to_string(from) + " into the sink"; });
      AddToTotal(capacity, line);
      graph_.add_tweights(v, 0, capacity);
      return;
    }
    if (capacity > kMaxCost)
      FailAt(line, "capacity " + std::to_string(capacity) + " of arc " + std::to_string(from) + "->" +
                       std::to_string(to) + " does not fit in 32 bits (arcs between non-terminal nodes hold at most " +
                       std::to_string(kMaxCost) + ")");
    AddToTotal(capacity, line);
    const NodeId p = GraphNode(from), q = GraphNode(to);
    const Cost cap = static_cast<Cost>(capacity);
    if (grid_) {
      const EdgeId slot = GridSlot(p, q);
      if (slot < 0)
        FailAt(line, "arc " + std::to_string(from) + "->" + std::to_string(to) + " does not join two neighbours of the " +
                         grid_->Describe() +
                         (grid_imposed_ ? std::string(" imposed on the file")
                                        : " (mrf-grid comment on line " + std::to_string(grid_line_) + ")"));
      const bool forward = slot % grid_->num_nodes() == p;
      const Cost current = forward ? graph_.edge_cap(slot) : graph_.edge_rev_cap(slot);
      Cost sum = 0;
      if (__builtin_add_overflow(current, cap, &sum))
        FailAt(line, "the capacities of the arcs " + std::to_string(from) + "->" + std::to_string(to) +
                         " sum to more than 2^31-1 (edges hold 32-bit capacities)");
      graph_.add_to_edge_slot(slot, forward ? cap : 0, forward ? 0 : cap);
      return;
    }
    // General graph: an arc right after its reverse shares that edge (writers list pairs together).
    if (last_edge_ >= 0 && !last_edge_has_reverse_ && p == last_to_ && q == last_from_) {
      graph_.add_to_edge_slot(last_edge_, 0, cap);
      last_edge_has_reverse_ = true;
      return;
    }
    last_edge_ = graph_.add_edge(p, q, cap, 0);
    last_from_ = p;
    last_to_ = q;
    last_edge_has_reverse_ = false;
  }

  std::string name_;
  NodeId max_nodes_;
  std::int64_t line_ = 0;
  Fields fields_;

  std::int64_t problem_line_ = 0;
  NodeId num_nodes_ = 0;
  std::int64_t num_arcs_ = 0;
  NodeId source_ = 0, sink_ = 0;
  std::int64_t source_line_ = 0, sink_line_ = 0;
  std::optional<Topology> grid_;
  bool grid_imposed_ = false;
  std::int64_t grid_line_ = 0;
  Energy flow_offset_ = 0;
  std::int64_t offset_line_ = 0;

  std::int64_t arcs_seen_ = 0, first_arc_line_ = 0;
  std::vector<PendingArc> pending_;
  bool built_ = false;
  StGraph graph_;
  std::int64_t ignored_arcs_ = 0;
  Energy source_sink_cap_ = 0;
  std::int64_t st_line_ = 0;
  Energy total_capacity_ = 0;
  EdgeId last_edge_ = -1;
  NodeId last_from_ = -1, last_to_ = -1;
  bool last_edge_has_reverse_ = false;
};

StGraph ReadLines(LineReader& reader, const std::string& name, DimacsInfo* info, const DimacsReadOptions& options) {
  DimacsParser parser(name, options);
  std::string_view line;
  try {
    while (reader.Next(&line)) parser.Line(reader.line_number(), line);
  } catch (const LineReader::LineTooLong& e) {
    throw Error(name + ":" + std::to_string(e.line) + ": line longer than " + std::to_string(kMaxLineBytes >> 20) +
                " MiB (not a DIMACS file?)");
  }
  return parser.Finish(info);
}

// ---- Output: text built in a large buffer with to_chars, handed to a sink in chunks -------------

class TextWriter {
 public:
  explicit TextWriter(std::function<void(const char*, std::size_t)> sink) : sink_(std::move(sink)) {
    buffer_.resize(std::size_t{1} << 20);
  }
  void Text(std::string_view s) {
    Reserve(s.size());
    std::memcpy(buffer_.data() + used_, s.data(), s.size());
    used_ += s.size();
  }
  void Number(std::int64_t v) {
    Reserve(24);
    const auto r = std::to_chars(buffer_.data() + used_, buffer_.data() + buffer_.size(), v);
    used_ = static_cast<std::size_t>(r.ptr - buffer_.data());
  }
  void Arc(std::int64_t from, std::int64_t to, std::int64_t capacity) {
    Text("a ");
    Number(from);
    Text(" ");
    Number(to);
    Text(" ");
    Number(capacity);
    Text("\n");
  }
  void Flush() {
    if (used_ > 0) sink_(buffer_.data(), used_);
    used_ = 0;
  }

 private:
  void Reserve(std::size_t n) {
    if (used_ + n > buffer_.size()) Flush();
    if (n > buffer_.size()) buffer_.resize(n);
  }
  std::function<void(const char*, std::size_t)> sink_;
  std::vector<char> buffer_;
  std::size_t used_ = 0;
};

void WriteGraph(const StGraph& graph, TextWriter& out) {
  const NodeId n = graph.num_nodes();
  const std::int64_t source = std::int64_t{n} + 1, sink = std::int64_t{n} + 2;
  const Topology& topology = graph.topology();
  std::int64_t arcs = 0;
  for (NodeId v = 0; v < n; ++v) arcs += (graph.source_cap(v) > 0) + (graph.sink_cap(v) > 0);
  topology.ForEachEdge([&](EdgeId e, NodeId, NodeId) { arcs += (graph.edge_cap(e) > 0) + (graph.edge_rev_cap(e) > 0); });

  out.Text("c s-t graph written by mrf: ");
  out.Text(topology.Describe());
  out.Text("; node k of the graph is id k+1\n");
  if (topology.is_grid()) {
    const int connectivity = topology.kind() == TopologyKind::kGrid4 ? 4 : topology.kind() == TopologyKind::kGrid8 ? 8 : 6;
    out.Text("c mrf-grid ");
    for (int v : {topology.width(), topology.height(), topology.depth()}) {
      out.Number(v);
      out.Text(" ");
    }
    out.Number(connectivity);
    out.Text("\n");
  }
  if (graph.constant() != 0) {
    out.Text("c mrf-flow-offset ");
    out.Number(graph.constant());
    out.Text("\n");
  }
  out.Text("p max ");
  out.Number(sink);
  out.Text(" ");
  out.Number(arcs);
  out.Text("\nn ");
  out.Number(source);
  out.Text(" s\nn ");
  out.Number(sink);
  out.Text(" t\n");
  for (NodeId v = 0; v < n; ++v) {
    if (graph.source_cap(v) > 0) out.Arc(source, std::int64_t{v} + 1, graph.source_cap(v));
    if (graph.sink_cap(v) > 0) out.Arc(std::int64_t{v} + 1, sink, graph.sink_cap(v));
  }
  topology.ForEachEdge([&](EdgeId e, NodeId p, NodeId q) {
    if (graph.edge_cap(e) > 0) out.Arc(std::int64_t{p} + 1, std::int64_t{q} + 1, graph.edge_cap(e));
    if (graph.edge_rev_cap(e) > 0) out.Arc(std::int64_t{q} + 1, std::int64_t{p} + 1, graph.edge_rev_cap(e));
  });
  out.Flush();
}

}  // namespace

StGraph ReadDimacs(const std::string& path, DimacsInfo* info, const DimacsReadOptions& options) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) throw Error("cannot open DIMACS file '" + path + "': " + std::strerror(errno));
  LineReader reader([&](char* data, std::size_t size) {
    const std::size_t got = std::fread(data, 1, size, file.get());
    if (got == 0 && std::ferror(file.get()))
      throw Error("cannot read DIMACS file '" + path + "': " + std::strerror(errno));
    return got;
  });
  return ReadLines(reader, path, info, options);
}

StGraph ReadDimacs(std::istream& in, const std::string& name_for_messages, DimacsInfo* info,
                   const DimacsReadOptions& options) {
  LineReader reader([&](char* data, std::size_t size) {
    in.read(data, static_cast<std::streamsize>(size));
    if (in.bad()) throw Error("cannot read " + name_for_messages + ": stream error");
    return static_cast<std::size_t>(in.gcount());
  });
  return ReadLines(reader, name_for_messages, info, options);
}

void WriteDimacs(const StGraph& graph, const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (!file) throw Error("cannot write DIMACS file '" + path + "': " + std::strerror(errno));
  TextWriter writer([&](const char* data, std::size_t size) {
    if (std::fwrite(data, 1, size, file.get()) != size)
      throw Error("cannot write DIMACS file '" + path + "': " + std::strerror(errno));
  });
  WriteGraph(graph, writer);
  if (std::fclose(file.release()) != 0)
    throw Error("cannot write DIMACS file '" + path + "': " + std::strerror(errno));
}

void WriteDimacs(const StGraph& graph, std::ostream& out) {
  TextWriter writer([&](const char* data, std::size_t size) {
    out.write(data, static_cast<std::streamsize>(size));
    if (!out) throw Error("cannot write DIMACS text: stream error");
  });
  WriteGraph(graph, writer);
}

Topology ParseGridShape(const std::string& text) {
  const auto fail = [&](const std::string& why) -> Topology {
    throw Error("grid shape '" + text + "' " + why + " (expected WxH, WxH:8, WxHxD or WxHxD:6)");
  };
  std::string sizes = text, connectivity_text;
  const std::size_t colon = text.find(':');
  if (colon != std::string::npos) {
    sizes = text.substr(0, colon);
    connectivity_text = text.substr(colon + 1);
  }
  std::vector<std::int64_t> sides;
  std::size_t start = 0;
  for (;;) {
    const std::size_t x = sizes.find('x', start);
    const std::string part = sizes.substr(start, x == std::string::npos ? std::string::npos : x - start);
    std::int64_t value = 0;
    if (ParseInteger(part, &value) != Parsed::kOk || part[0] == '+' || part[0] == '-')
      return fail("has a size '" + part + "' that is not a positive integer");
    sides.push_back(value);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (sides.size() < 2 || sides.size() > 3) return fail("needs two or three sizes");
  std::int64_t connectivity = sides.size() == 3 ? 6 : 4;
  if (colon != std::string::npos &&
      (ParseInteger(connectivity_text, &connectivity) != Parsed::kOk || connectivity_text[0] == '+'))
    return fail("has a connectivity '" + connectivity_text + "' that is not 4, 8 or 6");
  if (sides.size() == 2 && connectivity == 6) return fail("is 6-connected with two sizes (a 3-D grid is WxHxD:6)");
  try {
    return GridFromComment(sides[0], sides[1], sides.size() == 3 ? sides[2] : 1, connectivity);
  } catch (const Error& e) {
    return fail(std::string("is invalid: ") + e.what());
  }
}

std::string FormatGridShape(const Topology& grid) {
  const std::string wh = std::to_string(grid.width()) + "x" + std::to_string(grid.height());
  switch (grid.kind()) {
    case TopologyKind::kGrid4: return wh + ":4";
    case TopologyKind::kGrid8: return wh + ":8";
    case TopologyKind::kGrid3D6: return wh + "x" + std::to_string(grid.depth()) + ":6";
    case TopologyKind::kEdgeList: break;
  }
  throw Error("FormatGridShape: " + grid.Describe() + " is not a grid");
}

}  // namespace mrf
