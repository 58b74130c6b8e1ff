// racecheck_probe: does compute-sanitizer's racecheck order shared-memory accesses correctly across the
// named barriers of cuda-bp's split launch? (docs/bp.md, "The split launch".)
//
// The kernel below has the split block's barrier protocol and nothing else, and is race-free by
// construction:
// - crew 0 (threads [0, C)) writes, in its iteration n, every word of its own row of h[n % 2];
// - crew 1 ([C, 2 C)) reads, in its iteration n, a column of h[(n - 1) % 2] (words other threads wrote),
//   then takes a barrier of its own (id 1) twice;
// - both crews meet at barrier 8 once per iteration, so a set is read one iteration after it is written
//   and rewritten one iteration after it is read;
// - with loaders (threads [2 C, 2 C + LD)): a triple-buffered array handed to crew 0 through "ready"
//   barriers (2 + set: the loaders arrive, crew 0 waits) and back through "empty" barriers (5 + set:
//   crew 1 arrives after its visit, the loaders wait), as in the kernel.
// Crew 1 checks every value it reads against what crew 0 must have written, and the program fails when
// one differs, so a real race would show as a wrong value.
//
// Build and run (tools/gpu_stage.sh builds it into bin/ when nvcc is present; gpu_run.sh racecheck runs it):
//   nvcc -O2 -lineinfo -arch=sm_90 tools/racecheck_probe.cu -o racecheck_probe
//   racecheck_probe [visits=60] [blocks=16] [loaders=1]
//   compute-sanitizer --tool racecheck racecheck_probe 60 16 1
#include <cstdio>
#include <cstdlib>

namespace {

__device__ __forceinline__ void BarSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void BarArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

constexpr int kCrew = 64, kLoaders = 128, kWords = 64, kSets = 3;
constexpr int kBarCrew1 = 1, kBarReady = 2, kBarEmpty = 5, kBarCrews = 8;

// What crew 0's thread `row` writes into word `word` of its row in visit m.
__device__ unsigned Expected(unsigned start, int word) {
  for (int k = 0; k <= word; ++k) start = start * 3u + k;
  return start;
}
__device__ unsigned LoaderValue(int visit, int word) { return visit * 7u + word; }

__global__ void Probe(int visits, int use_loaders, int* wrong) {
  __shared__ unsigned h[2][kCrew][kWords + 1];
  __shared__ unsigned u[kSets][kWords];
  __shared__ unsigned scratch[kCrew];
  const int both = kCrew + kLoaders;
  if (threadIdx.x >= 2 * kCrew) {
    if (!use_loaders) return;
    const int lane = threadIdx.x - 2 * kCrew;
    for (int n = 0; n < visits; ++n) {
      const int set = n % kSets;
      if (n >= kSets) BarSync(kBarEmpty + set, both);
      for (int i = lane; i < kWords; i += kLoaders) u[set][i] = LoaderValue(n, i);
      __threadfence_block();
      BarArrive(kBarReady + set, both);
    }
    return;
  }
  const bool vertical = threadIdx.x >= kCrew;
  const int tid = vertical ? threadIdx.x - kCrew : threadIdx.x;
  const int word = tid % kWords;
  unsigned acc = 0;
  for (int n = 0; n <= visits; ++n) {
    const int m = vertical ? n - 1 : n;  // the visit this crew works on
    if (m >= 0 && m < visits) {
      const int set = m % kSets;
      if (!vertical) {
        if (use_loaders) BarSync(kBarReady + set, both);
        unsigned carry = use_loaders ? u[set][word] : m;
        for (int k = 0; k < kWords; ++k) h[m % 2][tid][k] = carry = carry * 3u + k;
      } else {
        for (int row = 0; row < kCrew; ++row) {
          const unsigned seen = h[m % 2][row][word];
          if (seen != Expected(use_loaders ? LoaderValue(m, row % kWords) : m, word)) atomicAdd(wrong, 1);
          acc += seen;
        }
        if (use_loaders && u[set][word] != LoaderValue(m, word)) atomicAdd(wrong, 1);
        scratch[tid] = acc;
        BarSync(kBarCrew1, kCrew);
        acc += scratch[(tid + 1) % kCrew];
        BarSync(kBarCrew1, kCrew);
        if (use_loaders && m + kSets < visits) BarArrive(kBarEmpty + set, both);
      }
    }
    if (n < visits) BarSync(kBarCrews, 2 * kCrew);
  }
  if (vertical && acc == 0xdeadbeefu) atomicAdd(wrong, 0);  // keeps the sums live
}

}  // namespace

int main(int argc, char** argv) {
  const int visits = argc > 1 ? atoi(argv[1]) : 60, blocks = argc > 2 ? atoi(argv[2]) : 16;
  const int loaders = argc > 3 ? atoi(argv[3]) : 1;
  int* wrong = nullptr;
  if (cudaMalloc(&wrong, sizeof(int)) != cudaSuccess || cudaMemset(wrong, 0, sizeof(int)) != cudaSuccess) {
    std::fprintf(stderr, "racecheck_probe: no usable GPU\n");
    return 2;
  }
  Probe<<<blocks, 2 * kCrew + kLoaders>>>(visits, loaders, wrong);
  const cudaError_t status = cudaDeviceSynchronize();
  int host = -1;
  cudaMemcpy(&host, wrong, sizeof host, cudaMemcpyDeviceToHost);
  std::printf("racecheck_probe: %d visits, %d blocks, loaders %s: %s, values read wrong: %d\n", visits, blocks,
              loaders ? "on" : "off", cudaGetErrorString(status), host);
  return status != cudaSuccess || host != 0;
}
