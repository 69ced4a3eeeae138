"""Issue 33: the latency of one live request, in process, beside DuckDB's own floor.

For each of the 300 SciFact queries (about 250 hits each), alternating in one run: (a) the floor
— one prepared DuckDB statement over the query's hits (an Arrow table), GROUP BY parent with
reciprocal-rank fusion (Σ 1/(60 + rank)) and ORDER BY, fetched; (b) `duckscore.scorer().score`
of the same hits — checks, fusion, parent features, scores, the contract as dicts. Prints p50 and
p99 of each, the ratios to the floor's p50, queries per second of (b) and the peak RSS. With
--soak N, then up to N more calls cycling through the queries (stopped after --max-minutes),
each tenth of them reported: the calls' p50 and p99 over that tenth, the resident memory
(VmRSS) at its end and the lanes' DuckDB instances recycled so far (issue 52 §2: every
--recycle-calls calls, or when the latency drifts past --recycle-drift). Flat is the same p50
and RSS at the end as after the first tenth. --soak-threads T: the soak's calls made by T threads
of the one scorer (each with its lanes on a DuckDB instance of its own, as serve's scoring
threads), so a million calls take an hour rather than three.

    python benchmarks/live_bench.py [--rounds 3] [--queries 300] [--json F]
        [--soak 1000000 --max-minutes 60 --soak-threads 1] [--recycle-calls 2000]
        [--recycle-drift 1.3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

import duckscore as ds
from duckscore.api.scorer import Scorer
from duckscore.core.resources import fixtures_dir

FLOOR = """
SELECT parent_id, sum(1.0 / (60 + rank)) AS rrf
FROM hits GROUP BY parent_id ORDER BY rrf DESC, parent_id
"""


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def soak(
    scorer: Scorer, queries: list[pa.Table], calls: int, minutes: float, threads: int = 1
) -> dict[str, Any]:
    """Every tenth of `calls` scorer calls made by `threads` threads (fewer calls when
    `minutes` run out first): its p50 and p99 (ms), the RSS (MB) at its end and the recycles so
    far."""
    checkpoints: list[dict[str, Any]] = []
    started = time.perf_counter()
    deadline = started + minutes * 60
    tenth: list[float] = []
    taken = done = 0
    lock = threading.Lock()

    def call_until_done() -> None:
        nonlocal taken, done, tenth
        while True:
            with lock:
                if taken >= calls or time.perf_counter() >= deadline:
                    return
                hits = queries[taken % len(queries)]
                taken += 1
            t = time.perf_counter()
            scorer.score(hits)
            elapsed = (time.perf_counter() - t) * 1000
            with lock:
                tenth.append(elapsed)
                done += 1
                if done % max(1, calls // 10) == 0 or done == calls:
                    checkpoints.append(_checkpoint(scorer, done, tenth))
                    tenth = []

    # one thread: the calling one, whose lanes the rounds warmed
    workers = [threading.Thread(target=call_until_done) for _ in range(threads - 1)]
    for worker in workers:
        worker.start()
    call_until_done()
    for worker in workers:
        worker.join()
    if tenth:  # the time ran out within a tenth
        checkpoints.append(_checkpoint(scorer, done, tenth))
    return {
        "soak_calls_asked": calls,
        "soak_calls": done,
        "soak_threads": threads,
        "soak_max_minutes": minutes,
        "soak": checkpoints,
        "soak_wall_s": time.perf_counter() - started,
    }


def _checkpoint(scorer: Scorer, calls: int, times: list[float]) -> dict[str, Any]:
    found = {
        "calls": calls,
        "p50_ms": round(percentile(times, 0.5), 2) if len(times) > 1 else times[0],
        "p99_ms": round(percentile(times, 0.99), 2) if len(times) > 1 else times[0],
        "rss_mb": round(rss_mb(), 1),
        "recycles": scorer.lanes.recycles,
    }
    print(
        f"  {calls} calls: p50 {found['p50_ms']:.1f} ms, p99 {found['p99_ms']:.1f} ms, "
        f"RSS {found['rss_mb']:.1f} MB, {found['recycles']} recycles",
        flush=True,
    )
    return found


def per_query(log: pa.Table) -> list[pa.Table]:
    ids = sorted(set(log.column("query_id").to_pylist()))
    return [log.filter(pc.equal(log["query_id"], q)) for q in ids]


def at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=300, help="the first N SciFact queries")
    parser.add_argument("--soak", type=int, default=0, help="calls after the rounds, RSS read")
    parser.add_argument("--max-minutes", type=float, default=60.0, help="the soak's time bound")
    parser.add_argument(
        "--soak-threads", type=at_least_one, default=1, help="threads making the calls"
    )
    parser.add_argument("--recycle-calls", type=int, default=2000)
    parser.add_argument("--recycle-drift", type=float, default=1.3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    log = duckdb.sql(
        f"FROM read_parquet('{fixtures_dir() / 'scifact' / 'retrieval_log.parquet'}')"
    ).to_arrow_table()
    queries = per_query(log)[: args.queries]
    floor_con = duckdb.connect(config={"threads": 1})
    floor_ms: list[float] = []
    live_ms: list[float] = []
    recycling = {"recycle_calls": args.recycle_calls, "recycle_drift": args.recycle_drift}
    with ds.scorer(**recycling) as scorer:
        scorer.score(queries[0])  # the request shape's SQL rendered and checked once
        started = time.perf_counter()
        for _ in range(args.rounds):
            for hits in queries:
                t = time.perf_counter()
                floor_con.register("hits", hits)
                floor_con.execute(FLOOR).fetchall()
                floor_con.unregister("hits")
                floor_ms.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                scorer.score(hits)
                live_ms.append((time.perf_counter() - t) * 1000)
        elapsed = time.perf_counter() - started
        soaked = (
            soak(scorer, queries, args.soak, args.max_minutes, args.soak_threads)
            if args.soak
            else {}
        )
    floor_p50 = percentile(floor_ms, 0.5)
    results = {
        "requests": len(live_ms),
        "hits_per_request": round(sum(q.num_rows for q in queries) / len(queries)),
        "floor_p50_ms": floor_p50,
        "floor_p99_ms": percentile(floor_ms, 0.99),
        "live_p50_ms": percentile(live_ms, 0.5),
        "live_p99_ms": percentile(live_ms, 0.99),
        "live_p50_over_floor_p50": percentile(live_ms, 0.5) / floor_p50,
        "live_p99_over_floor_p50": percentile(live_ms, 0.99) / floor_p50,
        "live_queries_per_second": len(live_ms) / (sum(live_ms) / 1000),
        "wall_s": elapsed,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **recycling,
        **soaked,
    }
    print(
        f"{results['requests']} requests of ~{results['hits_per_request']} hits: floor p50 "
        f"{results['floor_p50_ms']:.2f} ms, p99 {results['floor_p99_ms']:.2f} ms; scorer p50 "
        f"{results['live_p50_ms']:.1f} ms ({results['live_p50_over_floor_p50']:.1f}x the floor's "
        f"p50), p99 {results['live_p99_ms']:.1f} ms ({results['live_p99_over_floor_p50']:.1f}x); "
        f"{results['live_queries_per_second']:.0f} queries/s; peak RSS "
        f"{results['peak_rss_mb']:.0f} MB"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
