"""`duckscore entities`."""

from __future__ import annotations

from pathlib import Path

import click

from .app import cli
from .options import out_file_option
from .summary import done


@cli.command("entities")
@click.option(
    "--repo",
    required=True,
    metavar="DIR",
    type=click.Path(path_type=Path),
    help="The repository: a folder (its *.py files are read), or with --rev a git repository "
    "(a work tree or a bare one).",
)
@click.option(
    "--rev",
    "revisions",
    multiple=True,
    metavar="REV",
    help="Read the repository's commit REV (a hash, a branch, a tag); repeat for several "
    "revisions, each row saying its own. Default: the folder as it is on disk.",
)
@click.option(
    "--include",
    multiple=True,
    metavar="GLOB",
    help="Read only the files whose relative path matches GLOB (fnmatch: `*` also matches "
    "`/`), e.g. 'src/*'; repeatable.",
)
@click.option(
    "--exclude",
    multiple=True,
    metavar="GLOB",
    help="Leave out the files whose relative path matches GLOB, e.g. 'tests/*'; repeatable.",
)
@out_file_option("the entities table: .parquet, .csv, .tsv or .jsonl")
def entities(
    repo: Path,
    revisions: tuple[str, ...],
    include: tuple[str, ...],
    exclude: tuple[str, ...],
    out_path: Path,
) -> None:
    """Write the entities table of a Python repository: a row per file, top-level class, method
    and top-level function, with its line span and ids (`path.py:Class.method`), read with the
    standard library's ast (docs/code.md).

    \b
    Columns: revision, file_path, kind (file | class | method | function),
    qualified_name, module_id, entity_id, start_line, end_line.
    A file that does not parse is a file row alone, with a warning.
    """
    from ..code.sources import Selection
    from ..code.table import write_entities

    written = write_entities(repo, out_path, revisions, Selection(include, exclude))
    at = f" at {written.revisions} revisions" if written.revisions > 1 else ""
    files = f"{written.files:,} file{'s' * (written.files != 1)}"
    done(f"wrote {written.entities:,} entities of {files}{at} to {out_path}")
