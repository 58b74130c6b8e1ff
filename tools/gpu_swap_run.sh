#!/bin/bash
# One GPU-machine session for cuda-swap: its tests, cuda-expansion's tests (the shared machinery),
# compute-sanitizer memcheck, and the swap rows of the gpuexpansion suite (docs/benchmarks.md).
# Run from a folder holding bin/ (programs and test binaries), lib/ (libmrf and its libraries) and
# data/middlebury/ (the Tsukuba and Venus images).
# Usage: gpu_swap_run.sh [parts...]  parts: swaptests exptests memcheck bench (default: all)
# Environment: DEADLINE (seconds for everything, default 280).
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib MRF_DATA_DIR=$PWD/data MRF_APP_DIR=$PWD/bin
O=${OUT:-/tmp/gpuswap-out}
mkdir -p "$O"
parts=${*:-swaptests exptests memcheck bench}
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv,noheader
echo "cpu: $(nproc) x $(lscpu | sed -n 's/^Model name: *//p')"
began=$(date +%s)
budget=${DEADLINE:-280}
left() { local l=$(( budget - ($(date +%s) - began) )); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
for part in $parts; do
  start=$(date +%s)
  if [ $(( start - began )) -ge $(( budget - 5 )) ]; then echo "== $part skipped: out of time"; continue; fi
  case $part in
    swaptests) timeout $(left 90) ./bin/test_cuda_swap --gtest_brief=1 >"$O/swaptests.log" 2>&1
           echo "== cuda-swap tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|differ|message|cuda-swap vs|tsukuba:|venus:" "$O/swaptests.log" | head -40 ;;
    exptests) timeout $(left 80) ./bin/test_cuda_expansion --gtest_brief=1 >"$O/exptests.log" 2>&1
           echo "== cuda-expansion tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|cuda-expansion vs|tsukuba:|venus:" "$O/exptests.log" | cut -c1-300 | head -20 ;;
    memcheck) timeout $(left 50) compute-sanitizer --tool memcheck ./bin/test_cuda_swap \
                --gtest_filter='*Small*' --gtest_brief=1 >"$O/memcheck.log" 2>&1
           echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$O/memcheck.log" | tail -4 ;;
    bench) timeout $(left 90) ./bin/mrf-bench --suite gpuexpansion --problems tsukuba,venus --repeat 5 \
                --solvers cpu-swap,cuda-swap --data-dir data --json "$O/bench.json" >"$O/bench.log" 2>"$O/bench.err"
           echo "== bench rc=$?"; grep "^| [tv]\|^#   cuda\|^# .*cuda-swap on" "$O/bench.log" | cut -c1-240; tail -1 "$O/bench.err" ;;
  esac
  echo "   ($part: $(( $(date +%s) - start )) s)"
done
