#!/bin/bash
# One GPU-machine session for cuda-pr: tests, compute-sanitizer, benchmarks (see docs/benchmarks.md).
# Run from a folder holding bin/ (programs and test binaries) and lib/ (libmrf and its libraries).
# Usage: gpu_run.sh [parts...]  parts: tests memcheck racecheck bench binary tbb (default: all)
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib MRF_DATA_DIR=$PWD/data MRF_APP_DIR=$PWD/bin
O=${OUT:-/tmp/cudapr-out}
mkdir -p "$O"
parts=${*:-tests memcheck racecheck bench binary tbb}
TUNINGS=${TUNINGS:-"--tuning local_iterations=4 --tuning local_iterations=16 --tuning rounds_per_global_relabel=2 \
 --tuning rounds_per_global_relabel=4,local_iterations=4 --tuning tile_y=8 --tuning tile_y=32 --tuning cuda_graphs=0 \
 --tuning bfs_check_every=4"}
SIZES=${SIZES:-"1024 4096"}
nvidia-smi -L; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,memory.total --format=csv,noheader
echo "cpu: $(nproc) x $(lscpu | sed -n 's/^Model name: *//p')"
began=$(date +%s)
budget=${DEADLINE:-225}
# Seconds left of the budget, at most $1.
left() { local l=$(( budget - ($(date +%s) - began) )); [ $l -gt $1 ] && l=$1; [ $l -lt 1 ] && l=1; echo $l; }
for part in $parts; do
  start=$(date +%s)
  if [ $(( start - began )) -ge $(( budget - 5 )) ]; then echo "== $part skipped: out of time"; continue; fi
  case $part in
    tests) timeout $(left ${T_TESTS:-100}) ./bin/test_cuda_push_relabel --gtest_brief=1 >"$O/tests.log" 2>&1
           echo "== tests rc=$?"; grep -E "FAILED|PASSED|SKIPPED|Failure|Expected|Which is|differ|message" "$O/tests.log" | head -40 ;;
    memcheck) timeout $(left ${T_MEM:-45}) compute-sanitizer --tool memcheck ./bin/test_cuda_push_relabel \
                --gtest_filter='*Small*:-*Inject*' --gtest_brief=1 >"$O/memcheck.log" 2>&1
           echo "== memcheck rc=$?"; tail -4 "$O/memcheck.log" ;;
    racecheck) timeout $(left ${T_RACE:-45}) compute-sanitizer --tool racecheck ./bin/test_cuda_push_relabel \
                --gtest_filter='*Sanitizer*' --gtest_brief=1 >"$O/racecheck.log" 2>&1
           echo "== racecheck rc=$?"; tail -4 "$O/racecheck.log" ;;
    bench) timeout $(left ${T_BENCH:-80}) ./bin/mrf-bench --suite pushrelabel --sizes $SIZES --repeat 5 --json "$O/pr.json" \
                $TUNINGS >"$O/bench.log" 2>"$O/bench.err"
           echo "== bench rc=$?"; cat "$O/bench.log"; tail -3 "$O/bench.err" ;;
    binary) timeout $(left ${T_BIN:-40}) ./bin/mrf-bench --suite binary --sizes 1024 2048 --repeat 3 \
                --solvers cpu-bk,cuda-pr,kolmogorov-bk >"$O/binary.log" 2>&1
           echo "== binary rc=$?"; grep -v "^mrf-bench:" "$O/binary.log" ;;
    tbb) timeout $(left ${T_TBB:-30}) ./bin/mrf-bench --suite pushrelabel --sizes 1024 --repeat 3 --solvers cpu-bk,tbb-pr \
                >"$O/tbb.log" 2>&1
           echo "== tbb rc=$?"; grep -v "^mrf-bench:\|^#" "$O/tbb.log" ;;
  esac
  echo "   ($part: $(( $(date +%s) - start )) s)"
done
