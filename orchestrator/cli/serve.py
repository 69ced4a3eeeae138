"""`duckscore serve`."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import click

from ..api.live_settings import LiveSettings
from ..common.extras import needs_extra
from ..core.errors import DuckscoreError
from .app import cli
from .declared import dataclass_options, job_options

if TYPE_CHECKING:
    from ..runner.job import Job

EXTRA = needs_extra("duckscore serve", "serve")


@cli.command()
@job_options("explain", "settings", "sorted_outputs")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="TCP port."
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Worker processes (uvicorn's factory mode when over 1: each loads the policy; "
    "SIGHUP restarts them, POST /v1/reload reloads only the worker that answers).",
)
@click.option(
    "--max-body-bytes",
    default=10 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(min=1),
    help="Larger request bodies are refused (413).",
)
@click.option(
    "--scoring-threads",
    type=click.IntRange(min=1),
    help="Threads scoring requests, each taking the requests waiting (up to --max-batch) in "
    "one statement  [default: half the CPU count, at least 1; the CPU count with --max-batch 1 or "
    "a job that is not per query].",
)
@click.option(
    "--instincts-db",
    metavar="STORE",
    help="Also serve seed 004's instinct confidence from this store (a DuckDB file or a "
    "postgresql:// URL): GET /v1/instincts, GET /v1/instincts/{id}, POST /v1/instincts/events.",
)
@dataclass_options(LiveSettings, "live")
def serve(
    job: Job,
    host: str,
    port: int,
    workers: int,
    max_body_bytes: int,
    scoring_threads: int | None,
    instincts_db: str | None,
    live: LiveSettings,
) -> None:
    """Serve the policy's decisions over HTTP: POST /v1/score {"hits": […]} answers the
    contract lines `duckscore run` would write for those queries.

    Also GET /healthz, GET /v1/policy, POST /v1/reload (SIGHUP does the same: the policy is
    read from disk again) and GET /openapi.json. One JSON access-log line a request on stderr;
    SIGTERM finishes the requests in flight, then exits 0. Needs `pip install 'duckscore[serve]'`.
    """
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise DuckscoreError(EXTRA) from None
    from ..core.connection import EngineSettings
    from ..serve.server import ScorerSettings
    from ..serve.server import serve as run_server

    one_thread = replace(job, settings=EngineSettings(threads=1))
    settings = ScorerSettings(one_thread, max_body_bytes, scoring_threads, instincts_db, live)
    run_server(settings, host, port, workers)
