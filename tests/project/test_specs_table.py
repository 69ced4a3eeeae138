"""docs/specs/README.md's audit of the seeds (issue 50, "the record"): a table per seed of
(section, requirement, status, where, test). Every `where` names a file of the repository and,
after `:`, a text it holds (a function, a macro, a key); every `test` names a test function that
exists; every row not `done` is in docs/known-limits.md under its seed and section."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from ..helpers import ROOT

SPECS = ROOT / "docs" / "specs" / "README.md"
KNOWN_LIMITS = ROOT / "docs" / "known-limits.md"
SEEDS = ("000", "001", "002", "003", "004")
STATUSES = ("done", "partial", "input", "out")
HEADER = "| § | requirement | status | where | test |"
_SEED_HEADING = re.compile(r"^## Seed (\d{3})\b")
_CODE = re.compile(r"`([^`]+)`")


@dataclass(frozen=True)
class Row:
    seed: str
    section: str
    requirement: str
    status: str
    where: tuple[str, ...]
    tests: tuple[str, ...]
    line: int

    def __str__(self) -> str:
        return f"docs/specs/README.md:{self.line} (seed {self.seed} §{self.section})"


def audit_rows() -> list[Row]:
    rows: list[Row] = []
    seed = None
    in_table = False
    for number, line in enumerate(SPECS.read_text(encoding="utf-8").splitlines(), start=1):
        heading = _SEED_HEADING.match(line)
        if heading:
            seed, in_table = heading.group(1), False
        elif line == HEADER:
            in_table = seed is not None
        elif in_table and line.startswith("|") and not line.startswith("|---"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            assert len(cells) == 5, f"docs/specs/README.md:{number}: five cells, got {cells}"
            section, requirement, status, where, tests = cells
            rows.append(
                Row(seed or "", section, requirement, status,
                    tuple(_CODE.findall(where)), tuple(_CODE.findall(tests)), number)
            )  # fmt: skip
        elif not line.startswith("|"):
            in_table = False
    return rows


ROWS = audit_rows()


def test_every_seed_has_its_table() -> None:
    assert sorted({row.seed for row in ROWS}) == list(SEEDS)


@pytest.mark.parametrize("row", ROWS, ids=str)
def test_a_row_names_a_status_and_what_holds_it(row: Row) -> None:
    assert row.status in STATUSES, f"{row}: status {row.status!r}"
    assert row.requirement, f"{row}: no requirement"
    if row.status in ("done", "partial", "input"):
        assert row.where and row.tests, f"{row}: a {row.status} row names where and its test"


@pytest.mark.parametrize("row", [r for r in ROWS if r.where], ids=str)
def test_each_where_is_a_file_holding_its_text(row: Row) -> None:
    for where in row.where:
        path, _, text = where.partition(":")
        assert (ROOT / path).is_file(), f"{row}: no file {path}"
        if text:
            held = (ROOT / path).read_text(encoding="utf-8")
            assert text in held, f"{row}: {path} does not hold {text!r}"


@pytest.mark.parametrize("row", [r for r in ROWS if r.tests], ids=str)
def test_each_test_exists(row: Row) -> None:
    for named in row.tests:
        path, _, function = named.partition("::")
        assert path.startswith("tests/") and (ROOT / path).is_file(), f"{row}: no file {path}"
        name = function.split("[")[0]
        defined = re.search(rf"^\s*def {re.escape(name)}\(", (ROOT / path).read_text("utf-8"), re.M)
        assert name and defined, f"{row}: {path} defines no test {name!r}"


@pytest.mark.parametrize("row", [r for r in ROWS if r.status != "done"], ids=str)
def test_a_row_not_done_is_a_known_limit(row: Row) -> None:
    limits = KNOWN_LIMITS.read_text(encoding="utf-8")
    assert f"seed {row.seed} §{row.section}" in limits, (
        f"{row}: docs/known-limits.md does not name seed {row.seed} §{row.section}"
    )
