#!/bin/sh
# bench/startup_ab.sh -- the tide command's start-up with libgccjit, the OpenCL
# ICD loader and CLBlast loaded lazily (build/libtide.so, the default) against
# the same objects linked with them (NEEDED, so loaded and relocated at every
# start, as before issue 18): $B/linked/libtide.so.0, put first on
# LD_LIBRARY_PATH (the tide command's RUNPATH comes after it). ROUNDS rounds
# alternate the two; each prints bench/repl_startup.py's medians of RUNS starts.
#   sh bench/startup_ab.sh           (ROUNDS=3 RUNS=21 B=build)
cd "$(dirname "$0")/.." || exit 1
B="${B:-build}" ROUNDS="${ROUNDS:-3}" RUNS="${RUNS:-21}"
make -s B="$B" >/dev/null || exit 1
mkdir -p "$B/linked"
objs=$(make -s -p -n B="$B" 2>/dev/null | sed -n 's/^OBJ := //p' | head -n 1)
libs=$(make -s B="$B" print-libs)
cc -shared -Wl,-soname,libtide.so.0 -Wl,-z,nodelete -Wl,--no-as-needed -o "$B/linked/libtide.so.0" \
  $objs $libs -lgccjit -lclblast -lOpenCL || exit 1
echo "linked: $(readelf -d "$B/linked/libtide.so.0" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
echo "lazy:   $(readelf -d "$B/libtide.so" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')"
r=1
while [ "$r" -le "$ROUNDS" ]; do
  echo "-- round $r (load $(cut -d' ' -f1 /proc/loadavg))"
  echo "lazy";   python3 bench/repl_startup.py --runs "$RUNS" --bin "$B/tide" --only-tide
  echo "linked"; python3 bench/repl_startup.py --runs "$RUNS" --bin "$B/tide" --only-tide --libdir "$B/linked"
  r=$((r + 1))
done
