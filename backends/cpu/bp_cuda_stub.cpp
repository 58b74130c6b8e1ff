// The CUDA BP runner in builds without CUDA: every entry point says so (backends/cuda/bp_cuda.cu has
// the real one).
#include "mrf/config.h"

#if !MRF_HAVE_CUDA
#include "backends/common/bp_engine.h"

namespace mrf::bp {

namespace {
[[noreturn]] void NotCompiled() { throw Error("cuda-bp is not compiled in (this build has no CUDA)"); }
}  // namespace

struct CudaRunner::Impl {};

CudaRunner::CudaRunner(Problem, const Config&, const CudaTuning&) { NotCompiled(); }
CudaRunner::CudaRunner(const Model&, const Config&, const CudaTuning&) { NotCompiled(); }
CudaRunner::~CudaRunner() = default;
RunOutput CudaRunner::Run(const IterationCallback&, bool, bool) { NotCompiled(); }
double CudaRunner::TimeIterations(int) { NotCompiled(); }
Energy CudaRunner::DeviceEnergy() { NotCompiled(); }
Labeling CudaRunner::DeviceLabels() { NotCompiled(); }
std::string CudaRunner::Describe() const { return "no CUDA"; }
std::size_t CudaRunner::estimated_bytes() const { return 0; }
std::size_t CudaRunner::allocated_bytes() const { return 0; }
bool CudaRunner::uses_fast_kernel() const { return false; }
std::vector<Cost> CudaRunner::LevelUnary(int) { NotCompiled(); }
std::size_t CudaMaxSharedBytesPerBlock() { return 0; }
double CudaDeviceCopyGBs(std::size_t, int) { NotCompiled(); }
double CudaMeasureSmClockMHz() { NotCompiled(); }

}  // namespace mrf::bp
#endif
