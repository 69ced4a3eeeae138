"""The command line's stderr for what a run reports (core/reporting.py): one handler on the
logger `duckscore` for the duration of one command, removed when it ends, so that commands run
one after another in one process (click's CliRunner) print each line once."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..core.reporting import PACKAGE_LOGGER


class ProgressFormatter(logging.Formatter):
    """`duckscore [  12.3s] message` for a step, the seconds since the command started;
    `duckscore: warning: message` for a warning."""

    def __init__(self) -> None:
        super().__init__()
        self.started = time.perf_counter()

    def format(self, record: logging.LogRecord) -> str:
        if record.levelno >= logging.WARNING:
            return f"duckscore: {record.levelname.lower()}: {record.getMessage()}"
        return f"duckscore [{time.perf_counter() - self.started:6.1f}s] {record.getMessage()}"


@contextmanager
def reporting(progress: bool, warnings: bool) -> Iterator[None]:
    """Steps on stderr if `progress`, warnings if `warnings`, inside the block."""
    if not (progress or warnings):
        yield
        return
    logger = logging.getLogger(PACKAGE_LOGGER)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ProgressFormatter())
    before = logger.level
    logger.setLevel(logging.INFO if progress else logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)
