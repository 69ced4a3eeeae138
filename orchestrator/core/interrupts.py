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


def interrupt_message() -> tuple[str, int]:
    """The one line an interrupted command prints, and its exit status (130, or 143 for TERM)."""
    if _RECEIVED and _RECEIVED[-1] == signal.SIGTERM:
        return "terminated (SIGTERM); the output was left as it was", 143
    return "interrupted; the output was left as it was", 130
