"""The write protocol of every output: a run's whole output appears at once, or not at all.

- **Where**: a staging folder (or file) beside the output, `.<name>.tmp-<random>`, on the same
  file system; inside the output (`.duckscore.tmp-<random>`) when the output is a mount point or
  its parent is read-only.
- **One writer**: a lock `.<name>.lock` (core/locks.py) is held from before the staging exists
  until it is gone; a second run on the same output fails in one line naming the holder. Under
  the lock, staging left by a dead run (`kill -9`) is removed.
- **Publish**: core/swap.py: one rename for a new output, an atomic exchange for an existing one
  (its other files kept), an undoable move per entry where no rename can reach.
- **Revisions**: a run that publishes several times (`run --partition-by`, a partition at a
  time) holds the lock throughout; each revision starts as the current output hard-linked (the
  files it does not change stay the same files, byte for byte) and moves in as above.
- **Permissions** follow the umask, as any file the user creates.
- **Never inside an input**: an output that is, holds or lies inside an input is refused, and so
  is the current folder (or one holding it) and an empty name. A single file is also refused when
  it is an input file by another name (a symlink, a hard link) or an input glob matches it.
- **The suffix names the format** of a single file: a table is Parquet, CSV, TSV or JSON Lines as
  its suffix says (the suffixes the input reader reads it back by); a document (JSON, YAML) is
  refused under a suffix that names another format.

A failure at any point, an interrupt included, leaves the old output exactly as it was. The
move itself holds Ctrl-C and SIGTERM until it is done (core/interrupts.py): an interrupt that
arrives during it or later finds the new output whole, and its one line says so.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import duckdb

from .errors import OutputError
from .inputs import FORMATS
from .interrupts import published, signals_held
from .locks import not_writable, output_lock, remove_stale, umask
from .render import lit
from .swap import publish_folder, publish_in_place
from .tables import OpenedInput

if TYPE_CHECKING:
    import pandas as pd

IN_PLACE_PREFIX = ".duckscore."
# A single file's format by its suffix: the input reader's suffixes (what a table output is read
# back by), TSV kept apart from CSV for its delimiter, and YAML (policies, recipes).
SUFFIXES = {suffix: "tsv" if suffix == ".tsv" else fmt for suffix, fmt in FORMATS.items()} | {
    ".yaml": "yaml",
    ".yml": "yaml",
}
TABLE_FORMATS = ("parquet", "csv", "tsv", "json")
FORMAT_NAMES = {"parquet": "Parquet", "csv": "CSV", "tsv": "TSV", "json": "JSON", "yaml": "YAML"}
COPY_OPTIONS = {
    "parquet": "FORMAT parquet",
    "csv": "FORMAT csv, HEADER true",
    "tsv": "FORMAT csv, HEADER true, DELIMITER '\t'",
    "json": "FORMAT json",  # newline-delimited: one object per row
}
# What a single-file output is: a table (its format by suffix) or a document of one format.
FileKind = Literal["table", "json", "yaml"]
# A command's inputs, by option: what was given (a path, glob or folder) or the OpenedInput;
# anything else (a DataFrame, a relation) has no file to protect.
Inputs = Mapping[str, Any]


@contextmanager
def atomic_output_dir(
    destination: Path | str, option: str = "--out", inputs: Sequence[Path | str] = ()
) -> Iterator[Path]:
    """Yield a staging folder; on success it becomes `destination` (see the module doc)."""
    with output_target(destination, option, inputs) as target, target.revision() as staging:
        yield staging


class OutputTarget:
    """An output folder whose lock is held: each `revision` is a whole new version of it,
    moved in at once, so one run can publish several times (a partition at a time)."""

    def __init__(self, destination: Path, shown: str) -> None:
        self.destination = destination
        self.shown = shown
        self.place, self.prefix, self.in_place = _staging_place(destination, shown)

    def scratch(self) -> Path:
        """A new empty folder on the output's file system, removed with any later run's litter."""
        try:
            folder = Path(tempfile.mkdtemp(prefix=f"{self.prefix}tmp-", dir=self.place))
            folder.chmod(0o777 & ~umask())
        except OSError as exc:
            where = not_writable(self.place, exc, ", where the staging goes,")
            raise OutputError(f"{self.shown}: cannot create: {where}") from None
        return folder

    def move_in(self, staging: Path, aside: Path) -> None:
        """`staging` made the output at once; the previous output, if any, left at `aside`."""
        publish = publish_in_place if self.in_place else publish_folder
        with signals_held():
            try:
                publish(staging, self.destination, aside)
            except OSError as exc:
                raise OutputError(
                    f"{self.shown}: cannot move the output in ({exc.strerror})"
                ) from None
            published(self.shown)

    @contextmanager
    def revision(self, keep_current: bool = False) -> Iterator[Path]:
        """Yield a staging folder (empty, or with `keep_current` the current output as hard
        links, so unchanged files stay the same files); on success it becomes the output."""
        staging = self.scratch()
        aside = self.place / f"{self.prefix}old-{staging.name.rsplit('-', 1)[-1]}"
        try:
            if keep_current and self.destination.is_dir():
                _link_tree(self.destination, staging, skip=self.prefix)
            yield staging
            self.move_in(staging, aside)
        finally:
            with signals_held():  # an interrupt here would leave part of a folder behind
                shutil.rmtree(staging, ignore_errors=True)
                shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def output_target(
    destination: Path | str, option: str = "--out", inputs: Sequence[Path | str] = ()
) -> Iterator[OutputTarget]:
    """The output checked (a folder, not an input) and locked; a dead run's staging removed."""
    destination, shown = _checked_destination(destination, option)
    if destination.exists() and not destination.is_dir():
        raise OutputError(f"{shown}: exists and is not a folder")
    refuse_overlap(destination, [(str(given), given) for given in inputs], shown)
    target = OutputTarget(destination, shown)
    with output_lock(target.place / f"{target.prefix}lock", shown):
        remove_stale(target.place, f"{target.prefix}tmp-")
        remove_stale(target.place, f"{target.prefix}old-")
        yield target


def check_output_dir(destination: Any, option: str = "--out", inputs: Inputs | None = None) -> None:
    """A folder output checked before any input is read (an output folder given as the input
    would otherwise be read first, and refused as a folder of mixed files): a name, not the
    current folder, not a file, and none of `inputs` (option -> what was given: a path, glob or
    folder, or an object with `given`, a trace log) the folder is, holds or lies inside.
    Anything but a path (the Python API's Relations) is not a folder: nothing to check."""
    if not isinstance(destination, (str, os.PathLike)):
        return
    resolved, shown = _checked_destination(os.fspath(destination), option)
    for label, table in (inputs or {}).items():
        given = getattr(table, "given", table)
        if not isinstance(given, (str, os.PathLike)):
            continue
        where = f"{label} ({os.fspath(given)})"
        paths, patterns = _given_names(os.fspath(given))
        refuse_overlap(resolved, [(where, path) for path in paths], shown)
        for root in (_glob_parts(pattern)[0] for pattern in patterns):
            if root == resolved or resolved in root.parents:
                raise OutputError(
                    f"{shown}: holds the input {where}: the output would replace it; write the "
                    "output elsewhere"
                )
    if resolved.exists() and not resolved.is_dir():
        raise OutputError(f"{shown}: exists and is not a folder")


def _link_tree(source: Path, copy: Path, skip: str) -> None:
    """Recreate `source`'s folders under `copy` with its files hard-linked (copied where the
    file system has no hard links); entries named `skip…` (this output's staging) are left out."""
    for entry in sorted(source.iterdir()):
        if entry.name.startswith(skip):
            continue
        target = copy / entry.name
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.copytree(entry, target, symlinks=True, copy_function=link_or_copy)
            else:
                link_or_copy(entry, target)
        except (OSError, shutil.Error) as exc:
            raise OutputError(f"cannot copy {entry} into the new output ({exc})") from None


def link_or_copy(source: Path | str, target: Path | str) -> None:
    """`target` a hard link to `source`, or a copy where the file system has no hard links."""
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)


def _checked_destination(destination: Path | str, option: str) -> tuple[Path, str]:
    """The output resolved, and how messages name it (as given)."""
    if not str(destination).strip():
        raise OutputError(f"{option} is empty: give the output a name")
    resolved = Path(destination).expanduser().resolve()
    here = Path.cwd().resolve()
    if resolved == here or resolved in here.parents:
        raise OutputError(
            f"{option} {destination}: is the current folder or holds it; give the output a "
            "folder of its own"
        )
    return resolved, f"{option} {destination}"


def refuse_overlap(destination: Path, inputs: Sequence[tuple[str, Path | str]], shown: str) -> None:
    """An output must not be an input, hold one, or lie inside an input folder; `inputs` are
    (how the message names it, its path)."""
    for named, given in inputs:
        source = Path(given).expanduser().resolve()
        if source == destination:
            raise OutputError(
                f"{shown}: is the input {named}: the output would overwrite it; write the output "
                "elsewhere"
            )
        if destination in source.parents:
            raise OutputError(
                f"{shown}: holds the input {named}: the output would replace it; write the "
                "output elsewhere"
            )
        if source in destination.parents:
            raise OutputError(f"{shown}: is inside the input {named}; write the output elsewhere")


def _staging_place(destination: Path, shown: str) -> tuple[Path, str, bool]:
    """Where the staging goes, its name prefix, and whether the output is replaced in place."""
    parent = destination.parent
    if destination.is_dir() and (
        os.path.ismount(destination) or not os.access(parent, os.W_OK | os.X_OK)
    ):
        return destination, IN_PLACE_PREFIX, True
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{shown}: cannot create: {_mkdir_problem(exc)}") from None
    return parent, f".{destination.name}.", False


def _mkdir_problem(exc: OSError) -> str:
    """A folder that could not be made, and why, naming the folder it was to be made in."""
    if exc.filename is None:
        return exc.strerror or str(exc)
    made = Path(os.fsdecode(exc.filename))
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{not_writable(made.parent, exc)}; write the output elsewhere"
    if exc.errno == errno.EEXIST:
        return f"{made} exists and is not a folder"
    return f"{made} ({exc.strerror})"


@contextmanager
def atomic_output_file(
    destination: Path | str,
    option: str = "--out",
    inputs: Inputs | None = None,
    kind: FileKind | None = None,
) -> Iterator[Path]:
    """Yield a temporary sibling path; on success rename it to `destination`. A failure (also an
    OSError or DuckDB error inside the block) leaves the destination as it was. Checked first
    (`check_output_file`): not an input of the command, a suffix that fits `kind`."""
    destination, shown, _ = check_output_file(destination, option, inputs, kind)
    parent, prefix = destination.parent, f".{destination.name}."
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{shown}: cannot write: {_mkdir_problem(exc)}") from None
    with output_lock(parent / f"{prefix}lock", shown):
        remove_stale(parent, f"{prefix}tmp-")
        try:
            handle, name = tempfile.mkstemp(prefix=f"{prefix}tmp-", dir=parent)
            os.close(handle)
        except OSError as exc:
            raise OutputError(f"{shown}: cannot write ({exc.strerror})") from None
        staging = Path(name)
        try:
            yield staging
            staging.chmod(0o666 & ~umask())
            with signals_held():
                os.replace(staging, destination)
                published(shown)
        except (OSError, duckdb.Error) as exc:
            detail = exc.strerror if isinstance(exc, OSError) else str(exc).strip().splitlines()[0]
            raise OutputError(f"{shown}: cannot write ({detail})") from None
        finally:
            staging.unlink(missing_ok=True)


def check_output_file(
    destination: Path | str,
    option: str = "--out",
    inputs: Inputs | None = None,
    kind: FileKind | None = None,
) -> tuple[Path, str, str | None]:
    """What a single-file output is checked for before anything is written — and, by a command
    that calls it first, before any work: a name, not the current folder nor a folder, none of
    `inputs` (`refuse_file_overlap`), a suffix that fits `kind` (`output_format`). Returns the
    output resolved, how messages name it, and its format."""
    resolved, shown = _checked_destination(destination, option)
    if resolved.is_dir():
        raise OutputError(f"{shown}: is a folder")
    for label, given in (inputs or {}).items():
        refuse_file_overlap(resolved, label, given, shown)
    return resolved, shown, output_format(destination, option, kind)


def output_format(destination: Path | str, option: str, kind: FileKind | None) -> str | None:
    """The format a single file is written in: a table's by its suffix (refused without one the
    input reader knows); a document's own, refused under a suffix that names another format."""
    if kind is None:
        return None
    named = SUFFIXES.get(Path(destination).suffix.lower())
    if kind == "table":
        if named in TABLE_FORMATS:
            return named
        accepted = [suffix for suffix, fmt in SUFFIXES.items() if fmt in TABLE_FORMATS]
        raise OutputError(f"{option} {destination}: unknown file type (use {', '.join(accepted)})")
    if named is None or named == kind:
        return kind
    accepted = [suffix for suffix, fmt in SUFFIXES.items() if fmt == kind]
    raise OutputError(
        f"{option} {destination}: the output is {FORMAT_NAMES[kind]}, not {FORMAT_NAMES[named]} "
        f"(use {', '.join(accepted)})"
    )


def refuse_file_overlap(destination: Path, label: str, given: Any, shown: str) -> None:
    """A single-file output (resolved) must not be the input `given` — the same path, or the same
    file by a symlink or hard link — nor lie inside it (a folder, or a `**` glob's folder), nor be
    a name its glob matches: each would replace the input or be read as one by the next run."""
    where, paths, patterns = _input_names(label, given)
    try:
        written = destination.stat()
    except OSError:
        written = None
    for pattern in patterns:
        root, rest = _glob_parts(pattern)
        if "**" in pattern:
            if root == destination or root in destination.parents:
                raise OutputError(
                    f"{shown}: is inside the input {where}; write the output elsewhere"
                )
        elif _glob_matches(root, rest, destination):
            raise OutputError(f"{shown}: matches the input {where}; write the output elsewhere")
    for path in paths:
        source = Path(path).expanduser().resolve()
        if source == destination or (written is not None and _same_file(source, written)):
            raise OutputError(f"{shown}: is the input {where}; write the output elsewhere")
        if source in destination.parents:
            raise OutputError(f"{shown}: is inside the input {where}; write the output elsewhere")


def _input_names(label: str, given: Any) -> tuple[str, list[str], list[str]]:
    """How messages name an input (`--run (runs/*.parquet)`), its paths (files or a folder), and
    its glob patterns: what an OpenedInput read, else what `given` names as the reader reads it."""
    if isinstance(given, OpenedInput):
        if given.format == "memory":
            return "", [], []
        where = f"{given.label} ({given.given})"
        paths, patterns = _given_names(given.given)
        return where, paths + [f.path for f in given.files], patterns
    if isinstance(given, (str, os.PathLike)):
        return f"{label} ({os.fspath(given)})", *_given_names(os.fspath(given))
    return "", [], []


def _given_names(given: str) -> tuple[list[str], list[str]]:
    if os.path.isdir(given) or not glob.has_magic(given):
        return [given], []
    return [], [given]


def _glob_parts(pattern: str) -> tuple[Path, tuple[str, ...]]:
    """A glob's folder before its first wildcard (resolved) and the parts from there on."""
    parts = Path(os.path.expanduser(pattern)).parts
    fixed = next(i for i, part in enumerate(parts) if glob.has_magic(part))
    return Path(*parts[:fixed]).resolve() if fixed else Path.cwd().resolve(), parts[fixed:]


def _glob_matches(root: Path, rest: tuple[str, ...], destination: Path) -> bool:
    try:
        relative = destination.relative_to(root).parts
    except ValueError:
        return False
    return len(relative) == len(rest) and all(
        fnmatch.fnmatchcase(name, part) for name, part in zip(relative, rest, strict=True)
    )


def _same_file(source: Path, written: os.stat_result) -> bool:
    try:
        found = source.stat()
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (written.st_dev, written.st_ino)


def write_json(path: Path, document: Any) -> None:
    path.write_text(
        json.dumps(document, indent=2, sort_keys=False, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def write_frame(
    frame: pd.DataFrame,
    destination: Path,
    option: str = "--out",
    select: str = "SELECT * FROM frame",
    inputs: Inputs | None = None,
) -> None:
    """Write `select` over the DataFrame (as the view `frame`) to one file in the format its
    suffix names (Parquet, CSV, TSV or JSON Lines), atomically: on failure, or when it would
    replace one of `inputs`, the destination is left as it was."""
    fmt = output_format(destination, option, "table")
    assert fmt is not None
    with atomic_output_file(destination, option, inputs, "table") as staging:
        con = duckdb.connect(":memory:")
        try:
            con.register("frame", frame)
            con.execute(f"COPY ({select}) TO {lit(str(staging))} ({COPY_OPTIONS[fmt]})")
        finally:
            con.close()
