"""Table contracts: what an input table must hold, column by column, and what was read.

A capability declares its input tables as TableContracts (e.g. fuse's retrieval_log); core/inputs.py
checks a file, glob, folder or DataFrame against one and exposes it as a typed view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["id", "number", "count", "text", "time", "flag"]


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    required: bool = True
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()  # text kinds: the only values allowed, when given
    max_length: int | None = None  # text kinds: the most characters (a store's VARCHAR(n))
    nullable: bool = False  # NULL is a value here (e.g. a bid field the supplier left out)
    # a number's NaN read as NULL (nullable only): an evaluator's "could not score" (RAGAS')
    nan_as_null: bool = False

    def __post_init__(self) -> None:
        if self.nan_as_null and not (self.nullable and self.kind == "number"):
            raise ValueError(f"column {self.name!r}: nan_as_null needs a nullable number")

    @property
    def sql_type(self) -> str:
        return {
            "id": "VARCHAR",
            "text": "VARCHAR",
            "number": "DOUBLE",
            "count": "BIGINT",
            "time": "TIMESTAMP",
            "flag": "BOOLEAN",
        }[self.kind]


def nan_as_null_sql(number: str) -> str:
    """`number` with NaN made NULL. Not `isnan`: Parquet statistics leave NaN out, and DuckDB
    folds `isnan(x)` to false (and `x > 1` to false in a projection) from a range that holds
    no NaN; `isfinite` is evaluated row by row."""
    return f"CASE WHEN isfinite({number}) OR isinf({number}) THEN {number} END"


@dataclass(frozen=True)
class TableContract:
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    allow_empty: bool = False
    # the input's other columns (but hive partition keys) follow the contract's in the typed
    # view, as given, unchecked: a payload carried through (the retrieval log's)
    passes_others: bool = False

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)


@dataclass(frozen=True)
class InputFile:
    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class OpenedInput:
    """An input as it was read: what the user gave, its files' fingerprints, its rows."""

    contract: TableContract
    label: str
    given: str
    format: str
    files: tuple[InputFile, ...]
    rows: int
    columns: dict[str, str] = field(default_factory=dict)  # contract column -> the file's column
    others: tuple[str, ...] = ()  # the columns passed through (TableContract.passes_others)
