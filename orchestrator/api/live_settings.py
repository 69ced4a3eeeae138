"""What a live scorer does past one call (issue 52 §2): micro-batching (`duckscore serve`'s
requests arriving together scored by one statement: api/batcher.py) and the recycling of a
lane's DuckDB instance (api/lanes.py). Declared with their flags (core/setting.py), so `serve`'s
options and a Python caller's keywords are held to the same bounds."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.setting import check_settings, setting


@dataclass(frozen=True, kw_only=True)
class LiveSettings:
    """The defaults are `serve`'s (batching on); in process, `ds.scorer` recycles as here and
    batches only through a Batcher."""

    batch_window_ms: float = setting(
        10.0,
        "--batch-window-ms",
        "How long a scoring thread waits for as many requests as the last batch held before "
        "scoring those it has in one statement; after a batch of one, a request is scored at "
        "once.",
        minimum=0,
        maximum=1000,
    )
    max_batch: int = setting(
        64,
        "--max-batch",
        "Requests scored in one statement at most (1: each alone). Only for a policy and "
        "recipe that are per query (docs/live.md); others are scored one by one.",
        minimum=1,
    )
    recycle_calls: int = setting(
        2000,
        "--recycle-calls",
        "A scoring thread's DuckDB instance is closed and a new one opened after this many "
        "calls (0: never).",
        minimum=0,
    )
    recycle_drift: float = setting(
        1.3,
        "--recycle-drift",
        "… or when the median latency of its last 200 calls is over this many times that of "
        "its first 200 (0: never).",
        minimum=0,
    )

    def __post_init__(self) -> None:
        check_settings(self)
