#include "mrf/io/model_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "mrf/io/read_file.h"

namespace mrf {

namespace {

constexpr char kMagic[8] = {'M', 'R', 'F', 'M', 'O', 'D', 'E', 'L'};

// FNV-1a, 64 bits: catches truncation and bit flips; not a cryptographic hash.
constexpr std::uint64_t kFnvOffsetBasis = 14695981039346656037ull;
// What version 1 files start from instead: the standard basis with its last digit lost.
constexpr std::uint64_t kVersion1OffsetBasis = 1469598103934665603ull;

std::uint64_t Fnv1a(const char* data, std::size_t size, std::uint64_t basis = kFnvOffsetBasis) {
  std::uint64_t h = basis;
  for (std::size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

class Writer {
 public:
  template <class T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable<T>::value, "plain values only");
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  template <class T>
  void PutArray(const std::vector<T>& values) {
    Put<std::int64_t>(static_cast<std::int64_t>(values.size()));
    if (!values.empty()) bytes_.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class Reader {
 public:
  Reader(const std::string& bytes, std::size_t end, std::string name) : bytes_(bytes), end_(end), name_(std::move(name)) {}
  template <class T>
  T Get(const char* what) {
    Need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof value);
    pos_ += sizeof value;
    return value;
  }
  template <class T>
  std::vector<T> GetArray(const char* what, std::int64_t expected) {
    const auto count = Get<std::int64_t>(what);
    if (count != expected)
      Fail(std::string(what) + ": expected " + std::to_string(expected) + " values, the file says " + std::to_string(count));
    // Checked against the bytes present before allocating anything.
    if (count < 0 || static_cast<std::uint64_t>(count) > (end_ - pos_) / sizeof(T))
      Fail(std::string(what) + ": file is truncated (needs " + std::to_string(count) + " values)");
    std::vector<T> values(static_cast<std::size_t>(count));
    if (!values.empty()) std::memcpy(values.data(), bytes_.data() + pos_, values.size() * sizeof(T));
    pos_ += values.size() * sizeof(T);
    return values;
  }
  [[noreturn]] void Fail(const std::string& message) const { throw Error(name_ + ": " + message); }
  std::size_t pos() const { return pos_; }

 private:
  void Need(std::size_t n, const char* what) const {
    if (end_ - pos_ < n) Fail(std::string("file is truncated (while reading ") + what + ")");
  }
  const std::string& bytes_;
  std::size_t end_;
  std::size_t pos_ = 0;
  std::string name_;
};

}  // namespace

void SaveModel(const Model& model, std::ostream& out) {
  model.ValidateOrThrow();
  Writer w;
  w.bytes().append(kMagic, sizeof kMagic);
  w.Put<std::uint32_t>(kModelFileVersion);
  const Topology& t = model.topology;
  w.Put<std::uint32_t>(static_cast<std::uint32_t>(t.kind()));
  w.Put<std::int32_t>(t.width());
  w.Put<std::int32_t>(t.height());
  w.Put<std::int32_t>(t.depth());
  w.Put<std::int32_t>(t.num_nodes());
  if (!t.is_grid()) {
    w.PutArray(t.edge_from());
    w.PutArray(t.edge_to());
  }
  w.Put<std::int32_t>(model.num_labels);
  w.Put<std::uint32_t>(static_cast<std::uint32_t>(model.pairwise.kind));
  w.Put<std::int32_t>(model.pairwise.lambda);
  w.Put<std::int32_t>(model.pairwise.truncation);
  w.PutArray(model.pairwise.table);
  w.Put<double>(model.cost_scale);
  w.PutArray(model.edge_weights);
  w.PutArray(model.unary);
  const std::uint64_t checksum = Fnv1a(w.bytes().data(), w.bytes().size());
  w.Put<std::uint64_t>(checksum);
  out.write(w.bytes().data(), static_cast<std::streamsize>(w.bytes().size()));
}

void SaveModel(const Model& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw Error("cannot write model file '" + path + "': " + std::strerror(errno));
  SaveModel(model, out);
  out.close();
  if (!out) throw Error("error while writing model file '" + path + "': " + std::strerror(errno ? errno : EIO));
}

Model LoadModelFromBytes(const std::string& bytes, const std::string& name) {
  if (bytes.size() < sizeof kMagic + 4 + 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw Error(name + ": not an mrf model file (bad magic)");
  const std::size_t body = bytes.size() - sizeof(std::uint64_t);
  Reader r(bytes, body, name);
  for (std::size_t i = 0; i < sizeof kMagic; ++i) r.Get<char>("magic");
  const auto version = r.Get<std::uint32_t>("version");
  if (version < kOldestModelFileVersion || version > kModelFileVersion)
    r.Fail("unsupported model file version " + std::to_string(version) + " (this build reads versions " +
           std::to_string(kOldestModelFileVersion) + " to " + std::to_string(kModelFileVersion) + ")");
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + body, sizeof stored);
  const std::uint64_t basis = version == 1 ? kVersion1OffsetBasis : kFnvOffsetBasis;
  if (stored != Fnv1a(bytes.data(), body, basis)) r.Fail("checksum mismatch (file is corrupt or truncated)");

  Model m;
  const auto kind = r.Get<std::uint32_t>("topology kind");
  const auto width = r.Get<std::int32_t>("width"), height = r.Get<std::int32_t>("height");
  const auto depth = r.Get<std::int32_t>("depth"), nodes = r.Get<std::int32_t>("node count");
  const bool two_d = kind == static_cast<std::uint32_t>(TopologyKind::kGrid4) ||
                     kind == static_cast<std::uint32_t>(TopologyKind::kGrid8);
  if (two_d && depth != 1) r.Fail("a 2-D grid's depth must be 1 (got " + std::to_string(depth) + ")");
  if (kind == static_cast<std::uint32_t>(TopologyKind::kEdgeList) && (width != 0 || height != 0 || depth != 0))
    r.Fail("an edge list's width, height and depth must be 0 (got " + std::to_string(width) + ", " +
           std::to_string(height) + ", " + std::to_string(depth) + ")");
  try {
    switch (kind) {
      case static_cast<std::uint32_t>(TopologyKind::kGrid4): m.topology = Topology::Grid2D(width, height, 4); break;
      case static_cast<std::uint32_t>(TopologyKind::kGrid8): m.topology = Topology::Grid2D(width, height, 8); break;
      case static_cast<std::uint32_t>(TopologyKind::kGrid3D6): m.topology = Topology::Grid3D(width, height, depth); break;
      case static_cast<std::uint32_t>(TopologyKind::kEdgeList): {
        if (nodes < 0) r.Fail("negative node count");
        const auto from_count = r.Get<std::int64_t>("edge count");
        if (from_count < 0 || static_cast<std::uint64_t>(from_count) > (body - r.pos()) / 8)
          r.Fail("edge count " + std::to_string(from_count) + " does not fit the file");
        std::vector<NodeId> from(static_cast<std::size_t>(from_count));
        for (auto& v : from) v = r.Get<std::int32_t>("edge start");
        std::vector<NodeId> to = r.GetArray<NodeId>("edge ends", from_count);
        m.topology = Topology::EdgeList(nodes, std::move(from), std::move(to));
        break;
      }
      default: r.Fail("unknown topology kind " + std::to_string(kind));
    }
  } catch (const Error& e) {
    if (std::string(e.what()).rfind(name, 0) == 0) throw;
    r.Fail(e.what());
  }
  if (m.topology.num_nodes() != nodes)
    r.Fail("node count " + std::to_string(nodes) + " does not match the " + m.topology.Describe());
  m.num_labels = r.Get<std::int32_t>("label count");
  if (m.num_labels < 1) r.Fail("label count " + std::to_string(m.num_labels) + " is not positive");
  const auto pairwise_kind = r.Get<std::uint32_t>("pairwise kind");
  if (pairwise_kind > static_cast<std::uint32_t>(PairwiseKind::kTable)) r.Fail("unknown pairwise kind " + std::to_string(pairwise_kind));
  m.pairwise.kind = static_cast<PairwiseKind>(pairwise_kind);
  m.pairwise.lambda = r.Get<std::int32_t>("lambda");
  m.pairwise.truncation = r.Get<std::int32_t>("truncation");
  const std::int64_t table_size =
      m.pairwise.kind == PairwiseKind::kTable ? std::int64_t{m.num_labels} * m.num_labels : 0;
  m.pairwise.table = r.GetArray<Cost>("pairwise table", table_size);
  m.cost_scale = r.Get<double>("cost scale");
  // Weights are either absent or one per edge slot: peek at the count to decide which.
  const std::int64_t slots = m.topology.num_edge_slots();
  {
    Reader peek = r;
    const auto count = peek.Get<std::int64_t>("edge weights");
    m.edge_weights = r.GetArray<Cost>("edge weights", count == 0 ? 0 : slots);
  }
  m.unary = r.GetArray<Cost>("unary costs", std::int64_t{m.topology.num_nodes()} * m.num_labels);
  if (r.pos() != body) r.Fail(std::to_string(body - r.pos()) + " unexpected bytes after the unary costs");
  std::string error;
  if (!m.Validate(&error)) r.Fail("invalid model: " + error);
  return m;
}

Model LoadModel(const std::string& path) {
  return LoadModelFromBytes(ReadWholeFile(path, "model file", std::string(kMagic, sizeof kMagic)), path);
}

}  // namespace mrf
