"""Click options shared by the commands (kept apart from cli.py so capability modules can use
them without importing the whole command line)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

import click

from .engine import EngineSettings

# the engines `duckscore sql --dialect` writes for (orchestrator/transpile.py); here, not there,
# so that building the command line does not import sqlglot
DIALECTS = ("spark", "postgres", "bigquery", "snowflake", "trino")


def dialect_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """--dialect: the rendered SQL as is (duckdb) or transpiled."""
    return click.option("--dialect", type=click.Choice(("duckdb",) + DIALECTS), default="duckdb",
                        show_default=True,
                        help="Write the SQL for this engine (spark and postgres are tested by execution "
                             "against DuckDB; a construct a dialect cannot express exactly is refused).")(command)


def engine_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--threads / --memory-limit / --temp-dir, collected into `settings`."""

    @click.option("--threads", type=click.IntRange(min=1), help="DuckDB worker threads (default: all cores).")
    @click.option("--memory-limit", metavar="SIZE", help="DuckDB memory limit, e.g. 1GB; larger work spills to --temp-dir.")
    @click.option("--temp-dir", type=click.Path(file_okay=False, path_type=Path), help="Where DuckDB spills when over the memory limit.")
    @functools.wraps(command)
    def wrapper(*args: Any, threads: int | None, memory_limit: str | None,
                temp_dir: Path | None, **kwargs: Any) -> Any:
        settings = EngineSettings(threads=threads, memory_limit=memory_limit, temp_dir=temp_dir)
        return command(*args, settings=settings, **kwargs)

    return wrapper


def run_and_qrels_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--run / --qrels as `eval` and `labels` read them (run_path, qrels_path)."""
    command = click.option(
        "--qrels", "qrels_path", required=True, metavar="PATH",
        help="Relevance judgments: query_id, doc_id (or parent_id), relevance (> 0 is relevant).")(command)
    return click.option(
        "--run", "run_path", required=True, metavar="PATH",
        help="The run: query_id, doc_id (or parent_id, or item_id), and rank and/or score. "
             "Parquet/CSV/JSON file, glob, or (hive) folder.")(command)
