"""`duckscore dbt package`: duckscore as a dbt package (docs/dbt.md)."""

from __future__ import annotations

from pathlib import Path

import click

from ..common.defaults import DEFAULT_POLICY
from .app import DuckscoreGroup, cli
from .declared import allow_recipe_mismatch_option
from .options import out_dir_option, policy_options, recipe_options
from .summary import done


@cli.group(name="dbt", cls=DuckscoreGroup)
def dbt_group() -> None:
    """duckscore in dbt: `duckscore run`'s SQL as the models of a dbt package over a source of
    your project, the building blocks as dbt macros (docs/dbt.md)."""


@dbt_group.command("package")
@out_dir_option()
@click.option(
    "--log",
    metavar="PATH",
    help="The retrieval log the package will read (Parquet/CSV/JSON file, glob or folder): "
    "read and checked now, as `duckscore run` checks it; the models fuse its sources.",
)
@click.option(
    "--sources",
    metavar="A,B,C",
    callback=lambda ctx, param, value: (
        None if value is None else sorted({s.strip() for s in value.split(",") if s.strip()})
    ),
    help="Comma-separated source names the models fuse, instead of --log's "
    "[default without --log: dense,sparse,summary].",
)
@recipe_options(None)
@allow_recipe_mismatch_option
@policy_options(DEFAULT_POLICY, "risk_flags.single_spike.max_score_norm_at_least=0.9")
def dbt_package(
    out_dir: Path,
    log: str | None,
    sources: list[str] | None,
    recipe: str | None,
    recipe_overrides: tuple[str, ...],
    allow_recipe_mismatch: bool,
    policy: str,
    overrides: tuple[str, ...],
) -> None:
    """Write a dbt package (its own dbt_project.yml): models for fused items, parent features,
    parents, the contract and queries over the source named by the vars duckscore_source_name
    and duckscore_source_table, with the policy and recipe versions in their meta; dbt tests
    (one fails on a log source the models do not fuse); the scalar macros as dbt macros
    (duckscore_rrf, duckscore_clamp, …). For dbt-duckdb.

    \b
    duckscore dbt package --log logs/retrieval_log.parquet --out duckscore_dbt
    # packages.yml of your project:  packages: [{local: ../duckscore_dbt}]
    dbt deps && dbt build --vars '{duckscore_source_name: logs, duckscore_source_table: retrieval_log}'
    """
    from ..dbt.package import build_package, write_package

    package = build_package(
        policy, overrides, recipe, recipe_overrides, allow_recipe_mismatch, sources, log
    )
    write_package(out_dir, package.files)
    done(f"wrote the dbt package duckscore into {out_dir}/ ({package.summary()})")
