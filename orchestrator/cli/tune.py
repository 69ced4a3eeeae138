"""`duckscore tune`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..core.reporting import module_logger
from .app import cli
from .options import OutputPath, engine_options, judged_recipe_options, out_file_option

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)


@cli.command()
@judged_recipe_options
@click.option(
    "--grid",
    "grid",
    multiple=True,
    required=True,
    metavar="KEY=VALUES",
    help="A recipe key (as --set-recipe names it) and its values: a,b,c or the inclusive "
    "range start:stop:step. Repeatable: every combination is a grid point.",
)
@click.option(
    "--metric",
    default="ndcg@10",
    show_default=True,
    help="The metric to maximise (as eval names it).",
)
@click.option(
    "--seed", default=42, show_default=True, type=int, help="Seed of the folds and the test."
)
@out_file_option("the tuned recipe YAML")
@click.option(
    "--version", metavar="NAME", help="recipe_id of the new recipe (default: <base>_tuned)."
)
@click.option(
    "--report",
    "report_dir",
    type=OutputPath(file_okay=False, path_type=Path),
    help="Also write grid.csv (metric per grid point and fold) and folds.csv to this folder.",
)
@engine_options
def tune(
    log: Any,
    qrels_path: str,
    recipe: str,
    recipe_overrides: tuple[str, ...],
    grid: tuple[str, ...],
    metric: str,
    folds: int,
    seed: int,
    out_path: Path,
    version: str | None,
    report_dir: Path | None,
    settings: EngineSettings,
) -> None:
    """Tune a fusion recipe on relevance judgments: every grid point of --recipe evaluated in
    one DuckDB query, chosen by cross-validation, written as a recipe for `duckscore fuse`.

    \b
    Prints the chosen values, the cross-validated metric against the base recipe's, and a
    paired randomization test of the difference.
    """
    from ..calibrate.tune import format_summary
    from ..calibrate.tune import tune as run_tune

    result = run_tune(
        log,
        qrels_path,
        list(grid),
        out_path,
        recipe=recipe,
        recipe_overrides=list(recipe_overrides),
        metric=metric,
        folds=folds,
        seed=seed,
        version=version,
        report_dir=report_dir,
        settings=settings,
    )
    click.echo(format_summary(result))
    logger.info(f"done: {result.document['recipe_id']} -> {out_path}")
