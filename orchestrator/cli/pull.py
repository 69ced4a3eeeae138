"""`duckscore pull`: the spans of a running Phoenix, as a span export to run on."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from .app import cli
from .options import Moment, out_file_option
from .summary import done


@cli.command("pull")
@click.option(
    "--from",
    "url",
    required=True,
    metavar="URL",
    help="The Phoenix server, http://HOST:PORT (its API key from PHOENIX_API_KEY, when set).",
)
@click.option(
    "--project", default="default", show_default=True, help="The Phoenix project of the spans."
)
@click.option(
    "--start",
    type=Moment(),
    help="Only spans that started at or after this time (ISO 8601; without an offset, UTC).",
)
@click.option("--end", type=Moment(), help="Only spans that started before this time.")
@click.option(
    "--max-spans",
    type=click.IntRange(min=1),
    default=100_000,
    show_default=True,
    help="Refuse a project (or window) with more spans than this.",
)
@out_file_option("the spans: .parquet, or .jsonl (JSON Lines)")
def pull(
    url: str,
    project: str,
    start: datetime | None,
    end: datetime | None,
    max_spans: int,
    out_path: Path,
) -> None:
    """Read the spans of a Phoenix project into a span export: `run --log-format openinference`
    scores it, and `export annotations --to` posts the decisions back (docs/traces.md).

    \b
    The retrieval spans, the traces' root spans and the spans between (a chain between an
    ensemble retriever and the retrievers it calls) are pulled, with the columns a run reads;
    --start and --end select spans by their start time.

    \b
    duckscore pull --from http://localhost:6006 --project rag --out spans.parquet
    duckscore run --log spans.parquet --log-format openinference --out scored
    duckscore export annotations --scored scored --to http://localhost:6006
    """
    from ..phoenix.pull import Window, pull_spans

    pulled = pull_spans(url, project, out_path, Window(start, end), max_spans)
    done(
        f"pulled {pulled.spans:,} spans of project {project!r} ({pulled.retrievals:,} retrieval "
        f"spans in {pulled.traces:,} traces) to {out_path}"
    )
