"""Does handing the Python API an Arrow table copy it? Peak memory of `ds.fuse` on a synthetic log
given as a Parquet path, and as an Arrow table already in memory.

Each measurement runs in a fresh process: the baseline RSS after imports (and after reading the
table, for the table run), then the peak RSS of `ds.fuse(…, explain=False)` on a connection with
`--memory-limit`. Zero-copy scanning adds the table's own memory to the path run's peak and
nothing more; a copy would add it twice.

    python benchmarks/api_memory.py [--rows 10M] [--memory-limit 1GB] [--data benchmarks/data]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # run from any folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.synthetic_log import generate, parse_count

MEASURE = """
import json, resource, sys, time
import duckdb, pyarrow.parquet as pq
import duckscore as ds
path, mode, limit = sys.argv[1:4]
def rss_mb():
    with open('/proc/self/status') as status:
        return next(int(l.split()[1]) for l in status if l.startswith('VmRSS')) / 1024
given = path if mode == 'path' else pq.read_table(path)
before = rss_mb()
con = duckdb.connect()
con.execute(f"SET memory_limit = '{limit}'")
con.execute("SET enable_progress_bar = false")  # it writes to stdout on long queries
started = time.perf_counter()
fused = ds.fuse(given, explain=False, con=con)
rows = fused.fused.aggregate('count(*)').fetchall()[0][0]
print(json.dumps({'mode': mode, 'rss_before_mb': before, 'seconds': time.perf_counter() - started,
                  'peak_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  'fused_rows': rows, 'table_mb': 0 if mode == 'path' else given.nbytes / 2**20}))
"""


def measure(path: Path, mode: str, limit: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path), mode, limit],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10M", help="log rows, e.g. 1M, 10M")
    parser.add_argument("--memory-limit", default="1GB", help="DuckDB's limit in the runs")
    parser.add_argument("--data", default="benchmarks/data", help="where the log is kept")
    options = parser.parse_args()
    rows = parse_count(options.rows)
    path = Path(options.data) / f"log_{options.rows}.parquet"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        generate(str(path), rows)
    by_path = measure(path, "path", options.memory_limit)
    by_table = measure(path, "table", options.memory_limit)
    print(f"{rows:,} log rows, DuckDB memory limit {options.memory_limit}")
    print(
        f"{'input':<8}{'RSS before':>12}{'peak RSS':>12}{'added':>10}{'seconds':>9}{'fused rows':>12}"
    )
    for run in (by_path, by_table):
        added = run["peak_mb"] - run["rss_before_mb"]
        print(
            f"{run['mode']:<8}{run['rss_before_mb']:>10.0f}MB{run['peak_mb']:>10.0f}MB"
            f"{added:>8.0f}MB{run['seconds']:>9.1f}{run['fused_rows']:>12,}"
        )
    table_added = by_table["peak_mb"] - by_table["rss_before_mb"]
    print(
        f"the Arrow table holds {by_table['table_mb']:.0f} MB; ds.fuse on it added "
        f"{table_added:.0f} MB to the process ({by_table['peak_mb'] / by_table['rss_before_mb']:.2f}x "
        f"its memory before the call), on the Parquet path "
        f"{by_path['peak_mb'] - by_path['rss_before_mb']:.0f} MB: a copy of the table would add "
        "its size on top of the path run's"
    )


if __name__ == "__main__":
    main()
