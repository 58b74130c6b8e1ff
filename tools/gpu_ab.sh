#!/bin/bash
# A/B of two builds on the GPU machine, alternating them in one session so that both see the same machine:
# the stage this script lies in (tools/gpu_stage.sh) against a base folder holding bin/mrf-bench and lib/ of
# another build (the stage of an earlier build, or just those two parts of it: a second full stage would pass the
# device tool's 64 MiB limit). Prints the rows that compare; logs of the first round go to $OUT.
# Usage: gpu_ab.sh BASE_DIR [pr|expansion]...   (default: pr)
#   pr         mrf-bench --suite pushrelabel --sizes $SIZES --repeat $REPEAT --solvers cuda-pr: fresh solves, re-solves
#   expansion  mrf-bench --suite gpuexpansion --problems tsukuba,venus --repeat $REPEAT --solvers cuda-expansion
# Environment: ROUNDS (alternations, default 2), SIZES (default "1024 4096"), REPEAT (default 5).
base=$(cd "${1:?usage: gpu_ab.sh BASE_DIR [pr|expansion]...}" && pwd) || exit 1
shift
cd "$(dirname "$0")" || exit 1
O=${OUT:-/tmp/gpu-ab-out}
mkdir -p "$O"
nvidia-smi -L
for part in ${*:-pr}; do
  for i in $(seq "${ROUNDS:-2}"); do
    for build in base new; do
      dir=$PWD
      [ $build = base ] && dir=$base
      log=/tmp/ab-$part-$build-$i.log
      case $part in
        pr) args=(--suite pushrelabel --sizes ${SIZES:-1024 4096} --solvers cuda-pr)
            rows='re-solve after|^ *[0-9]+ cuda-pr +[0-9]' ;;
        expansion) args=(--suite gpuexpansion --problems tsukuba,venus --solvers cuda-expansion --data-dir "$PWD/data")
                   rows='^\| (tsukuba|venus) +\| cuda-expansion  ' ;;
        *) echo "gpu_ab.sh: unknown part '$part' (pr or expansion)" >&2; exit 2 ;;
      esac
      LD_LIBRARY_PATH=$dir/lib timeout 150 "$dir/bin/mrf-bench" "${args[@]}" --repeat "${REPEAT:-5}" >"$log" 2>&1
      echo "== $part, $build, round $i: rc=$?"
      grep -E "$rows" "$log" | cut -c1-220
      [ "$i" = 1 ] && cp "$log" "$O/"
    done
  done
done
