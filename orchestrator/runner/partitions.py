"""The partitions of a hive-partitioned log (`logs/dt=2024-01-01/…`), their fingerprints, and
the ledger of an output partitioned the same way (what was computed from what, with which
recipe and policy), from which a run tells the stale partitions from the fresh.

A partition's fingerprint is the SHA-256 of its files' names (relative to the partition folder),
sizes and SHA-256 of their bytes: moving the log elsewhere keeps it, any changed byte changes it.
A file whose size and modification time equal the ledger's is not read again (as git does);
`touch` it to make it be.

The ledger also records each partition's outputs (name, size, modification time, SHA-256), so a
partition whose output files were deleted, changed or added to by hand is `damaged`: found by
their sizes and times, confirmed by their hashes where those differ.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import InputError, OutputError
from ..core.inputs import FileSet, fingerprint, resolve_files
from ..core.policy import canonical_json
from ..core.version import __version__
from ..fusion.recipe_view import Recipe
from ..scoring.policy_view import ScorePolicy

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
    decided: dict[str, Any] = field(default_factory=dict)  # what `settings` is the digest of
    outputs: list[FileRecord] = field(default_factory=list)  # named kind/path in kind/KEY=value/

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Entry:
        outputs = [FileRecord(**f) for f in raw.get("outputs", [])]
        return cls(**{**raw, "files": [FileRecord(**f) for f in raw["files"]], "outputs": outputs})

    def name(self, key: str) -> str:
        return f"{key}={self.partition}"


@dataclass
class Ledger:
    """The ledger, written with one line per partition; each line is serialized once (a run
    rewrites the ledger with every partition it publishes)."""

    partition_by: str
    entries: dict[str, Entry]
    _lines: dict[str, tuple[Entry, str]] = field(default_factory=dict, repr=False)

    def text(self) -> str:
        lines = []
        for value in sorted(self.entries):
            entry = self.entries[value]
            cached = self._lines.get(value)
            if cached is None or cached[0] is not entry:
                cached = self._lines[value] = (entry, json.dumps(asdict(entry), ensure_ascii=False))
            lines.append(cached[1])
        head = json.dumps({"format": LEDGER_FORMAT, "partition_by": self.partition_by})
        return f'{head[:-1]}, "partitions": [\n' + ",\n".join(lines) + "\n]}\n"


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


def state_of(
    entry: Entry | None, records: list[FileRecord], digest: str, damage: str | None = None
) -> str:
    """`fresh`, or why the partition is to compute: `new`, `files changed`, `settings changed`
    (recipe, policy, --top-n, --no-explain, --log-format or duckscore's version), `damaged`
    (its outputs are not those the ledger recorded: `damage` says how)."""
    if entry is None:
        return "new"
    if entry.fingerprint != fingerprint_of(records):
        return "files changed"
    if entry.settings != digest:
        return "settings changed"
    return "fresh" if damage is None else "damaged"


def settings_record(
    recipe: Recipe, policy: ScorePolicy, top_n: int, explain: bool, log_format: str
) -> dict[str, Any]:
    """What decides a partition's outputs besides its files: a change recomputes it."""
    return {
        "recipe": [recipe.version, recipe.policy.parameters_sha256],
        "policy": [policy.version, policy.parameters_sha256],
        "top_n": top_n,
        "explain": explain,
        "log_format": log_format,
        "duckscore_version": __version__,
    }


def digest_of(decided: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(decided).encode("utf-8")).hexdigest()


_SHOWN = {"recipe": "recipe", "policy": "policy", "top_n": "--top-n", "explain": "explanations",
          "log_format": "--log-format", "duckscore_version": "duckscore"}  # fmt: skip


def differences(entry: Entry, decided: dict[str, Any]) -> list[str]:
    """How the settings of `entry` differ from `decided` (`policy overall_v3 -> overall_v3+…`);
    a ledger line written before the settings were recorded shows its versions only."""
    old = entry.decided or {  # the versions only: their parameters were not recorded
        "recipe": [entry.recipe, decided["recipe"][1]],
        "policy": [entry.policy, decided["policy"][1]],
        "duckscore_version": entry.duckscore_version,
    }
    said = []
    for key, new in decided.items():
        if key not in old or old[key] == new:
            continue
        before, after = old[key], new
        if key in ("recipe", "policy") and before[0] == after[0]:
            said.append(f"{_SHOWN[key]} {after[0]}: other parameters")
            continue
        if key in ("recipe", "policy"):
            before, after = before[0], after[0]
        elif key == "explain":
            before, after = ("on" if before else "off"), ("on" if after else "off")
        said.append(f"{_SHOWN[key]} {before} -> {after}")
    return said or ["settings"]


def output_records(out_dir: Path, name: str, kinds: Iterable[str]) -> list[FileRecord]:
    """The files of the partition `name` (`kind/name/…` for each kind), hashed."""
    records = []
    for kind in sorted(kinds):
        for relative, path in _files_under(out_dir / kind / name):
            status = os.stat(path)
            digest = fingerprint(path).sha256
            records.append(
                FileRecord(f"{kind}/{relative}", status.st_size, digest, status.st_mtime_ns)
            )
    return records


def damage_of(out_dir: Path, key: str, entry: Entry) -> str | None:
    """None when the partition's output files are those its ledger line recorded; else what is
    wrong with the first that is not (`fused/dt=…/part.parquet is missing`). A file whose size
    and time are the ledger's is taken as is; one whose time only differs is hashed."""
    name = entry.name(key)
    if not entry.outputs:  # a ledger line from before outputs were recorded: its folders only
        for kind in sorted({*entry.rows, MANIFESTS}):
            if not (out_dir / kind / name).is_dir():
                return f"{kind}/{name}/ is missing"
        return None
    expected = {record.name: record for record in entry.outputs}
    found = {
        f"{kind}/{relative}": path
        for kind in sorted({record.name.split("/", 1)[0] for record in entry.outputs})
        for relative, path in _files_under(out_dir / kind / name)
    }

    def shown(recorded: str) -> str:
        kind, rest = recorded.split("/", 1)
        return f"{kind}/{name}/{rest}"

    for recorded, record in sorted(expected.items()):
        path = found.get(recorded)
        if path is None:
            return f"{shown(recorded)} is missing"
        status = os.stat(path)
        if status.st_size != record.bytes or (
            status.st_mtime_ns != record.mtime_ns and fingerprint(path).sha256 != record.sha256
        ):
            return f"{shown(recorded)} changed"
    extra = sorted(set(found) - set(expected))
    return f"{shown(extra[0])} is not one of its outputs" if extra else None


def _files_under(folder: Path) -> Iterator[tuple[str, str]]:
    """(path relative to `folder`, path) of every file under `folder`, in sorted order."""
    for top, folders, files in os.walk(folder):
        folders.sort()
        for file in sorted(files):
            path = os.path.join(top, file)
            yield Path(os.path.relpath(path, folder)).as_posix(), path


def held_partitions(out_dir: Path) -> list[str]:
    """The partitions an output holds (`KEY=value`), by their manifest folders (`manifest/
    KEY=value/`), whatever its ledger says."""
    folder = out_dir / MANIFESTS
    if not folder.is_dir():
        return []
    return sorted(entry.name for entry in folder.iterdir() if entry.is_dir() and "=" in entry.name)


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
