"""Interrupts as one line: SIGTERM is raised where the program is, as Ctrl-C is, so that every
cleanup runs; the signal is remembered because DuckDB turns either into its own
`RuntimeError("Query interrupted")`, and the message and exit status tell the two apart."""

from __future__ import annotations

import signal
from types import FrameType

_RECEIVED: list[int] = []


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    _RECEIVED.append(signum)
    raise KeyboardInterrupt


def catch_sigterm() -> None:
    """From now on SIGTERM interrupts like Ctrl-C (call it in the main thread)."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


def interrupt_message(interrupted: BaseException | None = None) -> tuple[str, int]:
    """The one line an interrupted command prints, and its exit status (130, or 143 for TERM).
    A command that publishes in parts (run --partition-by) notes on the exception what it kept
    (`the 3 partitions it finished`)."""
    notes = getattr(interrupted, "__notes__", None)
    left = (
        f"the output keeps {notes[-1]}, each whole, and the rest as it was"
        if notes
        else "the output was left as it was"
    )
    if _RECEIVED and _RECEIVED[-1] == signal.SIGTERM:
        return f"terminated (SIGTERM); {left}", 143
    return f"interrupted; {left}", 130
