#!/bin/sh
# run.sh TARGET SECONDS -- one libFuzzer campaign on a loader fuzz target (FUZZING.md,
# "Loaders"). New inputs go to $B/fuzz/corpus/TARGET (the checked-in seeds in
# spec/fuzz/corpus/TARGET are read, never written), findings to
# $B/fuzz/artifacts/TARGET/, the log to $B/fuzz/TARGET.log, and one line of
# figures (executions, exec/s, corpus, peak RSS) is appended to $B/fuzz/stats.txt.
# Exit status: 0 when the run found nothing.
set -u
t=$1; secs=${2:-60}
B=${B:-build}; F=$B/fuzz-loaders
case "$t" in
  safetensors|npy|idx) bin=$F/lua_driver; export TIDE_FUZZ_TARGET="$t" ;;
  *) bin=$F/fuzz_$t ;;
esac
[ -x "$bin" ] || { echo "run.sh: $bin is not built (make fuzz-loaders builds it)" >&2; exit 2; }
mkdir -p "$F/corpus/$t" "$F/artifacts/$t"
# one core: the loaders' tensors are small, and the machine is shared
export TIDE_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# LuaJIT's heap is invisible to LeakSanitizer, so tensors Lua still holds would read as leaks
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
dict=spec/fuzz/dict/$t.dict
[ -f "$dict" ] && dictopt="-dict=$dict" || dictopt=
echo "fuzz-loaders: $t for ${secs}s"
t0=$(date +%s)
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 \
  -detect_leaks=0 -print_final_stats=1 -artifact_prefix="$F/artifacts/$t/" $dictopt \
  "$F/corpus/$t" "spec/fuzz/corpus/$t" > "$F/$t.log" 2>&1
rc=$?
took=$(( $(date +%s) - t0 ))
stat() { sed -n "s/^stat::$1: *//p" "$F/$t.log" | tail -1; }
line="$(date -u +%Y-%m-%dT%H:%MZ) $t ${took}s runs=$(stat number_of_executed_units) exec/s=$(stat average_exec_per_sec) new_units=$(stat new_units_added) peak_rss_mb=$(stat peak_rss_mb) rc=$rc"
echo "$line" >> "$F/stats.txt"
echo "  $line"
if [ $rc -ne 0 ]; then
  grep -E "==tide-fuzz==|ERROR: |SUMMARY|Test unit written" "$F/$t.log" | head -20 >&2
  echo "fuzz-loaders: $t found something; the full log is $F/$t.log" >&2
fi
exit $rc
