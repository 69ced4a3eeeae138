"""`duckscore dbt package`: duckscore as a dbt package (docs/dbt.md)."""

from __future__ import annotations

from pathlib import Path

from ..common.defaults import DEFAULT_POLICY
from .app import DuckscoreGroup, cli
from .options import (
    allow_recipe_mismatch_option,
    out_dir_option,
    policy_options,
    recipe_options,
    sources_option,
)
from .summary import done


@cli.group(name="dbt", cls=DuckscoreGroup)
def dbt_group() -> None:
    """duckscore in dbt: `duckscore run`'s SQL as the models of a dbt package over a source of
    your project, the building blocks as dbt macros (docs/dbt.md)."""


@dbt_group.command("package")
@out_dir_option()
@sources_option("the log holds")
@recipe_options(None)
@allow_recipe_mismatch_option
@policy_options(DEFAULT_POLICY, "risk_flags.single_spike.max_score_norm_at_least=0.9")
def dbt_package(
    out_dir: Path,
    sources: list[str],
    recipe: str | None,
    recipe_overrides: tuple[str, ...],
    allow_recipe_mismatch: bool,
    policy: str,
    overrides: tuple[str, ...],
) -> None:
    """Write a dbt package (its own dbt_project.yml): models for fused items, parent features,
    parents, the contract and queries over the source named by the vars duckscore_source_name
    and duckscore_source_table, with the policy and recipe versions in their meta; dbt tests;
    the scalar macros as dbt macros (duckscore_rrf, duckscore_clamp, …). For dbt-duckdb.

    \b
    duckscore dbt package --out dbt_packages/duckscore
    dbt build --vars '{duckscore_source_name: logs, duckscore_source_table: retrieval_log}'
    """
    from ..dbt.package import build_package, write_package

    package = build_package(
        policy, overrides, recipe, recipe_overrides, allow_recipe_mismatch, sources
    )
    write_package(out_dir, package.files)
    done(f"wrote the dbt package duckscore into {out_dir}/ ({package.summary()})")
