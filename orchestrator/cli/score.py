"""`duckscore score`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..common.defaults import DEFAULT_POLICY
from ..core.reporting import module_logger
from .app import cli
from .declared import allow_recipe_mismatch_option, top_n_option
from .options import (
    engine_options,
    out_dir_option,
    policy_options,
    queries_option,
)
from .summary import decided, written

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)


@cli.command()
@click.option(
    "--features",
    required=True,
    metavar="PATH",
    help="parent_features table: Parquet/CSV/JSON file, glob, or (hive) folder.",
)
@out_dir_option()
@queries_option
@top_n_option
@policy_options(DEFAULT_POLICY, "risk_flags.single_spike.max_score_norm_at_least=0.9")
@allow_recipe_mismatch_option
@engine_options
def score(
    features: str,
    out_dir: Path,
    queries: str | None,
    top_n: int,
    policy: str,
    overrides: tuple[str, ...],
    allow_recipe_mismatch: bool,
    settings: EngineSettings,
) -> None:
    """Score candidate parents (seed 000): OverallScore, confidence, risk flags, HITL, web fallback.

    \b
    Writes to --out:
      parents.parquet   one row per (query_id, parent_id): normalised inputs, sub-scores,
                        overall_score, rank, risk flags
      queries.parquet   one row per query: best parent, confidence level, top2_ratio,
                        need_hitl, web_fallback
      contract.jsonl    one JSON object per query (seed 000 §10)
      manifest.json     policy version and parameters, SQL hashes, input fingerprints
      sql/              the rendered SQL that produced them
    """
    from ..core.policy import load_policy
    from ..fusion.policy_recipe import check_features_recipe
    from ..scoring.pipeline import score as run_score
    from ..scoring.policy import SCORE_POLICY

    loaded = load_policy(SCORE_POLICY, policy, list(overrides))
    check_features_recipe(loaded, features, allow_recipe_mismatch)
    result = run_score(features, out_dir, policy, list(overrides), queries, top_n, settings)
    logger.info(f"done: {result.queries:,} queries, {result.parents:,} parents -> {out_dir}")
    written(
        f"scored {result.parents:,} parents of {result.queries:,} queries", out_dir, result.manifest
    )
    decided(result.decisions)
