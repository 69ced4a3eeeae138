"""When a lane's DuckDB instance is recycled (issue 52 §2): one instance slows over many
different requests (docs/live.md: 25 ms a call at first, 33–36 ms after 1,200 calls; a new
instance is back at 25), so a scoring thread's instance is replaced after N calls, or when the
median of its last WINDOW calls' latencies is over `drift` times that of its first WINDOW."""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

WINDOW = 200  # calls in each median
EVERY = 50  # calls between two comparisons of the medians (a median sorts WINDOW numbers)


@dataclass
class Watch:
    """The calls of one DuckDB instance: `record` says when it is due to be replaced."""

    calls_limit: int  # 0: never by count
    drift: float  # 0: never by latency
    calls: int = 0
    first: list[float] = field(default_factory=list)
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def record(self, ms: float) -> str | None:
        """Count a call of `ms` milliseconds; why the instance is due now, or None."""
        self.calls += 1
        (self.first.append if len(self.first) < WINDOW else self.recent.append)(ms)
        if self.calls_limit and self.calls >= self.calls_limit:
            return f"{self.calls} calls"
        if not self.drift or len(self.recent) < WINDOW or self.calls % EVERY:
            return None
        now, then = statistics.median(self.recent), statistics.median(self.first)
        if now > self.drift * then:
            return (
                f"p50 of the last {WINDOW} calls {now:.1f} ms, the first {WINDOW}'s {then:.1f} ms"
            )
        return None
