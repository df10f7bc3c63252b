"""Write one bench/run.sh record (TSV) for a common.bench() result.
Columns: case peer threads median_s min_s max_s reps work, where work is the
number of ops per timed call (per-op cases) or the bytes moved per call."""
import os


def emit(case, peer, threads, st, work):
    path = os.environ.get("BENCH_OUT")
    if not path:
        return
    with open(path, "a") as f:
        f.write("%s\t%s\t%d\t%.9f\t%.9f\t%.9f\t%d\t%.0f\n" % (
            case, peer, threads, st["median_ms"] * 1e-3, st["min_ms"] * 1e-3,
            st["max_ms"] * 1e-3, st["reps"], work))
