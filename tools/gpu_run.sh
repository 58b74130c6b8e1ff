#!/bin/bash
# One GPU-machine session: the GPU tests, compute-sanitizer and the GPU benchmarks of docs/benchmarks.md and
# docs/bp.md. Run from a folder holding bin/ (programs and test binaries), lib/ (libmrf, libtbb, libstb) and
# data/ (middlebury/ and aloe/ images), as tools/gpu_stage.sh BUILD_DIR makes it; logs go to $OUT.
# Usage: gpu_run.sh [parts...]   (default: tests memcheck racecheck)
#   tests      every GPU test program (cuda-pr, cuda-bp, cuda-expansion, cuda-swap, the kept context)
#   memcheck   compute-sanitizer memcheck on each program's *Small* tests (fault injection excluded)
#   racecheck  racecheck (and synccheck for cuda-bp) on the tests written for it, and on tools/racecheck_probe.cu
#   pr         --suite pushrelabel at $SIZES (cuda-pr against cpu-bk, re-solves), extra rows from $PR_TUNINGS
#   binary     --suite binary: cpu-bk, cuda-pr and Kolmogorov's BK when installed
#   tbb        tbb-pr against cpu-bk on this machine's cores
#   bp         --suite bp: cuda-bp against tbb-bp on Tsukuba and Aloe
#   expansion  --suite gpuexpansion on Tsukuba and Venus: cuda-expansion, cuda-swap and their CPU baselines
#   aloe       --suite gpuexpansion on Aloe (CPU baseline stopped after 25 s)
#   profile    Nsight Compute on one launch of each GPU solver's main kernel (cuda-bp's fast tile or split kernel on
#              Tsukuba 1 x 1, cuda-expansion's solve kernel on Tsukuba, cuda-pr's push and BFS kernels on the
#              1024 x 1024 scene): stall reasons per SASS line as CSV, and the SASS of libmrf, in $OUT/profile.tgz
# Environment: DEADLINE (seconds for everything, default 500), SIZES, PR_TUNINGS, EXP_TUNINGS, PROGRAMS (the test
# programs of tests and memcheck), PROFILES (what profile covers: any of bp expansion pr; default all).
cd "$(dirname "$0")" || exit 1
export LD_LIBRARY_PATH=$PWD/lib MRF_DATA_DIR=$PWD/data MRF_APP_DIR=$PWD/bin
O=${OUT:-/tmp/gpu-run-out}
mkdir -p "$O"
nvidia-smi -L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv,noheader
echo "cpu: $(nproc) x $(lscpu | sed -n 's/^Model name: *//p')"
began=$(date +%s)
budget=${DEADLINE:-500}
PROGRAMS=${PROGRAMS:-test_cuda_push_relabel test_cuda_bp test_cuda_expansion test_cuda_swap test_cuda_kept_context}

# step NAME SECONDS PATTERN COMMAND...: runs COMMAND with at most SECONDS (and what is left of the budget),
# output in $O/NAME.log; prints the exit status and the lines matching PATTERN.
step() {
  local name=$1 limit=$2 pattern=$3
  shift 3
  local left=$(( budget - ($(date +%s) - began) ))
  if [ $left -lt 5 ]; then echo "== $name skipped: out of time"; return; fi
  [ $left -lt $limit ] && limit=$left
  local start=$(date +%s)
  timeout $limit "$@" >"$O/$name.log" 2>&1
  echo "== $name rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "$pattern" "$O/$name.log" | cut -c1-240 | head -40
}
TESTS_SEEN="^\[  (PASSED|FAILED|SKIPPED) |Failure|Expected|Which is|differ"
SANITIZER_SEEN="ERROR SUMMARY|HAZARD|RACECHECK SUMMARY|^\[  (PASSED|FAILED) "
TABLE_ROWS="^\| |^# "

for part in ${*:-tests memcheck racecheck}; do
  case $part in
    tests) for p in $PROGRAMS; do step "tests-$p" 120 "$TESTS_SEEN" ./bin/$p --gtest_brief=1; done ;;
    # stack_bytes: memcheck's instrumented local repairs need more stack than the conditional graph's
    # kernels get (docs/benchmarks.md, "Re-solves certified after local repairs").
    memcheck) for p in $PROGRAMS; do
                step "memcheck-$p" 90 "$SANITIZER_SEEN" env MRF_CUDA_EXPANSION_TUNING=${MRF_CUDA_EXPANSION_TUNING:+$MRF_CUDA_EXPANSION_TUNING,}stack_bytes=4096 \
                  compute-sanitizer --tool memcheck ./bin/$p \
                  --gtest_filter='*Small*:-*Inject*' --gtest_brief=1
              done ;;
    racecheck)
      step racecheck-cuda-pr 60 "$SANITIZER_SEEN" compute-sanitizer --tool racecheck ./bin/test_cuda_push_relabel \
        --gtest_filter='*Sanitizer*' --gtest_brief=1
      step racecheck-cuda-bp 60 "$SANITIZER_SEEN" compute-sanitizer --tool racecheck ./bin/test_cuda_bp \
        --gtest_filter='*SmallSanitizer*' --gtest_brief=1
      step synccheck-cuda-bp 60 "$SANITIZER_SEEN" compute-sanitizer --tool synccheck ./bin/test_cuda_bp \
        --gtest_filter='*SmallSanitizer*' --gtest_brief=1
      # racecheck on a race-free kernel with the split launch's barriers (tools/racecheck_probe.cu): hazards
      # reported here are racecheck's, not the code's; without the loaders' barriers it reports none.
      if [ -x bin/racecheck_probe ]; then
        step racecheck-probe 60 "values read wrong" bash -c 'for loaders in 0 1; do ./bin/racecheck_probe 60 16 $loaders;
          for i in 1 2 3 4 5 6; do echo "racecheck, loaders $loaders, run $i: $(compute-sanitizer --tool racecheck \
            ./bin/racecheck_probe 60 16 $loaders | grep -E "RACECHECK SUMMARY|values read wrong" | tr "\n" " ")"; done; done'
      fi
      # A grid barrier cannot work when racecheck serialises blocks: one solve block, the cycle loop on the host.
      step racecheck-cuda-expansion 60 "$SANITIZER_SEEN" env MRF_CUDA_EXPANSION_TUNING=solve_blocks=1,device_loop=0 \
        compute-sanitizer --tool racecheck ./bin/test_cuda_expansion --gtest_filter='*SmallRace*' --gtest_brief=1 ;;
    pr) step pr 120 "$TABLE_ROWS" ./bin/mrf-bench --suite pushrelabel --sizes ${SIZES:-1024 4096} --repeat 5 \
          --json "$O/pr.json" $PR_TUNINGS ;;
    binary) step binary 60 "$TABLE_ROWS" ./bin/mrf-bench --suite binary --sizes 1024 2048 --repeat 3 \
              --solvers cpu-bk,cuda-pr,kolmogorov-bk ;;
    tbb) step tbb 40 "$TABLE_ROWS" ./bin/mrf-bench --suite pushrelabel --sizes 1024 --repeat 3 --solvers cpu-bk,tbb-pr ;;
    bp) step bp 150 "$TABLE_ROWS" ./bin/mrf-bench --suite bp --data-dir data --repeat 11 --json "$O/bp.json" ;;
    expansion) step expansion 200 "$TABLE_ROWS" ./bin/mrf-bench --suite gpuexpansion --problems tsukuba,venus \
                 --repeat 3 --data-dir data --json "$O/expansion.json" $EXP_TUNINGS ;;
    aloe) step aloe 100 "$TABLE_ROWS" ./bin/mrf-bench --suite gpuexpansion --problems aloe --repeat 2 --time-limit 25 \
            --solvers cpu-expansion,cuda-expansion --data-dir data --json "$O/aloe.json" ;;
    profile)
      P=$O/profile; mkdir -p $P
      M=data/middlebury
      tsukuba="$M/tsukuba-imL.png $M/tsukuba-imR.png --preset tsukuba -q"
      NCU="ncu --clock-control none --section WarpStateStats --section SourceCounters --section SchedulerStats \
           --section LaunchStats --section SpeedOfLight --import-source no -f"
      want() { case " ${PROFILES:-bp expansion pr} " in *" $1 "*) return 0 ;; esac; return 1; }
      want bp && step ncu-bp 90 "Duration|Warp Cycles|Issued Ipc|==PROF==|rror" $NCU -k regex:"Fast(Tile|Split)Kernel" -c 1 -o $P/bp \
        ./bin/mrf-stereo $tsukuba --algorithm bp --device cuda --iterations 1
      want expansion && step ncu-expansion 150 "Duration|Warp Cycles|Issued Ipc|==PROF==|rror" env MRF_CUDA_EXPANSION_TUNING=device_loop=0 \
        $NCU -k regex:SolveKernel -s 6 -c 2 -o $P/expansion ./bin/mrf-stereo $tsukuba --algorithm expansion --device cuda
      want pr && step ncu-pr 120 "Duration|Warp Cycles|Issued Ipc|==PROF==|rror" $NCU -k regex:"PushTilesKernel|BfsTilesKernel" -s 4 -c 4 \
        -o $P/pr ./bin/mrf-segment --size 1024 --backend cuda-pr -q --output-dir /tmp/seg
      for r in bp expansion pr; do
        [ -f $P/$r.ncu-rep ] || continue
        ncu -i $P/$r.ncu-rep --page details > $P/$r-details.txt 2>&1
        ncu -i $P/$r.ncu-rep --page source --csv --print-source sass > $P/$r-source.csv 2>&1
      done
      cuobjdump -sass lib/libmrf.so.0 | gzip > $P/libmrf.sass.gz
      rm -f $P/*.ncu-rep
      tar czf $O/profile.tgz -C $O profile && rm -rf $P
      ls -la $O/profile.tgz ;;
    *) echo "== $part: unknown part" ;;
  esac
done
