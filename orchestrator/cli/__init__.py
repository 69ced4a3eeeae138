"""The `duckscore` command line, thin: option factories (options.py) and one module of commands
per capability; each command calls one capability function, imported when the command runs, so
`duckscore --help` loads no DuckDB, pandas, Jinja or sqlglot."""

# each module adds its commands to `cli` when imported
from . import (  # noqa: F401
    answers,
    bids,
    calibrate,
    calibrate_answers,
    dbt,
    demo,
    drift,
    entities,
    export,
    fuse,
    instincts,
    learn,
    macros,
    metrics,
    policy,
    pull,
    recalibrate,
    run,
    score,
    serve,
    sql,
    status,
    tune,
)
from .app import DuckscoreGroup, cli, main

__all__ = ["DuckscoreGroup", "cli", "main"]
