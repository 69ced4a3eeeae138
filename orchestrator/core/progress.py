"""Stage-by-stage progress on stderr, with elapsed time, for long runs in pipelines; and the
warnings a run gives about its inputs or its results, which print unless silenced (-q)."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, enabled: bool = True, warnings: bool = True) -> None:
        self.enabled = enabled
        self.warnings = warnings
        self.started = time.perf_counter()

    def step(self, message: str) -> None:
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            print(f"duckscore [{elapsed:6.1f}s] {message}", file=sys.stderr, flush=True)

    def warn(self, message: str) -> None:
        """`duckscore: warning: <message>` on stderr: the run goes on, the user should know."""
        if self.warnings:
            print(f"duckscore: warning: {message}", file=sys.stderr, flush=True)


SILENT = Progress(enabled=False, warnings=False)
