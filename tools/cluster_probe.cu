// cluster_probe: could one expansion move run inside one thread-block cluster, its grid held in the
// cluster's distributed shared memory, with hardware cluster barriers instead of cuda-expansion's
// software grid barrier? (docs/benchmarks.md, "One move per cluster: a probe".)
//
// It times the phase structure of a relabel, not a max-flow: Jacobi sweeps of a BFS-like relaxation
// d(v) = min(d(v), min over 4 neighbours d(u) + 1) on a W x H grid whose last column is the sink (0),
// with a barrier after every sweep, in three ways:
//   global   the grid in global memory, one block per 32 x 16 tile, a software grid barrier per sweep
//            (one atomic per block and polling, as cuda-expansion's Sync);
//   cluster  the grid in one cluster's shared memory (a stripe of rows per block, the rows next to it read
//            from the neighbouring blocks' shared memory), cluster.sync() per sweep;
//   clusters K independent grids at once, one per cluster (K moves side by side).
// Every version runs the same number of sweeps and checks its distances against a host BFS, so a wrong
// barrier shows as a failure rather than as a fast time.
//
// Build and run (tools/gpu_stage.sh builds it into bin/ when nvcc is present):
//   nvcc -O3 -arch=sm_90 tools/cluster_probe.cu -o cluster_probe
//   cluster_probe [width=384] [height=288] [sweeps=2000] [cluster=16] [work=1]   (work 0: barriers only)
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <queue>
#include <vector>

namespace cg = cooperative_groups;

namespace {

constexpr int kInf = 1 << 28;

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    cudaError_t e_ = (call);                                                                        \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "cluster_probe: %s: %s (line %d)\n", #call, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

// The walls: a node is blocked (no edges) where this says so, so that the BFS has long paths to find.
__host__ __device__ inline bool Blocked(int x, int y, int w) {
  return (x % 24 == 12) && (y % 64 != (x / 24 % 2 ? 3 : 60)) && x < w - 1;
}

// ---- global memory and a software grid barrier ----------------------------------------------------

struct Barrier {
  unsigned long long arrive;
};

__device__ __forceinline__ unsigned long long LoadRelaxed(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ void GridSync(Barrier* b, unsigned long long* seen) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(&b->arrive, 1ull);
    const unsigned long long target = *seen + gridDim.x;
    while (LoadRelaxed(&b->arrive) < target) {
    }
    __threadfence();
    *seen = target;
  }
  __syncthreads();
}

constexpr int kTileX = 32, kTileY = 16;

__global__ void __launch_bounds__(kTileX* kTileY) GlobalSweeps(int* d0, int* d1, int w, int h, int sweeps,
                                                                 bool work, Barrier* b) {
  const int tiles_x = (w + kTileX - 1) / kTileX;
  const int x = blockIdx.x % tiles_x * kTileX + threadIdx.x % kTileX;
  const int y = blockIdx.x / tiles_x * kTileY + threadIdx.x / kTileX;
  unsigned long long seen = 0;
  int* cur = d0;
  int* next = d1;
  for (int s = 0; s < sweeps; ++s) {
    if (work && x < w && y < h) {
      const int v = y * w + x;
      int best = cur[v];
      if (best != 0 && !Blocked(x, y, w)) {
        if (x > 0 && !Blocked(x - 1, y, w)) best = min(best, cur[v - 1] + 1);
        if (x < w - 1 && !Blocked(x + 1, y, w)) best = min(best, cur[v + 1] + 1);
        if (y > 0 && !Blocked(x, y - 1, w)) best = min(best, cur[v - w] + 1);
        if (y < h - 1 && !Blocked(x, y + 1, w)) best = min(best, cur[v + w] + 1);
      }
      next[v] = best;
    }
    GridSync(b, &seen);
    int* t = cur;
    cur = next;
    next = t;
  }
}

// ---- one grid per cluster, in distributed shared memory ---------------------------------------------

// Block r of a cluster owns rows [r * rows, (r + 1) * rows) of its cluster's grid: two buffers of
// rows x w distances in its shared memory. Rows above and below come from blocks r - 1 and r + 1.
__global__ void __launch_bounds__(1024) ClusterSweeps(int* out, int w, int h, int rows, int sweeps, bool work) {
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ int smem[];
  const int rank = static_cast<int>(cluster.block_rank());
  const int grid_index = blockIdx.x / cluster.num_blocks();
  const int n = rows * w;
  int* buf[2] = {smem, smem + n};
  const int y0 = rank * rows;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int x = i % w, y = y0 + i / w;
    buf[0][i] = buf[1][i] = (y < h && x == w - 1) ? 0 : kInf;
  }
  cluster.sync();
  int* up[2] = {rank > 0 ? cluster.map_shared_rank(buf[0], rank - 1) : nullptr,
                rank > 0 ? cluster.map_shared_rank(buf[1], rank - 1) : nullptr};
  const int last = static_cast<int>(cluster.num_blocks()) - 1;
  int* down[2] = {rank < last ? cluster.map_shared_rank(buf[0], rank + 1) : nullptr,
                  rank < last ? cluster.map_shared_rank(buf[1], rank + 1) : nullptr};
  for (int s = 0; s < sweeps; ++s) {
    const int p = s & 1;
    const int* cur = buf[p];
    int* next = buf[p ^ 1];
    // The node's column and row advance by the block's stride, without a division per node.
    const int step_x = static_cast<int>(blockDim.x) % w, step_y = static_cast<int>(blockDim.x) / w;
    int x = static_cast<int>(threadIdx.x) % w, ly = static_cast<int>(threadIdx.x) / w;
    for (int i = threadIdx.x; work && i < n; i += blockDim.x, x += step_x, ly += step_y) {
      if (x >= w) {
        x -= w;
        ++ly;
      }
      const int y = y0 + ly;
      if (y >= h) continue;
      int best = cur[i];
      if (best != 0 && !Blocked(x, y, w)) {
        if (x > 0 && !Blocked(x - 1, y, w)) best = min(best, cur[i - 1] + 1);
        if (x < w - 1 && !Blocked(x + 1, y, w)) best = min(best, cur[i + 1] + 1);
        if (y > 0 && !Blocked(x, y - 1, w)) best = min(best, (ly > 0 ? cur[i - w] : up[p][(rows - 1) * w + x]) + 1);
        if (y < h - 1 && !Blocked(x, y + 1, w))
          best = min(best, (ly < rows - 1 ? cur[i + w] : down[p][x]) + 1);
      }
      next[i] = best;
    }
    cluster.sync();
  }
  const int* fin = buf[sweeps & 1];
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int y = y0 + i / w;
    if (y < h) out[static_cast<long long>(grid_index) * w * h + y * w + i % w] = fin[i];
  }
}

std::vector<int> HostBfs(int w, int h) {
  std::vector<int> d(static_cast<size_t>(w) * h, kInf);
  std::queue<int> q;
  for (int y = 0; y < h; ++y) {
    d[y * w + w - 1] = 0;
    q.push(y * w + w - 1);
  }
  while (!q.empty()) {
    const int v = q.front();
    q.pop();
    const int x = v % w, y = v / w;
    const int nx[4] = {x - 1, x + 1, x, x}, ny[4] = {y, y, y - 1, y + 1};
    for (int k = 0; k < 4; ++k) {
      if (nx[k] < 0 || ny[k] < 0 || nx[k] >= w || ny[k] >= h) continue;
      if (Blocked(nx[k], ny[k], w) || (Blocked(x, y, w) && d[v] != 0)) continue;
      const int u = ny[k] * w + nx[k];
      if (d[u] > d[v] + 1) {
        d[u] = d[v] + 1;
        q.push(u);
      }
    }
  }
  return d;
}

// Distances within `sweeps` Jacobi sweeps equal the BFS's where the BFS's are at most `sweeps`.
int CountWrong(const std::vector<int>& got, const std::vector<int>& want, int sweeps) {
  int wrong = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const int expect = want[i] <= sweeps ? want[i] : -1;
    if (expect >= 0 ? got[i] != expect : got[i] <= sweeps) ++wrong;
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  const int w = argc > 1 ? std::atoi(argv[1]) : 384;
  const int h = argc > 2 ? std::atoi(argv[2]) : 288;
  const int sweeps = argc > 3 ? std::atoi(argv[3]) : 2000;
  const int csize = argc > 4 ? std::atoi(argv[4]) : 16;
  const bool work = argc > 5 ? std::atoi(argv[5]) != 0 : true;  // 0: barriers only (nothing to check)
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, %zu KB shared memory per block (opt-in)\n", prop.name, prop.multiProcessorCount,
              prop.sharedMemPerBlockOptin / 1024);
  const std::vector<int> want = HostBfs(w, h);
  const int n = w * h;
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  int failures = 0;
  // The best of three timed launches, each after its own reset.
  auto BestOf3Ms = [&](auto reset, auto launch) {
    float best = 1e30f;
    for (int rep = 0; rep < 3; ++rep) {
      reset();
      CHECK(cudaEventRecord(e0));
      launch();
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      CHECK(cudaGetLastError());
      float ms;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      best = std::min(best, ms);
    }
    return best;
  };

  // Global memory, software barrier.
  {
    std::vector<int> init(n);
    for (int i = 0; i < n; ++i) init[i] = i % w == w - 1 ? 0 : kInf;
    int *d0, *d1;
    Barrier* b;
    CHECK(cudaMalloc(&d0, n * sizeof(int)));
    CHECK(cudaMalloc(&d1, n * sizeof(int)));
    CHECK(cudaMalloc(&b, sizeof(Barrier)));
    const int blocks = ((w + kTileX - 1) / kTileX) * ((h + kTileY - 1) / kTileY);
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, GlobalSweeps, kTileX * kTileY, 0));
    if (blocks > per_sm * prop.multiProcessorCount) {
      std::printf("global: %d tiles do not fit (%d per SM)\n", blocks, per_sm);
    } else {
      const float best = BestOf3Ms(
          [&] {
            CHECK(cudaMemcpy(d0, init.data(), n * sizeof(int), cudaMemcpyHostToDevice));
            CHECK(cudaMemcpy(d1, init.data(), n * sizeof(int), cudaMemcpyHostToDevice));
            CHECK(cudaMemset(b, 0, sizeof(Barrier)));
          },
          [&] { GlobalSweeps<<<blocks, kTileX * kTileY>>>(d0, d1, w, h, sweeps, work, b); });
      std::vector<int> got(n);
      CHECK(cudaMemcpy(got.data(), sweeps % 2 ? d1 : d0, n * sizeof(int), cudaMemcpyDeviceToHost));
      const int wrong = work ? CountWrong(got, want, sweeps) : 0;
      failures += wrong != 0;
      std::printf("global   %4d blocks of %d: %7.3f us a sweep (%d sweeps, %.3f ms), wrong %d\n", blocks,
                  kTileX * kTileY, 1000.0 * best / sweeps, sweeps, best, wrong);
    }
    CHECK(cudaFree(d0));
    CHECK(cudaFree(d1));
    CHECK(cudaFree(b));
  }

  // Clusters: one grid each, K of them at once.
  const int rows = (h + csize - 1) / csize;
  const size_t smem = 2ull * rows * w * sizeof(int);
  if (smem > prop.sharedMemPerBlockOptin) {
    std::printf("cluster: %zu bytes of shared memory a block is more than the device allows\n", smem);
    return failures ? 1 : 0;
  }
  CHECK(cudaFuncSetAttribute(ClusterSweeps, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  if (csize > 8) CHECK(cudaFuncSetAttribute(ClusterSweeps, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = csize;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cfg.blockDim = dim3(1024);
  cfg.dynamicSmemBytes = smem;
  cfg.gridDim = dim3(csize);
  int max_clusters = 0;
  CHECK(cudaOccupancyMaxActiveClusters(&max_clusters, ClusterSweeps, &cfg));
  std::printf("cluster of %d blocks, %d rows each, %zu KB shared a block: at most %d clusters resident\n", csize,
              rows, smem / 1024, max_clusters);
  int* out;
  CHECK(cudaMalloc(&out, static_cast<size_t>(std::max(max_clusters, 1)) * n * sizeof(int)));
  for (int k = 1; k <= max_clusters; k = k < max_clusters && 2 * k > max_clusters ? max_clusters : 2 * k) {
    cfg.gridDim = dim3(csize * k);
    const float best =
        BestOf3Ms([] {}, [&] { CHECK(cudaLaunchKernelEx(&cfg, ClusterSweeps, out, w, h, rows, sweeps, work)); });
    int wrong = 0;
    std::vector<int> got(n);
    for (int c = 0; c < k; ++c) {
      CHECK(cudaMemcpy(got.data(), out + static_cast<size_t>(c) * n, n * sizeof(int), cudaMemcpyDeviceToHost));
      wrong += work ? CountWrong(got, want, sweeps) : 0;
    }
    failures += wrong != 0;
    std::printf("clusters %4d at once: %7.3f us a sweep (%d sweeps, %.3f ms), wrong %d\n", k, 1000.0 * best / sweeps,
                sweeps, best, wrong);
    if (k == max_clusters) break;
  }
  CHECK(cudaFree(out));
  std::printf("longest BFS distance %d\n", *std::max_element(want.begin(), want.end(), [](int a, int b) {
    return (a >= kInf ? -1 : a) < (b >= kInf ? -1 : b);
  }));
  return failures ? 1 : 0;
}
