#!/bin/bash
# One GPU-machine session for cuda-expansion: tests, compute-sanitizer, benchmarks (docs/benchmarks.md).
# Run from a folder holding bin/ (programs and test binaries), lib/ (libmrf and its libraries) and
# data/ (middlebury/ and aloe/ images).
# Usage: gpu_expansion_run.sh [parts...]  parts: tests prtests memcheck racecheck bench aloe (default: all)
# Environment: DEADLINE (seconds for everything, default 250), T_<PART> (seconds per part).
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib MRF_DATA_DIR=$PWD/data MRF_APP_DIR=$PWD/bin
O=${OUT:-/tmp/gpuexp-out}
mkdir -p "$O"
parts=${*:-tests prtests memcheck racecheck bench aloe}
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv,noheader
echo "cpu: $(nproc) x $(lscpu | sed -n 's/^Model name: *//p')"
# cuda-expansion rows of the bench part besides the default (names: see MRF_CUDA_EXPANSION_TUNING).
SWEEP="--tuning reuse_flow=0 --tuning device_loop=0 --tuning local_iterations=8,rounds_per_global_relabel=2 \
 --tuning local_iterations=16 --tuning rounds_per_global_relabel=2 --tuning rounds_per_global_relabel=8 \
 --tuning local_iterations=64 --tuning tile_y=32 --tuning resolve_push_rounds=2"
began=$(date +%s)
budget=${DEADLINE:-250}
# Seconds left of the budget, at most $1.
left() { local l=$(( budget - ($(date +%s) - began) )); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
for part in $parts; do
  start=$(date +%s)
  if [ $(( start - began )) -ge $(( budget - 5 )) ]; then echo "== $part skipped: out of time"; continue; fi
  case $part in
    tests) timeout $(left ${T_TESTS:-70}) ./bin/test_cuda_expansion --gtest_brief=1 >"$O/tests.log" 2>&1
           echo "== tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|differ|message|cuda-expansion vs|tsukuba:|venus:" "$O/tests.log" | head -40
           timeout 20 ./bin/test_expansion_steps --gtest_brief=1 2>&1 | grep -E "^\[  (PASSED|FAILED) |twin and" ;;
    prtests) timeout $(left ${T_PR:-60}) ./bin/test_cuda_push_relabel --gtest_brief=1 >"$O/prtests.log" 2>&1
           echo "== cuda-pr tests rc=$?"; grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure" "$O/prtests.log" | head -10 ;;
    memcheck) timeout $(left ${T_MEM:-45}) compute-sanitizer --tool memcheck ./bin/test_cuda_expansion \
                --gtest_filter='*Small*' --gtest_brief=1 >"$O/memcheck.log" 2>&1
           echo "== memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$O/memcheck.log" | tail -4 ;;
    racecheck) MRF_CUDA_EXPANSION_TUNING=solve_blocks=1,device_loop=0 timeout $(left ${T_RACE:-40}) compute-sanitizer --tool racecheck ./bin/test_cuda_expansion \
                --gtest_filter='*SmallRace*' --gtest_brief=1 >"$O/racecheck.log" 2>&1
           echo "== racecheck rc=$?"; grep -E "HAZARD|RACECHECK SUMMARY|PASSED|FAILED" "$O/racecheck.log" | tail -4 ;;
    bench) timeout $(left ${T_BENCH:-60}) ./bin/mrf-bench --suite gpuexpansion --problems tsukuba,venus --repeat 5 \
                --data-dir data --json "$O/bench.json" ${TUNINGS:-$SWEEP} \
                >"$O/bench.log" 2>"$O/bench.err"
           echo "== bench rc=$?"; grep "^| [tv]\|target" "$O/bench.log" | cut -c1-175; tail -1 "$O/bench.err" ;;
    aloe) timeout $(left ${T_ALOE:-80}) ./bin/mrf-bench --suite gpuexpansion --problems aloe --repeat 2 --time-limit 25 \
                --data-dir data --json "$O/aloe.json" ${ALOE_TUNINGS:---tuning reuse_flow=0} >"$O/aloe.log" 2>"$O/aloe.err"
           echo "== aloe rc=$?"; grep "^| a\|^# cpu-exp" "$O/aloe.log" | cut -c1-175; tail -1 "$O/aloe.err" ;;
  esac
  echo "   ($part: $(( $(date +%s) - start )) s)"
done
