"""`duckscore run` on a log several times DuckDB's memory limit spills to disk and completes.

The benchmark runs 30M log rows under `--memory-limit 1GB`; this is the same shape scaled down so
that CI guards it: 3M rows of the benchmark's synthetic log at 175 MB, 2 threads. Unlimited, the
run peaks at about 1.1 GB of RSS (the log alone takes 291 MB in DuckDB); at the limit it must
finish with the process's RSS near the limit. Measured when this test was written: score's
per-query quantiles computed grouped and joined back (the shape between 3897f67 and this test)
run out of memory here in sql/score/parents.sql at 150 and 175 MB (they pass at 200 MB), the
window form passes at both, and fusion itself needs more than 125 MB. So a template change that
stops DuckDB from spilling fails here.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import duckdb
import pytest

from benchmarks.synthetic_log import generate

pytestmark = [pytest.mark.slow, pytest.mark.extended]  # 31 s: make test's 15 minutes

ROWS = 3_000_000
LIMIT_MB = 175
# the interpreter, pandas, pyarrow and DuckDB's own code are about 200 MB beside the buffer pool
RSS_ALLOWANCE_MB = 300
# runs a command and prints the peak RSS (kB) of it, its only child
PEAK_RSS = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(done.returncode)"
)


def test_a_log_larger_than_memory_spills_and_completes(tmp_path: Path) -> None:
    log = tmp_path / "log.parquet"
    rows = generate(str(log), ROWS)
    out = tmp_path / "out"
    command = [
        sys.executable, "-c", PEAK_RSS, str(Path(sysconfig.get_path("scripts")) / "duckscore"),
        "-q", "run", "--log", str(log), "--out", str(out), "--threads", "2",
        "--memory-limit", f"{LIMIT_MB}MB", "--temp-dir", str(tmp_path / "spill"),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    peak_mb = int(done.stdout.split()[-1]) / 1024
    assert peak_mb < LIMIT_MB + RSS_ALLOWANCE_MB, f"peak RSS {peak_mb:.0f} MB"
    con = duckdb.connect()
    logged = con.execute(f"SELECT count(*), count(DISTINCT query_id) FROM '{log}'").fetchone()
    scored = con.execute(f"SELECT count(*) FROM '{out / 'queries.parquet'}'").fetchone()
    assert logged is not None and scored is not None
    assert logged[0] == rows and scored[0] == logged[1]
