"""The entities table of a repository (docs/code.md#the-entities-table): its working tree, or
its commits at the revisions given, written as one file atomically."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InputError
from ..core.outputs import check_output_file, write_frame
from .entities import COLUMNS, Entity, source_entities
from .sources import Selection, SourceFile, folder_files, revision_files

EVERY_FILE = Selection()  # no --include, no --exclude
# the written types and order, whatever the rows (an all-NULL revision stays VARCHAR)
SELECT = (
    "SELECT CAST(revision AS VARCHAR) AS revision, file_path, kind, qualified_name, "
    "CAST(module_id AS VARCHAR) AS module_id, entity_id, "
    "CAST(start_line AS INTEGER) AS start_line, CAST(end_line AS INTEGER) AS end_line "
    "FROM frame ORDER BY revision, file_path, start_line, entity_id"
)


@dataclass(frozen=True)
class Written:
    out: Path
    files: int
    entities: int  # rows other than the files'
    revisions: int  # 0: the working tree was read


def entities_table(
    repo: Path, revisions: Sequence[str] = (), selection: Selection = EVERY_FILE
) -> list[Entity]:
    """The rows of the folder `repo` (no `revisions`), or of the git repository `repo` at each
    of `revisions` (the revision column holds the name as given), in the table's order. Refused
    in one line: a folder or revision that does not exist, a selection that keeps no file."""
    read: list[tuple[str | None, list[SourceFile]]]
    if revisions:
        read = [(rev, revision_files(repo, rev, selection)) for rev in dict.fromkeys(revisions)]
    else:
        read = [(None, folder_files(repo, selection))]
    if not any(files for _, files in read):
        where = f" at {', '.join(revisions)}" if revisions else ""
        raise InputError(
            f"--repo {repo}: no Python file (*.py) to read{where}{_filtered(selection)}"
        )
    rows = [
        row
        for rev, files in read
        for file in files
        for row in source_entities(file.data, file.path, rev)
    ]
    return sorted(rows, key=Entity.sort_key)


def write_entities(
    repo: Path, out: Path, revisions: Sequence[str] = (), selection: Selection = EVERY_FILE
) -> Written:
    """`entities_table` written to `out` (Parquet, CSV, TSV or JSON Lines by its suffix), whole
    or not at all."""
    import pandas as pd

    check_output_file(out, "--out", None, "table")
    rows = entities_table(repo, revisions, selection)
    frame = pd.DataFrame(
        [[getattr(row, c) for c in COLUMNS] for row in rows], columns=list(COLUMNS)
    )
    write_frame(frame, out, "--out", SELECT)
    files = sum(row.kind == "file" for row in rows)
    return Written(out, files, len(rows) - files, len(dict.fromkeys(revisions)))


def _filtered(selection: Selection) -> str:
    globs = [f"--include {g}" for g in selection.include] + [
        f"--exclude {g}" for g in selection.exclude
    ]
    return f" ({', '.join(globs)})" if globs else ""
