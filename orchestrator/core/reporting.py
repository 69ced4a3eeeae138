"""What a run reports as it goes, through the standard library's logging: a stage begun (INFO,
the command line's progress lines) and what looks wrong in its inputs or results (WARNING, the
command line's `duckscore: warning: …` lines), on the logger of the module saying it, below the
logger `duckscore`. The package gives that logger a NullHandler, so the Python API prints
nothing unless its caller configures logging; the command line attaches its handler for the
duration of one command (cli/reporting.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

PACKAGE_LOGGER = __name__.partition(".")[0]  # "duckscore", the parent of every module's logger

# set while work runs whose caller reports it itself; a context variable, so a thread (a server's
# request) or another task running meanwhile still reports
_silenced: ContextVar[bool] = ContextVar(f"{PACKAGE_LOGGER}_silenced", default=False)


def _reported(record: logging.LogRecord) -> bool:
    return not _silenced.get()


def module_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)` (a module's `__name__`), whose records `silenced()` drops before
    any handler, the caller's own included, sees them."""
    logger = logging.getLogger(name)
    logger.addFilter(_reported)  # once: addFilter keeps a filter it already holds
    return logger


@contextmanager
def silenced() -> Iterator[None]:
    """No steps and no warnings from the work inside: a partition's run, whose partition line
    and decisions the partitioned run reports; the inner runs of a demo, which prints its own
    summary."""
    token = _silenced.set(True)
    try:
        yield
    finally:
        _silenced.reset(token)
