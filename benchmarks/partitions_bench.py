"""Issue 35 §4 benchmark: `duckscore run --partition-by` on one log split into more and more
partitions. The total work is the same log; only the number of partitions grows, so a time per
partition that grows with the count is a cost of publishing, not of scoring.

A synthetic log (`synthetic_log.py`, --rows, cached in --data-dir) is split by query into
`day=…/part.parquet` folders (queries dealt out in order, the same number to each day, days from
2024-01-01). For each count a fresh `duckscore run --partition-by day` child process writes a
new output (its wall time, interpreter start included, and its CPU seconds), then one more day
is added (the last day's queries under a new name) and `--incremental` computes it into the full
output: the cost of the daily run once the year is there. The Markdown table goes to stdout, the
numbers also to --json.

    python benchmarks/partitions_bench.py --rows 75k --partitions 1,10,100,365
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # run from any folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb

from benchmarks.synthetic_log import generate, parse_count

FIRST_DAY = "2024-01-01"


def split_by_day(log: Path, folder: Path, partitions: int) -> int:
    """`log`'s queries dealt into `partitions` day folders; returns the query count."""
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE numbered AS SELECT query_id, (row_number() OVER (ORDER BY query_id) - 1) "
        "AS n FROM (SELECT DISTINCT query_id FROM read_parquet(?))",
        [str(log)],
    )
    queries = con.execute("SELECT count(*) FROM numbered").fetchall()[0][0]
    con.execute(
        "CREATE TABLE dealt AS SELECT l.*, (n * ? // ?) AS part FROM read_parquet(?) l "
        "JOIN numbered USING (query_id)",
        [partitions, queries, str(log)],
    )
    for part in range(partitions):
        day = con.execute(f"SELECT DATE '{FIRST_DAY}' + {part}").fetchall()[0][0]
        target = folder / f"day={day}"
        target.mkdir(parents=True)
        con.execute(
            "COPY (SELECT * EXCLUDE (part) FROM dealt WHERE part = ? ORDER BY ALL) TO ? "
            "(FORMAT parquet)",
            [part, str(target / "part.parquet")],
        )
    return int(queries)


def add_a_day(folder: Path, partitions: int) -> None:
    """One more day: the last day's queries, renamed (a query belongs to one partition)."""
    con = duckdb.connect()
    last, new = (
        con.execute(f"SELECT DATE '{FIRST_DAY}' + {n}").fetchall()[0][0]
        for n in (partitions - 1, partitions)
    )
    target = folder / f"day={new}"
    target.mkdir()
    con.execute(
        "COPY (SELECT * REPLACE ('new-' || query_id AS query_id) FROM read_parquet(?) ORDER BY "
        "ALL) TO ? (FORMAT parquet)",
        [str(folder / f"day={last}" / "part.parquet"), str(target / "part.parquet")],
    )


def timed_run(logs: Path, out: Path, *extra: str) -> dict[str, float]:
    """One `duckscore run --partition-by day` child: wall and CPU seconds."""
    command = [sys.executable, "-m", "duckscore", "-q", "run", "--log", str(logs), "--out",
               str(out), "--partition-by", "day", *extra]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": wall, "cpu_seconds": cpu}


def measure(log: Path, partitions: int, workdir: Path, threads: int | None) -> dict[str, Any]:
    logs, out = workdir / f"logs-{partitions}", workdir / f"scored-{partitions}"
    queries = split_by_day(log, logs, partitions)
    extra = ("--threads", str(threads)) if threads else ()
    full = timed_run(logs, out, *extra)
    add_a_day(logs, partitions)
    daily = timed_run(logs, out, "--incremental", *extra)
    files = sum(1 for p in out.rglob("*") if p.is_file())
    shutil.rmtree(logs)
    shutil.rmtree(out)
    return {"partitions": partitions, "queries": queries, "full": full, "one_more_day": daily,
            "output_files": files}  # fmt: skip


def table(rows: int, results: list[dict[str, Any]]) -> str:
    lines = [
        f"{rows:,} log rows, the same log in each run",
        "",
        "| partitions | queries each | run (s) | CPU (s) | per partition (s) | one more day, "
        "--incremental (s) | its CPU (s) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        n, full = r["partitions"], r["full"]
        lines.append(
            f"| {n} | {r['queries'] / n:,.0f} | {full['seconds']:.1f} | "
            f"{full['cpu_seconds']:.1f} | {full['seconds'] / n:.2f} | "
            f"{r['one_more_day']['seconds']:.1f} | {r['one_more_day']['cpu_seconds']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=parse_count, default=parse_count("75k"))
    parser.add_argument("--partitions", default="1,10,100,365", help="counts, comma-separated")
    parser.add_argument("--threads", type=int, help="DuckDB threads of each run")
    parser.add_argument("--data-dir", default="benchmarks/data", help="where the log is kept")
    parser.add_argument("--json", help="also write the numbers to this file")
    options = parser.parse_args()
    log = Path(options.data_dir) / f"log_{options.rows}.parquet"
    if not log.exists():
        log.parent.mkdir(parents=True, exist_ok=True)
        generate(str(log), options.rows)
    counts = [int(c) for c in options.partitions.split(",")]
    with tempfile.TemporaryDirectory(prefix="duckscore-partitions-") as workdir:
        results = []
        for count in counts:
            results.append(measure(log, count, Path(workdir), options.threads))
            print(f"{count} partitions: {results[-1]['full']['seconds']:.1f} s", file=sys.stderr)
    print(table(options.rows, results))
    if options.json:
        facts = {"rows": options.rows, "cpus": os.cpu_count(), "results": results}
        Path(options.json).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
