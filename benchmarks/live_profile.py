"""Issue 52 §2: where a warm live call's time goes, and what sharing a statement saves.

On the first --queries SciFact queries, one after another on one `duckscore.scorer()`: the warm
calls' p50; DuckDB's own profile of the contract statement on one query's hits
(`profiling_mode = 'detailed'`: binding, the optimisers and the three slowest, the physical plan,
the execution's CPU and the operators); and the p50 of --batch queries scored in one call. It
reads the warm lane a call uses (orchestrator/api/lanes.py) to profile its statement alone.

    python benchmarks/live_profile.py [--queries 150] [--batch 64] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
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


def p50_ms(scorer: Scorer, calls: list[pa.Table]) -> float:
    times = []
    for hits in calls:
        started = time.perf_counter()
        scorer.score(hits)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def contract_profile(scorer: Scorer, hits: pa.Table) -> dict[str, Any]:
    """DuckDB's profile of the calling thread's contract statement over `hits`, executed as a
    warm call executes it (its prepared statement, the hits handed to the lane's source)."""
    thread = scorer._lanes._threads[threading.get_ident()]
    lane = next(iter(thread.lanes.values()))
    statement = next(iter(lane.views.values()))
    cursor = lane.cursor
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "profile.json"
        with lane.source.holding(hits):
            cursor.execute("SET enable_profiling = 'json'")
            cursor.execute("SET profiling_mode = 'detailed'")
            cursor.execute(f"SET profiling_output = '{out}'")
            cursor.execute(f"EXECUTE {statement}").fetchall()
            cursor.execute("RESET enable_profiling")
        profile = json.loads(out.read_text(encoding="utf-8"))
    optimisers = {k: v * 1000 for k, v in profile["optimizer"].items() if k != "total_time"}
    return {
        "total_ms": profile["query"]["total_time"] * 1000,
        "binding_ms": profile["planner"]["binding_time"] * 1000,
        "planner_ms": profile["planner"]["total_time"] * 1000,
        "optimizer_ms": profile["optimizer"]["total_time"] * 1000,
        "slowest_optimizers_ms": dict(sorted(optimisers.items(), key=lambda kv: -kv[1])[:3]),
        "physical_plan_ms": profile["physical_planner"]["total_time"] * 1000,
        "execution_cpu_ms": profile["query"]["cpu_time"] * 1000,
        "operators": sum(_count(node) for node in profile["operator"]),
    }


def _count(node: dict[str, Any]) -> int:
    return 1 + sum(_count(child) for child in node.get("children", []))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=150, help="the first N SciFact queries")
    parser.add_argument("--batch", type=int, default=64, help="queries scored in one call")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    log = duckdb.sql(
        f"FROM read_parquet('{fixtures_dir() / 'scifact' / 'retrieval_log.parquet'}')"
    ).to_arrow_table()
    ids = sorted(set(log["query_id"].to_pylist()))[: args.queries]
    one = [log.filter(pc.equal(log["query_id"], q)) for q in ids]
    batches = [
        log.filter(pc.is_in(log["query_id"], pa.array(ids[i : i + args.batch])))
        for i in range(0, len(ids) - args.batch + 1, args.batch)
    ] or [log.filter(pc.is_in(log["query_id"], pa.array(ids)))]
    with ds.scorer() as scorer:
        scorer.score(one[0])  # the checked path, which opens the lane
        single = p50_ms(scorer, one)
        profile = contract_profile(scorer, one[0])
        batched = p50_ms(scorer, batches * 3)
    summary: dict[str, Any] = {
        "queries": len(one),
        "call_p50_ms": single,
        "contract": profile,
        "batch": {"queries": len(pc.unique(batches[0]["query_id"])), "p50_ms": batched},
    }
    print(f"a warm call: p50 {single:.1f} ms on {len(one)} queries")
    print(
        "its contract statement (DuckDB's profile): "
        + ", ".join(f"{k} {v:.1f}" for k, v in profile.items() if isinstance(v, float))
        + f", {profile['operators']} operators; slowest optimisers "
        + ", ".join(f"{k} {v:.2f} ms" for k, v in profile["slowest_optimizers_ms"].items())
    )
    per = batched / summary["batch"]["queries"]
    print(
        f"{summary['batch']['queries']} queries in one call: p50 {batched:.1f} ms, {per:.2f} ms a query"
    )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


if __name__ == "__main__":
    main()
