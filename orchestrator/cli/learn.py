"""`duckscore learn`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..core.reporting import module_logger
from .app import cli
from .options import engine_options, judged_recipe_options, out_file_option

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)


@cli.command()
@judged_recipe_options
@click.option(
    "--model",
    "kind",
    type=click.Choice(["trees", "linear"]),
    default="trees",
    show_default=True,
    help="trees: LightGBM's lambdarank (the ltr extra); linear: a pairwise logistic ranker.",
)
@click.option(
    "--features",
    metavar="KIND,KIND",
    help="Feature kinds, each taken for every source where it is one per source (default: all: "
    "present, rrf, norm, raw, minmax, gap, hits, top, list_n, n_sources, candidates).",
)
@click.option("--trees", default=100, show_default=True, type=int, help="Trees (--model trees).")
@click.option(
    "--leaves", default=15, show_default=True, type=int, help="Leaves per tree (--model trees)."
)
@click.option(
    "--learning-rate", default=0.05, show_default=True, type=float, help="(--model trees)."
)
@click.option(
    "--min-data-in-leaf", default=20, show_default=True, type=int, help="(--model trees)."
)
@click.option(
    "--l2", default=1.0, show_default=True, type=float, help="Weight penalty (--model linear)."
)
@click.option(
    "--grid",
    multiple=True,
    metavar="KEY=VALUES",
    help="Also tune these recipe keys on the same folds, as `duckscore tune --grid`, and "
    "compare the learned recipe with the tuned one. Repeatable.",
)
@click.option(
    "--metric", default="ndcg@10", show_default=True, help="The metric reported (as eval names it)."
)
@click.option(
    "--seed",
    default=42,
    show_default=True,
    type=int,
    help="Seed of the folds, the model and the test.",
)
@out_file_option("the learned recipe YAML (its report is written beside it, NAME.report.json)")
@click.option(
    "--version", metavar="NAME", help="recipe_id of the new recipe (default: <base>_ltr_<hash>)."
)
@engine_options
def learn(
    log: Any,
    qrels_path: str,
    recipe: str,
    recipe_overrides: tuple[str, ...],
    kind: str,
    features: str | None,
    trees: int,
    leaves: int,
    learning_rate: float,
    min_data_in_leaf: int,
    l2: float,
    grid: tuple[str, ...],
    metric: str,
    folds: int,
    seed: int,
    out_path: Path,
    version: str | None,
    settings: EngineSettings,
) -> None:
    """Learn a fusion of the log's sources on relevance judgments (fusion.method ltr): a ranking
    model over per-source features, cross-validated by query and written as a recipe whose SQL
    holds the model, for `duckscore fuse --recipe` and every command that takes one.

    \b
    duckscore learn --log logs/retrieval_log.parquet --qrels qrels.parquet --out learned.yaml

    \b
    Prints the held-out metric of the learned recipe against the base recipe (and the recipe
    tuned by --grid on the same folds), with a paired randomization test of each difference;
    writes learned.yaml and its report, learned.report.json. Then fuse with it:
    `duckscore fuse --log … --recipe learned.yaml --out fused`.
    """
    from ..calibrate.learn import learn as run_learn
    from ..calibrate.learn_report import format_summary
    from ..calibrate.ltr_fit import ModelSettings
    from ..fusion.ltr import DEFAULT_FEATURES

    model = ModelSettings(kind, trees, leaves, learning_rate, min_data_in_leaf, l2, seed)
    kinds = DEFAULT_FEATURES if features is None else tuple(features.split(","))
    result = run_learn(
        log,
        qrels_path,
        out_path,
        recipe=recipe,
        recipe_overrides=list(recipe_overrides),
        model=model,
        features=kinds,
        grid=list(grid),
        metric=metric,
        folds=folds,
        version=version,
        settings=settings,
    )
    click.echo(format_summary(result.outcome, result.document["recipe_id"]))
    logger.info(f"done: {result.document['recipe_id']} -> {out_path}, {result.report_path}")
