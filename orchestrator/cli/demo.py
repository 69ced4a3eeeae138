"""`duckscore demo`, `duckscore demo bids` and `duckscore demo code`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .app import DuckscoreGroup, cli
from .options import engine_options, out_dir_option

if TYPE_CHECKING:
    from ..core.connection import EngineSettings


@cli.group(cls=DuckscoreGroup, invoke_without_command=True)
@out_dir_option(default="duckscore-demo")
@engine_options
@click.pass_context
def demo(ctx: click.Context, out_dir: Path, settings: EngineSettings) -> None:
    """Score the bundled SciFact hybrid-retrieval log (300 queries, 3 retrievers) and summarise.

    Fuses the log with recipe canonical_rrf, derives the seed-000 parent features, scores them
    with policy overall_v1, and checks the decisions against the human relevance judgments.
    `duckscore demo bids` runs the bid-evaluation demo instead, `duckscore demo code` the
    code-localization one.
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..demo.scifact import run_demo

    click.echo(run_demo(out_dir, settings))


@demo.command("bids")
@out_dir_option(default="duckscore-bids-demo")
@engine_options
def demo_bids(out_dir: Path, settings: EngineSettings) -> None:
    """Score the bundled tender (fixtures/bids/tender: two tenants, several suppliers) with
    policy bid_v1 and its rules.yaml, and print one line per supplier."""
    from ..demo.tender import run_tender_demo

    click.echo(run_tender_demo(out_dir, settings))


@demo.command("code")
@out_dir_option(default="duckscore-code-demo")
@engine_options
def demo_code(out_dir: Path, settings: EngineSettings) -> None:
    """Localize the bundled code collection (fixtures/code: 200 commits of pallets/click) with
    recipe code_rrf_v1 through its entities table, judge loc_outputs.jsonl against the gold as
    `eval --loc` does, and print Acc@k at the file, module and function levels."""
    from ..demo.code import run_code_demo

    click.echo(run_code_demo(out_dir, settings))
