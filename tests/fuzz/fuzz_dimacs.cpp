// libFuzzer target: the DIMACS reader must turn any input into a graph or one mrf::Error; a graph it
// returns must solve with the reference engine and read back from its own DIMACS text to the same flow.
#include <cstdint>
#include <sstream>
#include <string>

#include "mrf/io/dimacs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  mrf::DimacsReadOptions options;
  options.max_nodes = 1 << 16;  // the reader allocates every announced node; keep inside the fuzzer's memory
  mrf::StGraph graph;
  try {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    graph = mrf::ReadDimacs(in, "fuzz", nullptr, options);
  } catch (const mrf::Error&) {
    return 0;
  }
  const mrf::Result result = graph.maxflow("boost-bk");
  if (!result.ok) __builtin_trap();  // a valid file must solve (cut capacity equals flow, no overflow)
  std::stringstream text;
  mrf::WriteDimacs(graph, text);
  mrf::StGraph back = mrf::ReadDimacs(text, "fuzz round trip");
  const mrf::Result again = back.maxflow("boost-bk");
  // Grids keep their exact shape; general graphs their nodes (edges without capacity are not written).
  const bool same_shape = graph.topology().is_grid() ? back.topology() == graph.topology()
                                                     : !back.topology().is_grid() && back.num_nodes() == graph.num_nodes();
  if (!again.ok || again.flow != result.flow || !same_shape) __builtin_trap();
  return 0;
}
