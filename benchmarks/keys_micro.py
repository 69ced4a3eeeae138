"""Issue 52 §3, two designs measured before either is built into the templates: a reduced run's
statements (the (query, source, parent) aggregate with an exact RRF part, distinct items and
block types per (query, parent), a per-list rank window, the (query, parent) pivot, a per-query
score window, a sorted Parquet write) over a retrieval log four ways —

- `strings`: the log's string ids, its value checks and unique key as passes of their own before
  the aggregate (what `duckscore run` does);
- `int_keys`: the same with `query_id` and `parent_id` dictionary-encoded once at read (codes
  dense and in the ids' sorted order, so every ORDER BY and tie-break is the same) and decoded at
  the write;
- `query_keys`: `query_id` alone encoded so (what `duckscore run` was tried with:
  docs/performance.md, fourth round);
- `folded_checks`: string ids, the value checks counted inside the first aggregate (per group,
  summed after) instead of their own pass.

Each variant runs in a fresh process, round-robin, `--repeat` times; the table gives the median
CPU seconds (user + system) and the ratio to `strings`. The outputs must be
equal (EXCEPT ALL both ways, row order aside): exact sums make the codes' run the same numbers.

    python benchmarks/keys_micro.py LOG.parquet [--repeat 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

CHECKS = (
    "query_id IS NULL",
    "parent_id IS NULL",
    "item_id IS NULL",
    "source IS NULL",
    "score IS NULL",
    "NOT isfinite(score)",
    "rank IS NULL",
    "rank < 1",
    "query_id = ''",
    "item_id = ''",
)
VARIANTS = ("strings", "int_keys", "query_keys", "folded_checks")


def statements(variant: str, log: str, out: str) -> list[str]:
    """The variant's statements, in order."""
    scan = f"read_parquet('{log}')"
    unique = f"SELECT count(DISTINCT hash(query_id, source, item_id)) <> count(*) FROM {scan}"
    checks = ", ".join(f"count(*) FILTER (WHERE {c})" for c in CHECKS)
    validate = f"SELECT count(*), {checks} FROM {scan}"
    q, p, source, decode = "query_id", "parent_id", scan, ""
    prologue = [validate, unique]
    if variant in ("int_keys", "query_keys"):
        parents = variant == "int_keys"
        q, p, source = "qi", "pi" if parents else "parent_id", "encoded"
        prologue += [
            "CREATE TEMP TABLE qd AS SELECT query_id, CAST(row_number() OVER (ORDER BY query_id) "
            f"AS INTEGER) AS qi FROM (SELECT DISTINCT query_id FROM {scan})",
            *(
                [
                    "CREATE TEMP TABLE pd AS SELECT parent_id, CAST(row_number() OVER (ORDER BY "
                    f"parent_id) AS INTEGER) AS pi FROM (SELECT DISTINCT parent_id FROM {scan})"
                ]
                if parents
                else []
            ),
            f"CREATE TEMP VIEW encoded AS SELECT qd.qi, {'pd.pi, ' if parents else ''}l.* FROM "
            f"{scan} AS l JOIN qd USING (query_id){' JOIN pd USING (parent_id)' if parents else ''}",
        ]
        decode = "JOIN qd ON qd.qi = sc.q" + (" JOIN pd ON pd.pi = sc.p" if parents else "")
    folded = variant == "folded_checks"
    if folded:
        prologue = [unique]
    counted = "".join(f", count(*) FILTER (WHERE {c}) AS bad{k}" for k, c in enumerate(CHECKS))
    body = [
        f"CREATE TEMP TABLE sp AS SELECT {q} AS q, source, {p} AS p, min(rank) AS best_rank, "
        "max(score) AS best_score, CAST(sum(CAST(1.0 / (rank + 60.0) AS DECIMAL(38, 24))) AS "
        f"DOUBLE) AS rrf_part{counted if folded else ''} FROM {source} GROUP BY ALL",
        *(
            ["SELECT " + ", ".join(f"sum(bad{k})" for k in range(len(CHECKS))) + " FROM sp"]
            if folded
            else []
        ),
        f"CREATE TEMP TABLE it AS SELECT q, p, count(*) AS hit_items, count(DISTINCT kind) AS "
        f"coverage FROM (SELECT {q} AS q, {p} AS p, item_id, any_value(block_type) AS kind FROM "
        f"{source} GROUP BY ALL) GROUP BY ALL",
        "CREATE TEMP TABLE pv AS SELECT q, p, CAST(sum(CAST(1.0 / (list_rank + 60.0) AS "
        "DECIMAL(38, 24))) AS DOUBLE) AS fused, max(best_score) FILTER (WHERE source = 'dense') "
        "AS dense_score FROM (SELECT *, row_number() OVER (PARTITION BY q, source ORDER BY "
        "rrf_part DESC, best_rank ASC, p ASC) AS list_rank FROM sp) GROUP BY q, p",
        "CREATE TEMP TABLE sc AS SELECT pv.*, it.hit_items, it.coverage, row_number() OVER "
        "(PARTITION BY pv.q ORDER BY fused DESC, pv.p ASC) AS rank, fused / max(fused) OVER "
        "(PARTITION BY pv.q) AS norm FROM pv JOIN it USING (q, p)",
        f"COPY (SELECT {'qd.query_id' if decode else 'q'} AS query_id, "
        f"{'pd.parent_id' if 'pd' in decode else 'p'} AS parent_id, fused, dense_score, hit_items, "
        f"coverage, sc.rank, norm FROM sc {decode} ORDER BY query_id, sc.rank) TO '{out}'",
    ]
    return prologue + body


def _run(variant: str, log: str, out: str, threads: int) -> None:
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET preserve_insertion_order = false")
    con.execute("SET enable_progress_bar = false")
    for sql in statements(variant, log, out):
        con.execute(sql).fetchall()


def measure(variant: str, log: str, out: str, threads: int) -> float:
    """CPU seconds of one run in a fresh process."""
    return child_cpu_seconds(_run, variant, log, out, threads)


def child_cpu_seconds(target: Callable[..., None], variant: str, *args: Any) -> float:
    """CPU seconds (user + system) of `target(variant, *args)` run in a fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    child = multiprocessing.get_context("spawn").Process(target=target, args=(variant, *args))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise SystemExit(f"{variant}: exit status {child.exitcode}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def round_robin(
    variants: tuple[str, ...], repeat: int, cpu_of: Callable[[str], float]
) -> dict[str, list[float]]:
    """Each variant's CPU seconds over `repeat` rounds, the order rotated each round."""
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    for round_ in range(repeat):
        turn = round_ % len(variants)
        for variant in variants[turn:] + variants[:turn]:
            cpu[variant].append(cpu_of(variant))
    return cpu


def medians(cpu: dict[str, list[float]], base: str) -> dict[str, dict[str, float]]:
    """Each variant's median CPU seconds and its ratio to `base`'s."""
    of_base = statistics.median(cpu[base])
    return {
        v: {"cpu_s": statistics.median(c), "ratio": statistics.median(c) / of_base}
        for v, c in cpu.items()
    }


def print_table(
    cpu: dict[str, list[float]],
    summary: dict[str, dict[str, float]],
    base: str,
    last: str,
    last_of: Callable[[str], str],
) -> None:
    """The variants as a Markdown table: median, each run, the ratio to `base`, and `last`."""
    print(f"| variant | CPU s (median) | runs | / {base} | {last} |")
    print("|---|---:|---|---:|---|")
    for v, runs in cpu.items():
        each = ", ".join(f"{c:.2f}" for c in runs)
        print(f"| {v} | {summary[v]['cpu_s']:.2f} | {each} | {summary[v]['ratio']:.2f} | "
              f"{last_of(v)} |")  # fmt: skip


def equal(a: str, b: str) -> bool:
    both = f"(SELECT * FROM '{a}' EXCEPT ALL SELECT * FROM '{b}')"
    back = f"(SELECT * FROM '{b}' EXCEPT ALL SELECT * FROM '{a}')"
    row = duckdb.sql(f"SELECT (SELECT count(*) FROM {both}) + (SELECT count(*) FROM {back})")
    return row.fetchall() == [(0,)]


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        outs = {v: str(Path(work) / f"{v}.parquet") for v in VARIANTS}
        cpu = round_robin(
            VARIANTS, args.repeat, lambda v: measure(v, args.log, outs[v], args.threads)
        )
        same = {v: equal(outs["strings"], outs[v]) for v in VARIANTS[1:]}
    summary = medians(cpu, "strings")
    print_table(cpu, summary, "strings", "output equal", lambda v: str(same.get(v, "—")))
    if not all(same.values()):
        sys.exit("the variants' outputs differ")
    return summary


if __name__ == "__main__":
    main()
