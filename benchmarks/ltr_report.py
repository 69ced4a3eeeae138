"""Issue 48 §4: learned fusion (`duckscore learn`) against RRF and a tuned weighted RRF, held
out by query, on any retrieval log with judgments (SciFact and CISI bundled; the code collection
of issue 49 is one more --collection).

For each collection, both models (LightGBM lambdarank trees, the pairwise logistic linear model)
are learnt with the defaults of `duckscore learn` (every feature kind, 5 folds, seed 42) and the
same --grid: RRF's k times the weight of every source but the last (by name), each tuned on the
same folds as the models. Every figure is a mean over the judged queries of nDCG@10 held out
(each query scored by a recipe fitted or chosen without it), computed by the recipes' SQL; the
p-values are the paired two-sided randomization test of `duckscore eval --baseline` (10,000
permutations, seed 42).

    python benchmarks/ltr_report.py \\
        --collection scifact=fixtures/scifact/retrieval_log.parquet,fixtures/scifact/qrels.parquet \\
        --collection cisi=fixtures/cisi/retrieval_log.parquet,fixtures/cisi/qrels.parquet \\
        --json benchmarks/results/ltr.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb

from duckscore.calibrate.learn import learn
from duckscore.calibrate.ltr_fit import ModelSettings
from duckscore.core.version import __version__

KS = "10,20,60"
WEIGHTS = "0.5,1,2"
MODELS = ("trees", "linear")


def weight_grid(log: str) -> list[str]:
    """RRF's k, and the weight of every source of the log but the last (the last stays 1: only
    the weights' ratios change an RRF ranking)."""
    sources = [
        row[0]
        for row in duckdb.execute(
            "SELECT DISTINCT source FROM read_parquet(?) ORDER BY source", [log]
        ).fetchall()
    ]
    return [f"fusion.k={KS}", *(f"sources.{s}.weight={WEIGHTS}" for s in sources[:-1])]


def measure(name: str, log: str, qrels: str, models: tuple[str, ...] = MODELS) -> dict[str, Any]:
    grid = weight_grid(log)
    found: dict[str, Any] = {"collection": name, "log": log, "qrels": qrels, "grid": grid}
    with tempfile.TemporaryDirectory() as folder:
        for kind in models:
            result = learn(
                log, qrels, Path(folder) / f"{kind}.yaml", model=ModelSettings(kind=kind), grid=grid
            )
            report = result.report.as_record()
            held = report["held_out"]
            found |= {"queries": report["queries"], "rrf": held["base"], "tuned": held["tuned"]}
            found[kind] = {
                "recipe_id": result.document["recipe_id"],
                "held_out": held["learned"],
                "against_rrf": held["against_base"],
                "against_tuned": held["against_tuned"],
                "in_sample": report["in_sample"]["learned"],
                "per_fold": [
                    {k: fold[k] for k in ("fold", "test_queries", "learned", "base", "tuned")}
                    for fold in report["per_fold"]
                ],
                "top_features": dict(
                    sorted(report["importances"].items(), key=lambda item: -item[1])[:5]
                ),
                "settings": report["settings"],
            }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--collection",
        action="append",
        required=True,
        metavar="NAME=LOG,QRELS",
        help="a retrieval log and its judgments; repeatable",
    )
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    collections = []
    for item in args.collection:
        name, _, paths = item.partition("=")
        log, _, qrels = paths.partition(",")
        collections.append(measure(name, log, qrels))
        row = collections[-1]
        print(
            f"{name}: rrf {row['rrf']:.4f}, tuned {row['tuned']:.4f}, "
            + ", ".join(f"{kind} {row[kind]['held_out']:.4f}" for kind in MODELS)
        )
    import lightgbm

    document = {
        "command": "python "
        + " ".join(shlex.quote(a) for a in ["benchmarks/ltr_report.py", *sys.argv[1:]]),
        "measured_on": dt.date.today().isoformat(),
        "duckscore_version": __version__,
        "lightgbm_version": lightgbm.__version__,
        "metric": "ndcg@10",
        "folds": 5,
        "seed": 42,
        "test": "paired two-sided randomization, 10000 permutations, seed 42",
        "collections": collections,
    }
    if args.json:
        args.json.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
