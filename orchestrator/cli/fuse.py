"""`duckscore fuse`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..core.reporting import module_logger
from .app import cli
from .declared import explain_option
from .options import (
    code_options,
    engine_options,
    log_option,
    out_dir_option,
    recipe_options,
    rerank_scores_option,
)
from .summary import written

if TYPE_CHECKING:
    from ..core.connection import EngineSettings
    from ..fusion.code_plan import CodeTarget

logger = module_logger(__name__)


@cli.command()
@log_option
@out_dir_option()
@recipe_options()
@explain_option
@rerank_scores_option
@click.option(
    "--features/--no-features",
    default=True,
    show_default=True,
    help="Derive parent_features.parquet (what `score` reads). --no-features writes "
    "fused.parquet only: fusion alone, the like-for-like of ranx.",
)
@code_options
@engine_options
def fuse(
    log: Any,
    out_dir: Path,
    recipe: str,
    recipe_overrides: tuple[str, ...],
    explain: bool,
    rerank_scores: str | None,
    features: bool,
    settings: EngineSettings,
    code: CodeTarget | None,
) -> None:
    """Fuse a multi-source retrieval log (seed 003): align, normalise, fuse, rank.

    \b
    Writes to --out:
      fused.parquet            query_id, item_id (target granularity), fused_score, rank,
                               n_sources, contributions (per source: original id, raw and
                               normalised score, rank, weight, contribution), best_provenance;
                               with a recipe's rerank block also fused_rank, rerank_score
                               and score (rank is the re-ranked order)
      parent_features.parquet  the seed-000 inputs of every candidate parent (not with
                               --no-features)
      loc_outputs.jsonl        with --entities: per query, the files, modules and
                               entities found (the code-localization benchmarks' lines)
      manifest.json            recipe_id, sources, fusion, target granularity, SQL hashes, inputs
      sql/                     the rendered SQL
    """
    from ..fusion.pipeline import fuse as run_fuse

    result = run_fuse(
        log, out_dir, recipe, list(recipe_overrides), settings, explain,
        features=features, rerank_scores=rerank_scores, code=code,
    )  # fmt: skip
    logger.info(f"done: {result.fused_rows:,} fused items -> {out_dir}")
    hits, sources = result.manifest["inputs"]["log"]["rows"], len(result.manifest["sources"])
    written(
        f"fused {result.fused_rows:,} items from {hits:,} hits of {sources} sources",
        out_dir,
        result.manifest,
    )
