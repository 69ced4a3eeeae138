"""Interrupts as one line: SIGTERM is raised where the program is, as Ctrl-C is, so that every
cleanup runs; the signal is remembered because DuckDB turns either into its own
`RuntimeError("Query interrupted")`, and the message and exit status tell the two apart.

Moving an output in holds both signals until the move is done (`signals_held`): a signal in the
middle of it would leave a mix of the old and new output, and the move records what it
published, so the line an interrupt prints after it says the new output is in place."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_RECEIVED: list[int] = []
_PUBLISHED: list[str] = []  # the outputs the command moved in, in order, as messages name them


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    _RECEIVED.append(signum)
    raise KeyboardInterrupt


def catch_sigterm() -> None:
    """From now on SIGTERM interrupts like Ctrl-C (call it in the main thread)."""
    signal.signal(signal.SIGTERM, _raise_interrupt)


def command_started() -> None:
    """Forget the signals and outputs of an earlier command run in this process."""
    _RECEIVED.clear()
    _PUBLISHED.clear()


def published(shown: str) -> None:
    """Record that the output `shown` (`--out x`) is now the new one, whole."""
    if shown not in _PUBLISHED:
        _PUBLISHED.append(shown)


def interrupt_message(interrupted: BaseException | None = None) -> tuple[str, int]:
    """The one line an interrupted command prints, and its exit status (130, or 143 for TERM).
    A command that publishes in parts (run --partition-by) notes on the exception what it kept
    (`the 3 partitions it finished`); one interrupted after its output moved in says so."""
    notes = getattr(interrupted, "__notes__", None)
    if notes:
        left = f"the output keeps {notes[-1]}, each whole, and the rest as it was"
    elif len(_PUBLISHED) == 1:
        left = f"{_PUBLISHED[0]} was already written, whole"
    elif _PUBLISHED:
        left = f"{', '.join(_PUBLISHED[:-1])} and {_PUBLISHED[-1]} were already written, whole"
    else:
        left = "the output was left as it was"
    if _RECEIVED and _RECEIVED[-1] == signal.SIGTERM:
        return f"terminated (SIGTERM); {left}", 143
    return f"interrupted; {left}", 130


@contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait for the end of the block, then act as they would have (the
    handlers above raise KeyboardInterrupt); in the main thread only, where Python runs signal
    handlers. Blocks may nest: an inner one hands a held signal to the outer one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous: dict[int, Any] = {s: signal.getsignal(s) for s in _SIGNALS}
    caught = [s for s, handler in previous.items() if handler is not None]
    for signum in caught:
        signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum in caught:
            signal.signal(signum, previous[signum])
        if held:
            handler = previous[held[0]]
            if callable(handler):
                handler(held[0], None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(held[0])
