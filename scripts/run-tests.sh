#!/bin/sh
# Run the busted specs under LuaJIT. The last line printed is
# "N passed, N failed, N skipped" (spec/summary.lua); the exit code is nonzero
# when anything failed.
#
#   sh scripts/run-tests.sh                   every spec file, in parallel
#   sh scripts/run-tests.sh spec/x_spec.lua   these files (any busted arguments), one busted process
#
# The whole suite runs as a queue of spec files served to TIDE_TEST_JOBS
# workers (default: the online cores), one busted process per file, slowest
# files first (the times of the last run, kept in $TIDE_BUILD/spec-times; file
# size before that). The OpenCL specs are one item, run by one process: with a
# cold PoCL cache, files run side by side would each compile the same kernels
# (CLBlast's GEMM alone takes ~10 s), and CLBlast keeps its programs in memory. Each file's output is kept apart: files that fail are
# printed whole at the end, then the summed counts. A file that dies (a crash,
# a signal) counts as one failure more than it reported.
cd "$(dirname "$0")/.."
export TIDE_NUM_THREADS="${TIDE_NUM_THREADS:-2}"
# compiled kernels go to the build dir, not $HOME (a fresh clone starts cold)
case "${TIDE_BUILD:-build}" in /*) bdir="${TIDE_BUILD}" ;; *) bdir="$PWD/${TIDE_BUILD:-build}" ;; esac
export TIDE_CACHE_DIR="${TIDE_CACHE_DIR-$bdir/jit-cache}"
# OpenCL specs run on PoCL's CPU device, its kernel binaries cached in the build dir
export OCL_ICD_VENDORS="${OCL_ICD_VENDORS-/etc/OpenCL/vendors/pocl.icd}"
export POCL_DEVICES="${POCL_DEVICES-pthread}" POCL_MAX_PTHREAD_COUNT="${POCL_MAX_PTHREAD_COUNT-2}"
export POCL_CACHE_DIR="${POCL_CACHE_DIR-$bdir/pocl-cache}"
wrap= work=
trap 'rm -rf ${wrap:+"$wrap"} ${work:+"$work"}' EXIT
trap 'exit 130' INT TERM
# TIDE_TEST_PRELOAD (make test-asan: the ASan runtime) is preloaded into every
# luajit the specs start, through a luajit first on PATH that drops it from
# the environment it hands down: cc, make and sh run without it
if [ -n "${TIDE_TEST_PRELOAD-}" ]; then
  wrap=$(mktemp -d "${TMPDIR:-/tmp}/tide-luajit.XXXXXX") || exit 1
  {
    echo '#!/bin/sh'
    echo "LD_PRELOAD='$TIDE_TEST_PRELOAD' exec '$(command -v luajit)' -e \\"
    echo "  'local ffi = require \"ffi\"; ffi.cdef [[int tide_test_unsetenv(const char *) __asm__(\"unsetenv\");]]; ffi.C.tide_test_unsetenv(\"LD_PRELOAD\")' \"\$@\""
  } > "$wrap/luajit"
  chmod +x "$wrap/luajit"
  export PATH="$wrap:$PATH"
fi
if [ $# -gt 0 ]; then luajit /usr/bin/busted "$@"; exit; fi

jobs="${TIDE_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}"
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
times="$bdir/spec-times"
work=$(mktemp -d "${TMPDIR:-/tmp}/tide-tests.XXXXXX") || exit 1


# the queue: "weight item" lines, heaviest first; an item is a spec file or a
# directory run as one
{ find spec -name '*_spec.lua' ! -path 'spec/opencl/*'; echo spec/opencl; } | sort | while read -r f; do
  w=$( [ -f "$times" ] && awk -v f="$f" '$2 == f { print $1; exit }' "$times")
  [ -n "$w" ] || w=$(( $(cat $( [ -d "$f" ] && find "$f" -name '*_spec.lua' || echo "$f") | wc -c) / 1000 ))
  echo "$w $f"
done | sort -k1,1 -rn -k2 > "$work/queue"
total=$(wc -l < "$work/queue")

# a worker takes the next unclaimed file (mkdir is atomic) until none is left
worker() {
  i=0
  while read -r _ f; do
    i=$((i + 1))
    mkdir "$work/claim.$i" 2>/dev/null || continue
    t0=$(date +%s.%N)
    luajit /usr/bin/busted "$f" > "$work/$i.log" 2>&1
    rc=$?
    # LeakSanitizer's tracer can itself crash while it stops the threads at exit
    # ("Tracer caught signal 11", seen once with PoCL's threads on a host at load
    # 9): no finding, so such a file runs once more. A leak report, a sanitizer
    # error or a failed spec is never retried.
    if [ "$rc" -ne 0 ] && grep -q 'LeakSanitizer has encountered a fatal error' "$work/$i.log" &&
       ! grep -q 'ERROR: \(Leak\|Address\|Undefined\)' "$work/$i.log" &&
       grep -qE '^[0-9]+ passed, 0 failed' "$work/$i.log"; then
      printf '%s: LeakSanitizer crashed at exit; running it again\n' "$f"
      luajit /usr/bin/busted "$f" > "$work/$i.log" 2>&1
      rc=$?
    fi
    t1=$(date +%s.%N)
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$work/$i.log" | tail -n 1)
    [ -n "$line" ] || line="0 passed, 0 failed, 0 skipped"
    # exit code 0 with failures, or nonzero with none reported: one failure more
    echo "$line" | awk -v rc=$rc -v f="$f" -v t0="$t0" -v t1="$t1" -v i="$i" '{
      p = $1; x = $3; s = $5
      if ((rc != 0) != (x > 0)) x++
      printf "%s %s %d %d %d %.2f\n", i, f, p, x, s, t1 - t0 }' > "$work/$i.res"
    read -r _ _ p x s t < "$work/$i.res"
    printf '%7.1f s  %-42s %d passed, %d failed, %d skipped\n' "$t" "$f" "$p" "$x" "$s"
  done < "$work/queue"
}
start=$(date +%s.%N)
n=0
while [ $n -lt "$jobs" ]; do worker & n=$((n + 1)); done
wait
end=$(date +%s.%N)

cat "$work"/*.res 2>/dev/null | sort -n > "$work/all"
for i in $(awk '$4 > 0 { print $1 }' "$work/all"); do
  f=$(awk -v i="$i" '$1 == i { print $2 }' "$work/all")
  printf '\n==== %s failed; its output:\n' "$f"
  cat "$work/$i.log"
done
ran=$(wc -l < "$work/all")
# the times of this run order the next one (only from a complete run)
[ "$ran" -eq "$total" ] && [ -d "$bdir" ] && awk '{ print $6, $2 }' "$work/all" > "$times.tmp" && mv "$times.tmp" "$times"
awk -v jobs="$jobs" -v wall="$(echo "$start $end" | awk '{ printf "%.1f", $2 - $1 }')" -v total="$total" '
  { p += $3; x += $4; s += $5; cpu += $6 }
  END {
    if (NR < total) x += total - NR
    printf "\n%d spec files, %d workers, %s s (%.1f s of files)\n", total, jobs, wall, cpu
    printf "%d passed, %d failed, %d skipped\n", p, x, s
    exit x > 0
  }' "$work/all"
