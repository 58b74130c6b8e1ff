#!/bin/bash
# Stages what tools/gpu_run.sh needs on the GPU machine into one folder that the device tool can carry:
# bin/ (the programs and the GPU test programs of a CUDA build), lib/ (libmrf and the libraries the GPU
# machine lacks: TBB, stb, libjpeg, Kolmogorov's maxflow when linked), data/ (the Middlebury images of ../shared/data and
# Debian's Aloe pair when present) and gpu_run.sh itself. No object files travel, so the folder stays far under
# the 64 MiB limit.
# Usage: tools/gpu_stage.sh BUILD_DIR [STAGE_DIR]   (default stage: gpu-stage, ignored by git)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: tools/gpu_stage.sh BUILD_DIR [STAGE_DIR]}
stage=${2:-gpu-stage}
[ -f "$build/bin/mrf-bench" ] || { echo "gpu_stage.sh: $build has no bin/mrf-bench (build it first)" >&2; exit 1; }
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
cp "$build"/bin/mrf-* "$stage/bin/"
for t in "$build"/tests/test_cuda_*; do
  case $t in *.cmake) ;; *) [ -x "$t" ] && cp "$t" "$stage/bin/" ;; esac
done
cp -P "$build"/libmrf.so* "$stage/lib/"
cp -P /usr/lib/x86_64-linux-gnu/libtbb.so.12* /usr/lib/x86_64-linux-gnu/libstb.so* /usr/lib/x86_64-linux-gnu/libjpeg.so.62* "$stage/lib/"
# Kolmogorov's max-flow, an optional baseline that mrf-bench links when the build found it.
# (grep reads all of ldd's output: with -q it could stop early, and pipefail would fail ldd's write.)
if ldd "$build/bin/mrf-bench" | grep libmaxflow >/dev/null; then cp -P /usr/lib/x86_64-linux-gnu/libmaxflow.so* "$stage/lib/"; fi
[ -d ../shared/data/middlebury ] && cp -r ../shared/data/middlebury "$stage/data/"
aloe=/usr/share/doc/opencv-doc/examples/data
if [ -f $aloe/aloeL.jpg ]; then
  mkdir -p "$stage/data/aloe"
  cp $aloe/aloeL.jpg $aloe/aloeR.jpg $aloe/aloeGT.png "$stage/data/aloe/"
fi
# The probes (tools/racecheck_probe.cu, tools/cluster_probe.cu), when this machine has nvcc.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$nvcc" ]; then
  "$nvcc" -O2 -lineinfo -arch=sm_90 tools/racecheck_probe.cu -o "$stage/bin/racecheck_probe"
  "$nvcc" -O3 -arch=sm_90 tools/cluster_probe.cu -o "$stage/bin/cluster_probe"
fi
cp tools/gpu_run.sh tools/gpu_ab.sh "$stage/"
du -sh "$stage"
