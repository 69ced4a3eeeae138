"""The partitions of a hive-partitioned log (`logs/dt=2024-01-01/…`), their fingerprints, and
the ledger of an output partitioned the same way (what was computed from what, with which
recipe and policy), from which a run tells the stale partitions from the fresh.

A partition's fingerprint is the SHA-256 of its files' names (relative to the partition folder),
sizes and SHA-256 of their bytes: moving the log elsewhere keeps it, any changed byte changes it.
A file whose size and modification time equal the ledger's is not read again (as git does);
`touch` it to make it be.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import InputError, OutputError
from ..core.inputs import FileSet, fingerprint, resolve_files
from ..core.policy import Policy, canonical_json
from ..core.version import __version__

LEDGER = "ledger.json"
LEDGER_FORMAT = "duckscore-ledger/1"
MANIFESTS = "manifest"
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class Partition:
    """One value of the partition key: the log folder `key=value` and the files under it."""

    key: str
    value: str
    folder: str
    files: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.key}={self.value}"

    def log(self) -> FileSet:
        return FileSet(self.folder, self.files)


@dataclass(frozen=True)
class FileRecord:
    name: str
    bytes: int
    sha256: str
    mtime_ns: int


@dataclass
class Entry:
    """The ledger's line for one partition of the output."""

    partition: str
    log: str
    fingerprint: str
    files: list[FileRecord]
    recipe: str
    policy: str
    settings: str
    rows: dict[str, int] = field(default_factory=dict)
    computed_at: str = ""
    duckscore_version: str = __version__

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Entry:
        return cls(**{**raw, "files": [FileRecord(**f) for f in raw["files"]]})


@dataclass
class Ledger:
    partition_by: str
    entries: dict[str, Entry]

    def document(self) -> dict[str, Any]:
        return {
            "format": LEDGER_FORMAT,
            "partition_by": self.partition_by,
            "partitions": [asdict(self.entries[value]) for value in sorted(self.entries)],
        }


def checked_key(key: str) -> str:
    if not _KEY.match(key):
        raise InputError(f"--partition-by {key!r}: a column name (letters, digits, _)")
    return key


def find_partitions(given: str, key: str, label: str = "--log") -> list[Partition]:
    """The partitions of `given` (a folder, glob or file under `key=value` folders), by value."""
    files, _ = resolve_files(given, label)
    folders: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    for path in files:
        parts = Path(path).parent.parts
        found = [i for i, part in enumerate(parts) if part.startswith(f"{key}=")]
        if len(found) != 1:
            where = "is not under a" if not found else "is under more than one"
            raise InputError(f"{label}: {path} {where} {key}=… folder (--partition-by {key})")
        value = parts[found[0]][len(key) + 1 :]
        if not value:
            raise InputError(f"{label}: {path}: the folder {key}= names no value")
        folder = str(Path(*parts[: found[0] + 1]))
        if folders.setdefault(value, folder) != folder:
            raise InputError(
                f"{label}: partition {key}={value} is in two folders, {folders[value]} and {folder}"
            )
        members.setdefault(value, []).append(path)
    return [Partition(key, v, folders[v], tuple(sorted(members[v]))) for v in sorted(members)]


def file_records(partition: Partition, known: Entry | None) -> list[FileRecord]:
    """The partition's files as the ledger records them; hashed unless size and mtime match."""
    cached = {f.name: f for f in known.files} if known else {}
    records = []
    for path in partition.files:
        status = os.stat(path)
        name = Path(os.path.relpath(path, partition.folder)).as_posix()
        old = cached.get(name)
        if old and (old.bytes, old.mtime_ns) == (status.st_size, status.st_mtime_ns):
            digest = old.sha256
        else:
            digest = fingerprint(path).sha256
        records.append(FileRecord(name, status.st_size, digest, status.st_mtime_ns))
    return records


def fingerprint_of(records: list[FileRecord]) -> str:
    listed = [[r.name, r.bytes, r.sha256] for r in sorted(records, key=lambda r: r.name)]
    return hashlib.sha256(canonical_json(listed).encode("utf-8")).hexdigest()


def state_of(entry: Entry | None, records: list[FileRecord], digest: str) -> str:
    """`fresh`, or why the partition is to compute: `new`, `files changed`, `settings changed`
    (recipe, policy, --top-n, --no-explain, --log-format or duckscore's version)."""
    if entry is None:
        return "new"
    if entry.fingerprint != fingerprint_of(records):
        return "files changed"
    return "fresh" if entry.settings == digest else "settings changed"


def settings_digest(
    recipe: Policy, policy: Policy, top_n: int, explain: bool, log_format: str
) -> str:
    """What decides a partition's outputs besides its files: a change recomputes it."""
    decided = {
        "recipe": [recipe.version, recipe.parameters_sha256],
        "policy": [policy.version, policy.parameters_sha256],
        "top_n": top_n,
        "explain": explain,
        "log_format": log_format,
        "duckscore_version": __version__,
    }
    return hashlib.sha256(canonical_json(decided).encode("utf-8")).hexdigest()


def read_ledger(out_dir: Path, shown: str) -> Ledger | None:
    """The output's ledger; None for a new or empty output. A folder that holds an output of
    another kind is refused rather than mixed into."""
    path = out_dir / LEDGER
    if not path.exists():
        if (out_dir / "manifest.json").exists():
            raise OutputError(
                f"{shown}: holds an output that is not partitioned (manifest.json); give "
                "--partition-by runs a folder of their own"
            )
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        if document.get("format") != LEDGER_FORMAT:
            raise ValueError(f"format {document.get('format')!r}, expected {LEDGER_FORMAT!r}")
        entries = [Entry.parse(raw) for raw in document["partitions"]]
        return Ledger(document["partition_by"], {e.partition: e for e in entries})
    except (ValueError, KeyError, TypeError) as exc:
        raise OutputError(f"{shown}: {LEDGER} is not a duckscore ledger ({exc})") from None


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
