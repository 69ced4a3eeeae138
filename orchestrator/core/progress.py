"""Stage-by-stage progress on stderr, with elapsed time, for long runs in pipelines."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.started = time.perf_counter()

    def step(self, message: str) -> None:
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            print(f"duckscore [{elapsed:6.1f}s] {message}", file=sys.stderr, flush=True)


SILENT = Progress(enabled=False)
