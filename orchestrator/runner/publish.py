"""Publishing a partitioned output a revision at a time, each revision costing what it changes.

Every revision is a whole new version of the output folder, moved in at once by core/swap.py
(exchanged with the output, or the in-place moves where no rename can reach) with the ledger
that describes it: a kill leaves the output as one revision or the next, never a mix.

A revision is not built from nothing. The exchange hands the old folder back, and its files
are hard links to the output's (the same files): it is the output as it was before the last
publish. The next revision starts from it and links again only the partition folders that the
last publish changed, so a run publishing 365 partitions one after the other links and removes
each once, where building every revision from the output (core's `revision(keep_current=True)`)
links every partition already out again: 365·364/2 partition folders, made and removed.

A publish and its bookkeeping (the count of partitions finished, what the next revision must
catch up on), and the removal of the run's folders at the end, hold off Ctrl-C and SIGTERM
until they are done (`signals_held`): the line an interrupted run prints counts every partition
the output keeps, and no staging folder is left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.errors import OutputError
from ..core.interrupts import signals_held
from ..core.outputs import OutputTarget, link_or_copy
from .partitions import (
    LEDGER,
    MANIFESTS,
    Entry,
    FileRecord,
    Ledger,
    Partition,
    digest_of,
    fingerprint_of,
    now,
    output_records,
)


class Publisher:
    """The revisions of one run's output: partitions staged (`stage`, `remove`, `clear`) into
    the next revision, which `publish` moves in with the ledger; `close` removes what is left."""

    def __init__(self, target: OutputTarget, ledger: Ledger) -> None:
        self.target = target
        self.ledger = ledger
        self.key = ledger.partition_by
        self.scratch = target.scratch()  # where the partitions are computed
        self._made: list[Path] = [self.scratch]  # every folder this run made, for `close`
        self._staging: Path | None = None
        self._spare: Path | None = None  # the output before the last publish (hard links)
        self._changed: set[str] = set()  # the partition folders the staging changes
        self._behind: set[str] = set()  # those the last publish changed: the spare lacks them
        self._pending = 0  # partitions staged, not yet published
        self.finished = 0  # partitions published

    def stage(
        self,
        partition: Partition,
        folder: Path,
        rows: dict[str, int],
        records: list[FileRecord],
        versions: tuple[str, str, dict[str, Any]],
    ) -> Entry:
        """The partition computed into `folder` moved into the next revision, with its ledger
        line (the log's `records`, the recipe's and policy's versions and the settings)."""
        recipe, policy, decided = versions
        staging = self._next()
        try:
            _clear(staging, partition.name)
            kinds = _place(folder, staging, partition.name)
            outputs = output_records(staging, partition.name, kinds)
        except OSError as exc:
            raise OutputError(
                f"{self.target.shown}: cannot stage {partition.name} ({exc.strerror or exc})"
            ) from None
        entry = Entry(
            partition.value, partition.folder, fingerprint_of(records), records, recipe, policy,
            digest_of(decided), rows, now(), decided=decided, outputs=outputs,
        )  # fmt: skip
        self.ledger.entries[partition.value] = entry  # a failure from here on ends the run
        self._changed.add(partition.name)
        self._pending += 1
        return entry

    def remove(self, value: str) -> None:
        """The ledger's partition `value` left out of the next revision, with its line."""
        self.clear([self.ledger.entries.pop(value).name(self.key)])

    def clear(self, names: Iterable[str]) -> None:
        """The partition folders `names` (`KEY=value`) left out of the next revision."""
        for name in names:
            _clear(self._next(), name)
            self._changed.add(name)

    def publish(self) -> None:
        """The staged revision, with the ledger, made the output at once (nothing if nothing
        was staged since the last publish)."""
        staging = self._staging
        if staging is None:
            return
        _write_ledger(staging, self.ledger)
        target = self.target
        aside = target.place / f"{target.prefix}old-{uuid.uuid4().hex[:8]}"
        self._made.append(aside)
        with signals_held():
            target.move_in(staging, aside)
            self.finished += self._pending
            self._pending, self._staging = 0, None
            self._behind, self._changed = self._changed, set()
            # the old folder: the staging path after an exchange, `aside` after a rename aside
            # or the in-place moves (whose staging, inside the output, is left empty)
            if target.in_place:
                with contextlib.suppress(OSError):
                    staging.rmdir()
                staging = aside
            self._spare = staging if staging.is_dir() else aside if aside.is_dir() else None

    def close(self) -> None:
        """Remove every folder the run made beside (or inside) the output."""
        with signals_held():
            for folder in self._made:
                shutil.rmtree(folder, ignore_errors=True)

    def _next(self) -> Path:
        """The next revision's folder: the spare caught up with the output, or (the first time)
        the output linked whole."""
        if self._staging is not None:
            return self._staging
        destination, prefix = self.target.destination, self.target.prefix
        try:
            if self._spare is None:
                staging = self.target.scratch()
                self._made.append(staging)
                if destination.is_dir():
                    for entry in sorted(destination.iterdir()):
                        if not entry.name.startswith(prefix):
                            _linked(entry, staging / entry.name)
            else:
                staging, self._spare = self._spare, None
                for name in sorted(self._behind):
                    _clear(staging, name)
                    for kind in _folders(destination, prefix):
                        if (kind / name).is_dir():
                            (staging / kind.name).mkdir(exist_ok=True)
                            _linked(kind / name, staging / kind.name / name)
        except OSError as exc:
            raise OutputError(
                f"{self.target.shown}: cannot make the next revision ({exc.strerror or exc})"
            ) from None
        self._staging = staging
        return staging


def _folders(folder: Path, skip: str | None = None) -> list[Path]:
    """The folders of `folder` (not the links to folders), but those named `skip…`."""
    return [
        entry
        for entry in sorted(folder.iterdir())
        if entry.is_dir() and not entry.is_symlink() and not (skip and entry.name.startswith(skip))
    ]


def _linked(source: Path, copy: Path) -> None:
    """`copy` made like `source`, its files hard links to `source`'s (copies where the file
    system has no hard links)."""
    try:
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, copy, symlinks=True, copy_function=link_or_copy)
        else:
            link_or_copy(source, copy)
    except (OSError, shutil.Error) as exc:
        raise OutputError(f"cannot copy {source} into the new output ({exc})") from None


def _clear(folder: Path, name: str) -> None:
    """The partition folder `name` removed from every output of `folder`; an output folder
    left empty removed too."""
    for kind in _folders(folder):
        partition = kind / name
        if partition.is_dir() and not partition.is_symlink():
            shutil.rmtree(partition)
        elif os.path.lexists(partition):
            partition.unlink()
        else:
            continue
        if not any(kind.iterdir()):
            kind.rmdir()


def _place(run_folder: Path, staging: Path, name: str) -> set[str]:
    """`run`'s files as hive partitions: x.parquet → x/<name>/part.parquet (.jsonl alike; a
    folder of parts x.parquet/ → x/<name>/); manifest.json and sql/ → manifest/<name>/. Returns
    the output folders it placed files in."""
    kinds = set()
    for entry in sorted(run_folder.iterdir()):
        if entry.suffix in (".parquet", ".jsonl"):
            kind = entry.stem
            destination = staging / kind / name
            if not entry.is_dir():
                destination = destination / f"part{entry.suffix}"
        else:
            kind, destination = MANIFESTS, staging / MANIFESTS / name / entry.name
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.rename(entry, destination)
        kinds.add(kind)
    return kinds


def _write_ledger(staging: Path, ledger: Ledger) -> None:
    path = staging / LEDGER
    path.unlink(missing_ok=True)  # a hard link to the published ledger: never write through it
    path.write_text(ledger.text(), encoding="utf-8")
