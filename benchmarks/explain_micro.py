"""Issue 52 §3, explanations as their own output, measured before it is built: what the nested
explanations of fused.parquet cost against the same facts as a flat table of their own. The
fused items of the packaged fused.sql (rendered for `--recipe`), written sorted as `run` writes
them, three ways —

- `nested`: with each item's `contributions` (a list of one struct per source it came from) and
  `best_provenance` (what `duckscore run` writes);
- `none`: both NULL (`run --no-explain`);
- `flat`: `none`, then a second statement writing the present rows of the template's
  `per_source` stage — one row per fused item and source: the source's best hit, its raw and
  normalised scores, rank, weight and contribution — as `explanations.parquet`, sorted by
  (query_id, item_id, source);
- `flat_kept`: `per_source` kept as a temporary table once, the fused items (without
  explanations) read from it — the template's CTE replaced by the table, with sqlglot — and the
  explanations written from it as in `flat`.

Each variant runs in a fresh process, round-robin, `--repeat` times; the table gives the median
CPU seconds (user + system) and the ratio to `nested`. The flat rows must be the nested
contributions unnested, field for field (EXCEPT ALL both ways), and the fused items the same
in all three but for the explanations.

    python benchmarks/explain_micro.py LOG.parquet [--recipe canonical_rrf] [--repeat 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import duckdb

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # run from any folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.keys_micro import child_cpu_seconds, medians, print_table, round_robin

VARIANTS = ("nested", "none", "flat", "flat_kept")
FIELDS = "source, original_id, raw_score, norm_score, rank, weight, contribution"


def statements(variant: str, log: str, recipe_name: str, out: Path) -> list[str]:
    from duckscore.fusion.recipe import load_recipe, plan
    from duckscore.fusion.stages import render_fused

    sources = [row[0] for row in duckdb.sql(f"SELECT DISTINCT source FROM '{log}'").fetchall()]
    fuse_plan = plan(load_recipe(recipe_name, []), sorted(sources), True, has_snippet=True)
    fused = render_fused(fuse_plan, "fused_items", explain=variant == "nested", ordered=True).text
    per_source = render_fused(fuse_plan, "per_source", explain=True, ordered=False).text
    made = [
        f"CREATE VIEW retrieval_log AS SELECT *, CAST(NULL AS VARCHAR) AS snippet, "
        f"CAST(NULL AS VARCHAR) AS query_text FROM '{log}'"
    ]
    if variant == "flat_kept":
        made.append(f"CREATE TEMP TABLE per_source_kept AS {per_source}")
        fused, per_source = _reading_kept(fused), "SELECT * FROM per_source_kept"
    made.append(f"COPY ({fused}) TO '{out / 'fused.parquet'}'")
    if variant.startswith("flat"):
        made.append(
            f"COPY (SELECT query_id, target_id AS item_id, source, best_item_id AS original_id, "
            f"best_item_score AS original_score, best_snippet AS snippet, raw_score, norm_score, "
            f"list_rank AS rank, weight, contribution FROM ({per_source}) AS per_source "
            f"WHERE present ORDER BY query_id, item_id, source) TO '{out / 'explanations.parquet'}'"
        )
    return made


def _reading_kept(sql: str) -> str:
    """`sql` with its per_source CTE reading the kept table (and the CTEs only it read pruned
    by DuckDB's optimiser, as unused)."""
    import sqlglot

    tree = sqlglot.parse_one(sql, read="duckdb")
    (cte,) = [c for c in tree.find_all(sqlglot.exp.CTE) if c.alias == "per_source"]
    cte.set("this", sqlglot.parse_one("SELECT * FROM per_source_kept", read="duckdb"))
    return tree.sql(dialect="duckdb")


def _run(variant: str, log: str, recipe_name: str, out: Path, threads: int) -> None:
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute("SET enable_progress_bar = false")
    for sql in statements(variant, log, recipe_name, out):
        con.execute(sql)


def same_facts(outs: dict[str, Path]) -> dict[str, bool]:
    """The flat rows are the nested contributions unnested; the items equal but for them."""
    nested = outs["nested"] / "fused.parquet"
    unnested = (
        f"SELECT query_id, item_id, {', '.join(f'c.{f}' for f in FIELDS.split(', '))} FROM "
        f"(SELECT query_id, item_id, unnest(contributions) AS c FROM '{nested}')"
    )
    flat = f"SELECT query_id, item_id, {FIELDS} FROM '{outs['flat'] / 'explanations.parquet'}'"
    items = "SELECT * EXCLUDE (contributions, best_provenance) FROM '{}'"
    return {
        "flat rows = nested contributions": _equal(unnested, flat),
        **{
            f"{v} items = nested items": _equal(
                items.format(nested), items.format(outs[v] / "fused.parquet")
            )
            for v in VARIANTS[1:]
        },
    }


def _equal(a: str, b: str) -> bool:
    ((differing, rows),) = duckdb.sql(
        f"SELECT (SELECT count(*) FROM ({a} EXCEPT ALL {b})) + "
        f"(SELECT count(*) FROM ({b} EXCEPT ALL {a})), (SELECT count(*) FROM ({a}))"
    ).fetchall()
    return bool(differing == 0 and rows > 0)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log")
    parser.add_argument("--recipe", default="canonical_rrf")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        outs = {v: Path(work) / v for v in VARIANTS}
        for out in outs.values():
            out.mkdir()
        cpu = round_robin(
            VARIANTS,
            args.repeat,
            lambda v: child_cpu_seconds(_run, v, args.log, args.recipe, outs[v], args.threads),
        )
        checks = same_facts(outs)
        sizes = {v: sum(f.stat().st_size for f in outs[v].iterdir()) for v in VARIANTS}
    summary = medians(cpu, "nested")
    for v in VARIANTS:
        summary[v]["bytes"] = sizes[v]
    print(f"{args.log}, recipe {args.recipe}, {args.threads} threads")
    print_table(cpu, summary, "nested", "output MB", lambda v: f"{sizes[v] / 1e6:.1f}")
    for name, ok in checks.items():
        print(f"{name}: {ok}")
    if not all(checks.values()):
        sys.exit("the variants' outputs differ")
    return summary


if __name__ == "__main__":
    main()
