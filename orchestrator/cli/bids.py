"""`duckscore bids` and `duckscore filter check`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..core.reporting import module_logger
from .app import DuckscoreGroup, cli
from .options import engine_options, out_dir_option, policy_options
from .summary import written

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)

HEADLINE_OUTPUTS = (  # named first in the line a run prints
    "contract.jsonl",
    "evaluations.parquet",
    "criteria.parquet",
    "candidates.parquet",
    "evidence.parquet",
    "gates.json",
)


@cli.command()
@click.option(
    "--input",
    "input_dir",
    required=True,
    type=click.Path(path_type=Path),
    help="Folder of tables: evaluations, criteria, queries, chunks, hits, bid_fields "
    "(required); rerank, soft_scores, claims, claim_citations, synonyms, anchors (optional). "
    "Each <name>.csv|.parquet|.json|.jsonl or a folder <name>/.",
)
@out_dir_option()
@click.option(
    "--rules",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Rules file (redline, required, formula). Default: rules.yaml in --input, if any.",
)
@click.option(
    "--strict-gates",
    is_flag=True,
    help="Exit with status 1 (after writing everything) when an acceptance gate fails.",
)
@click.option(
    "--ragas",
    type=click.Path(dir_okay=True, path_type=Path),
    help="Precomputed RAGAS values per query (query_id, context_precision, context_recall, "
    "faithfulness; each in [0, 1] or empty): decides §12.1's RAGAS gates with a policy that "
    "sets their thresholds (bid_v2). Without it they stay not_computed.",
)
@policy_options("bid_v1", "hitl.min_confidence=0.7")
@engine_options
def bids(
    input_dir: Path,
    out_dir: Path,
    rules: Path | None,
    strict_gates: bool,
    ragas: Path | None,
    policy: str,
    overrides: tuple[str, ...],
    settings: EngineSettings,
) -> None:
    """Score supplier bids (seed 002): tenant-safe retrieval with the SQL whitelist branch, rerank
    with degradation, evidence packing, the rule engine, weighted totals, confidence, HITL
    triggers, citation checks and the acceptance gates.

    \b
    Writes to --out:
      contract.jsonl      one object per (evaluation, supplier): total, confidence, risk level,
                          criteria results, citations, human review and why, recommendation
      evaluations.parquet the same with every flag; criteria.parquet per criterion
      queries.parquet     normalised query, constraints, query type, retrieval mode
      candidates.parquet  merged, filtered, reranked candidates (filter_log.parquet: the dropped)
      evidence.parquet    packing order and budgets; rules.parquet; claims.parquet
      degradation_events.parquet, consistency.parquet, gates.json, manifest.json, sql/
    """
    from ..bids.gates import describe_failures
    from ..bids.pipeline import score_bids

    result = score_bids(input_dir, out_dir, policy, rules, list(overrides), settings, ragas)
    logger.info(f"done: {result.evaluations:,} supplier evaluations -> {out_dir}")
    written(
        f"scored {result.evaluations:,} supplier evaluations",
        out_dir,
        result.manifest,
        first=HEADLINE_OUTPUTS,
    )
    if result.gates_failed:  # with or without --strict-gates: exit 0 must not hide a failed gate
        click.echo(
            f"duckscore: gates failed: {describe_failures(result.gates)} "
            f"(see {out_dir}/gates.json)",
            err=True,
        )
        if strict_gates:
            sys.exit(1)


@cli.group("filter", cls=DuckscoreGroup)
def filter_group() -> None:
    """User-supplied conditions over the whitelisted bid fields (seed 002 §5.3)."""


@filter_group.command("check")
@click.argument("expression")
@click.option(
    "--formula",
    is_flag=True,
    help="Check a rule formula (arithmetic, least/greatest/abs/round, min/max/avg) "
    "instead of a condition.",
)
def filter_check(expression: str, formula: bool) -> None:
    """Validate EXPRESSION without running it: exit 0 with its normalised form, the SQL with
    `$name` placeholders and the bound values; exit 2 with the reason.

    \b
    Fields: supplier_code, qualification_level, registered_capital, bid_price,
            delivery_period, warranty_period.
    Conditions: = <> != < <= > >=, IN (...), NOT IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT,
                + - * / between numbers, parentheses, 'text' and number literals.
    """
    from ..bids.whitelist import parse_condition, parse_formula

    click.echo((parse_formula if formula else parse_condition)(expression).describe())
