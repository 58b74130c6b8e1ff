#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for SECONDS (default 60) from the seed corpus
# in tests/fuzz/corpus/<target>/. New inputs go to a scratch folder, the repository's corpus is only read.
# Prints executions, time and whether a crash was found; exits non-zero on any crash.
set -euo pipefail
seconds=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${MRF_FUZZ_BUILD:-$root/build-fuzz}
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMRF_WITH_CUDA=OFF \
  -DMRF_BUILD_FUZZERS=ON -DMRF_BUILD_APPS=OFF -DMRF_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_model_file fuzz_image $( [ -f "$root/tests/fuzz/fuzz_dimacs.cpp" ] && echo fuzz_dimacs ) >/dev/null
status=0
printf '%-18s %12s %8s %s\n' target executions seconds result
for target in fuzz_model_file fuzz_image fuzz_dimacs; do
  [ -x "$build/tests/fuzz/$target" ] || continue
  name=${target#fuzz_}
  work=$(mktemp -d)
  # JPEG seeds from Debian's opencv-doc when installed (never copied into the repository).
  if [ "$name" = image ] && [ -d /usr/share/doc/opencv-doc/examples/data ]; then
    cp /usr/share/doc/opencv-doc/examples/data/{blox,LinuxLogo}.jpg "$work"/ 2>/dev/null || true
  fi
  log=$build/$target.log
  if "$build/tests/fuzz/$target" "$work" "$root/tests/fuzz/corpus/$name" -max_total_time="$seconds" \
       -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/$target-" >"$log" 2>&1; then
    result=ok
  else
    result="CRASH (see $log)"
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
  printf '%-18s %12s %8s %s\n' "$target" "$execs" "$seconds" "$result"
  rm -rf "$work"
done
exit $status
