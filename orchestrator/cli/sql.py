"""`duckscore sql score|fuse|answers`: the rendered SQL, to read, to paste into DuckDB, or
transpiled for another engine."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import click

from ..common.defaults import DEFAULT_POLICY
from .app import DuckscoreGroup, cli
from .options import (
    dialect_option,
    pack_options,
    policy_options,
    recipe_options,
    sources_option,
    stage_option,
)

if TYPE_CHECKING:
    from ..core.render import RenderedSQL


@cli.group(cls=DuckscoreGroup)
def sql() -> None:
    """Print the rendered SQL of a capability, to read or to paste into DuckDB — or, with
    --dialect, transpiled for Spark, PostgreSQL, BigQuery, Snowflake or Trino; `sql macros`
    prints the macro pack."""


def _echo(rendered: RenderedSQL, dialect: str) -> None:
    from ..engines.dialects import to_dialect

    click.echo(rendered.text if dialect == "duckdb" else to_dialect(rendered, dialect), nl=False)


def _score_stages() -> Sequence[str]:
    from ..scoring.stages import STAGES

    return STAGES


def _fuse_stages() -> Sequence[str]:
    from ..fusion.stages import LTR_STAGES, STAGES

    return (*STAGES, *LTR_STAGES)


def _answer_stages() -> Sequence[str]:
    from ..answering.stages import STAGES

    return STAGES


@sql.command("score")
@stage_option(_score_stages, default="contract")
@click.option("--top-n", default=5, show_default=True, type=click.IntRange(min=1))
@policy_options(DEFAULT_POLICY, "risk_flags.single_spike.max_score_norm_at_least=0.9")
@dialect_option
def sql_score(
    stage: str, top_n: int, policy: str, overrides: tuple[str, ...], dialect: str
) -> None:
    """The score SQL over a table or view named parent_features.

    \b
    duckscore sql score > score.sql
    duckdb -c "CREATE VIEW parent_features AS FROM 'features.parquet'; $(cat score.sql)"
    """
    from ..scoring.policy_view import load_score_policy
    from ..scoring.stages import render_stage

    _echo(render_stage(load_score_policy(policy, list(overrides)), stage, top_n), dialect)


@sql.command("fuse")
@stage_option(_fuse_stages, default="fused_items")
@sources_option("the log holds")
@click.option(
    "--no-rank", is_flag=True, help="The log has no rank column (ranks derived from scores)."
)
@recipe_options()
@dialect_option
def sql_fuse(
    stage: str,
    sources: list[str],
    no_rank: bool,
    recipe: str,
    recipe_overrides: tuple[str, ...],
    dialect: str,
) -> None:
    """The fusion SQL over a table or view named retrieval_log."""
    from ..core.errors import OptionError
    from ..fusion.recipe import load_recipe, plan
    from ..fusion.stages import FUSED_ITEMS, LTR_STAGES, fuse_graph

    fuse_plan = plan(load_recipe(recipe, list(recipe_overrides)), sources, has_rank=not no_rank)
    if stage in LTR_STAGES and fuse_plan.recipe.ltr is None:
        raise OptionError(
            f"--stage {stage}: a stage of a learned recipe (fusion.method ltr, duckscore learn); "
            f"{fuse_plan.recipe.version} fuses by {fuse_plan.recipe.fusion.method}"
        )
    _echo(fuse_graph(fuse_plan).render(FUSED_ITEMS, final=stage, ordered=True), dialect)


@sql.command("answers")
@stage_option(_answer_stages, default="scored_answers")
@click.option("--events", "with_events", is_flag=True, help="Read a table named events too.")
@click.option(
    "--logprobs", is_flag=True, help="Read a table named logprobs too (answer_v2's policies)."
)
@click.option(
    "--feedback", is_flag=True, help="Read a table named feedback too (answer_v2's policies)."
)
@policy_options("answer_v1", "levels.high_at_least=80")
@dialect_option
def sql_answers(
    stage: str,
    with_events: bool,
    logprobs: bool,
    feedback: bool,
    policy: str,
    overrides: tuple[str, ...],
    dialect: str,
) -> None:
    """The answers SQL over tables or views named answers, citations, chunks (and events).

    \b
    duckscore sql answers > answers.sql
    duckdb -c "CREATE VIEW answers AS FROM 'answers.parquet'; CREATE VIEW citations AS ...; $(cat answers.sql)"
    """
    from ..answering.policy import load_answer_policy
    from ..answering.stages import render_stage

    loaded = load_answer_policy(policy, list(overrides))
    rendered = render_stage(loaded, stage, with_events, logprobs=logprobs, feedback=feedback)
    _echo(rendered, dialect)


@sql.command("macros")
@pack_options
def sql_macros(script: str) -> None:
    """The macro pack: a DuckDB script of CREATE OR REPLACE MACRO statements, the building blocks
    with the policies' values as their defaults (ds_rrf(rank, k := 60) …).

    \b
    duckscore sql macros > duckscore.sql
    duckdb -c ".read duckscore.sql" -c "SELECT ds_rrf(1), ds_policy()"
    """
    click.echo(script, nl=False)
