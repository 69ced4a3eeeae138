"""Issue 49 §5: how well fusion localizes code on a code-localization collection (the bundled
fixtures/code/: 200 commits of pallets/click), at the benchmarks' three levels.

Each configuration fuses the whole log through the collection's entities table (`ds.fuse(…,
entities=…)`, as `duckscore fuse --entities` does), and its loc_outputs.jsonl is judged by
`duckscore eval --loc`'s evaluation against the gold, on the held-out half and on every
instance. The configurations: each source alone (code_rrf_v1 with only that source declared
and `discover_sources: false`), RRF (code_rrf_v1), seed 003 §12.1's default (hybrid_v1, the
max-decay aligner with RRF k = 60, at file level) and a recipe tuned by `duckscore tune` on the
tuning half only (file-level nDCG@5 against the gold files; RRF's k, the block sources' weights
and the aligner).

The split: the instances sorted by id, the 1st, 3rd, 5th … tune, the 2nd, 4th … are held out.

    python benchmarks/code_loc_report.py --json benchmarks/results/code_loc.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

import duckscore as ds
from duckscore.calibrate.tune import tune
from duckscore.core.version import __version__
from duckscore.metrics.localization import evaluate_localization

COLLECTION = Path("fixtures/code")
# the benchmarks' headline cutoffs (issue 49): file Acc@1/3/5, module and function Acc@5/10
COLUMNS = {"file": (1, 3, 5), "module": (5, 10), "function": (5, 10)}
SPLIT_RULE = "instances sorted by id: the 1st, 3rd, 5th … tune, the 2nd, 4th … are held out"
TUNE_METRIC = "ndcg@5"
TUNE_GRID = (
    "fusion.k=1,5,20,60",
    "sources.bm25.weight=0.5,1,2",
    "sources.tfidf.weight=0.5,1,2",
    "aligner.method=max,max_decay",
)
TUNED_VERSION = "code_rrf_tuned"
LOG_ROWS = "SELECT * FROM read_parquet($table) WHERE query_id IN (SELECT unnest($keep))"
GOLD_ROWS = "SELECT * FROM read_parquet($table) WHERE instance_id IN (SELECT unnest($keep))"
GOLD_FILES = (  # the judgments tune reads: the gold files, relevant
    "SELECT instance_id AS query_id, location AS doc_id, 1 AS relevance FROM read_parquet($table) "
    "WHERE level = 'file' AND instance_id IN (SELECT unnest($keep))"
)
# LocAgent: Graph-Guided LLM Agents for Code Localization (Chen et al., ACL 2025, arXiv
# 2503.09089): its BM25 baseline on SWE-Bench Lite, from the paper's table of baselines
PUBLISHED = {
    "source": "LocAgent: Graph-Guided LLM Agents for Code Localization (Chen et al., ACL 2025, "
    "arXiv 2503.09089), the BM25 row of its comparison of baselines on SWE-Bench Lite",
    "method": "BM25",
    "benchmark": "SWE-Bench Lite",
    "acc": {
        "file": {"Acc@1": 0.3869, "Acc@3": 0.5182, "Acc@5": 0.6168},
        "module": {"Acc@5": 0.4526, "Acc@10": 0.5292},
        "function": {"Acc@5": 0.3175, "Acc@10": 0.3686},
    },
}


@dataclass(frozen=True)
class Config:
    name: str
    recipe: str
    set_recipe: tuple[str, ...] = ()


@dataclass(frozen=True)
class Collection:
    log: Path
    entities: Path
    gold: Path

    @classmethod
    def at(cls, folder: Path) -> Collection:
        return cls(
            folder / "retrieval_log.parquet", folder / "entities.parquet", folder / "gold.parquet"
        )


def split(instances: list[str]) -> tuple[list[str], list[str]]:
    """The instances sorted by id: every other one tunes (the first, the third …), the rest
    are held out."""
    ordered = sorted(instances)
    return ordered[0::2], ordered[1::2]


def sources(log: Path) -> list[str]:
    return [
        row[0]
        for row in duckdb.execute(
            "SELECT DISTINCT source FROM read_parquet(?) ORDER BY source", [str(log)]
        ).fetchall()
    ]


def configurations(log_sources: list[str], tuned: Path) -> list[Config]:
    alone = [
        Config(f"{s} alone", "code_rrf_v1", ("discover_sources=false", f"sources.{s}.weight=1"))
        for s in log_sources
    ]
    return [
        *alone,
        Config("RRF (code_rrf_v1)", "code_rrf_v1"),
        Config("§12.1 default (hybrid_v1)", "hybrid_v1", ("target_granularity=file",)),
        Config("tuned on the tuning half", str(tuned)),
    ]


def write_subset(query: str, table: Path, keep: list[str], out: Path) -> None:
    """The rows of `query` over $table whose key is in $keep, written to `out` (Parquet)."""
    duckdb.sql(query, params={"table": str(table), "keep": keep}).write_parquet(str(out))


def tune_on(collection: Collection, tuning: list[str], work: Path) -> dict[str, Any]:
    """`duckscore tune` on the tuning half alone: its hits, and its gold files as judgments."""
    log, qrels = work / "tuning_log.parquet", work / "tuning_qrels.parquet"
    write_subset(LOG_ROWS, collection.log, tuning, log)
    write_subset(GOLD_FILES, collection.gold, tuning, qrels)
    grid = list(TUNE_GRID)
    result = tune(
        log,
        qrels,
        grid,
        work / "tuned.yaml",
        recipe="code_rrf_v1",
        metric=TUNE_METRIC,
        version=TUNED_VERSION,
    )
    chosen = result.points[result.selection.best]
    return {
        "grid": grid,
        "metric": f"file {TUNE_METRIC}",
        "instances": len(tuning),
        "chosen": chosen,
        "tuning_half": {
            "tuned": result.selection.means[result.selection.best],
            "rrf": result.base_mean,
        },
    }


def accuracies(loc: Path, gold: Path) -> dict[str, dict[str, float]]:
    found = evaluate_localization(
        loc, gold, k=[f"{lv}={','.join(map(str, ks))}" for lv, ks in COLUMNS.items()]
    )
    return {
        level: {f"Acc@{k}": found.means[level][f"Acc@{k}"] for k in ks}
        for level, ks in COLUMNS.items()
    }


def judged(config: Config, collection: Collection, out: Path, held_gold: Path) -> dict[str, Any]:
    """`config` fused through the entities into `out`, its loc_outputs.jsonl judged on the
    held-out half and on every instance."""
    fused = ds.fuse(
        str(collection.log), config.recipe, config.set_recipe,
        explain=False, features=False, out=out, entities=str(collection.entities),
    )  # fmt: skip
    loc = out / "loc_outputs.jsonl"
    return {
        "name": config.name,
        "recipe": fused.recipe.policy.version,
        "set_recipe": list(config.set_recipe),
        "held_out": accuracies(loc, held_gold),
        "all": accuracies(loc, collection.gold),
    }


def measure(folder: Path = COLLECTION) -> dict[str, Any]:
    collection = Collection.at(folder)
    instances = [
        row[0]
        for row in duckdb.execute(
            "SELECT DISTINCT instance_id FROM read_parquet(?)", [str(collection.gold)]
        ).fetchall()
    ]
    tuning, held_out = split(instances)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        held_gold = work / "held_out_gold.parquet"
        write_subset(GOLD_ROWS, collection.gold, held_out, held_gold)
        tuned = tune_on(collection, tuning, work)
        configs = configurations(sources(collection.log), work / "tuned.yaml")
        rows = [
            judged(config, collection, work / f"run{n}", held_gold)
            for n, config in enumerate(configs)
        ]
    return {
        "collection": str(folder),
        "instances": len(instances),
        "split": {"rule": SPLIT_RULE, "tuning": len(tuning), "held_out": len(held_out)},
        "tuning": tuned,
        "configs": rows,
        "published": PUBLISHED,
    }


def table(document: dict[str, Any]) -> str:
    """The markdown table of docs/code.md: Acc@k in percent, held out and on every instance."""
    heads = [f"{level} Acc@{k}" for level, ks in COLUMNS.items() for k in ks]
    half, every = document["split"]["held_out"], document["instances"]
    lines = [
        f"| configuration | instances | {' | '.join(heads)} |",
        "|---|---|" + "---|" * len(heads),
    ]

    def row(name: str, count: str, acc: dict[str, dict[str, float]]) -> str:
        cells = [f"{100 * acc[level][f'Acc@{k}']:.1f}" for level, ks in COLUMNS.items() for k in ks]
        return f"| {name} | {count} | {' | '.join(cells)} |"

    for config in document["configs"]:
        lines.append(row(config["name"], f"held out {half}", config["held_out"]))
        lines.append(row("", f"all {every}", config["all"]))
    published = document["published"]
    lines.append(
        row(f"{published['method']}, {published['benchmark']} (published)", "–", published["acc"])
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", type=Path, default=COLLECTION, help="a collection folder")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    document = measure(args.collection)
    print(table(document))
    if args.json:
        record = {
            "command": "python "
            + " ".join(shlex.quote(a) for a in ["benchmarks/code_loc_report.py", *sys.argv[1:]]),
            "measured_on": dt.date.today().isoformat(),
            "duckscore_version": __version__,
            **document,
        }
        args.json.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
