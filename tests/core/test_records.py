"""A report's record (core/records.py): its fields in declaration order, a nested report by its
own record, and a figure only some runs have left out when they do not have it."""

from __future__ import annotations

from dataclasses import dataclass, field

from duckscore.core.records import OMITTED_WHEN_NONE, Report


@dataclass(frozen=True, kw_only=True)
class Row(Report):
    name: str
    why: str | None = field(default=None, metadata=OMITTED_WHEN_NONE)


@dataclass(frozen=True, kw_only=True)
class Document(Report):
    zeta: int
    tuned: float | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    rows: list[Row]
    best: Row
    grid: dict[str, list[int]] | None  # a plain None is recorded as null


def test_fields_in_declaration_order_nested_and_omitted() -> None:
    document = Document(zeta=1, rows=[Row(name="a"), Row(name="b", why="w")], best=Row(name="c"),
                        grid=None)  # fmt: skip
    assert document.as_record() == {
        "zeta": 1,
        "rows": [{"name": "a"}, {"name": "b", "why": "w"}],
        "best": {"name": "c"},
        "grid": None,
    }
    assert list(document.as_record()) == ["zeta", "rows", "best", "grid"]  # not sorted
    assert list(Document(zeta=0, tuned=0.0, rows=[], best=Row(name=""), grid={}).as_record()) == [
        "zeta", "tuned", "rows", "best", "grid",
    ]  # fmt: skip
