"""fault_probe (core/validate.py) is the one-query yes/no the live path asks of a request's rows
before check_values names the fault (fuse/log.py's log_probe): on every row set below it says
"broken" exactly when check_values refuses the rows, and when the hand-written expectation says
so — a probe that missed a rule would let a bad request through the fast path."""

from __future__ import annotations

import math

import duckdb
import pytest

from duckscore.core.errors import InputError
from duckscore.core.tables import Column, TableContract
from duckscore.core.validate import FILE_COLUMN, ROW_COLUMN, check_values, fault_probe

CONTRACT = TableContract(
    name="probe",
    columns=(
        Column("id", "id"),
        Column("score", "number", min=0, max=1, nullable=True),
        Column("n", "count", min=1),
        Column("kind", "text", choices=("a", "b")),
        Column("note", "text", required=False, nullable=True),
    ),
    key=("id",),
)
NAMES = {"id": "Id", "score": "Score", "n": "N", "kind": "Kind"}  # as the file spells them
GOOD = [("x", 0.5, 1.0, "a"), ("y", None, 2.0, "b")]

# rows -> broken, by hand from the contract above
CASES = {
    "good": (GOOD, False),
    "bounds are in range": ([("x", 0.0, 1.0, "a"), ("y", 1.0, 9.0, "b")], False),
    "no rows": ([], True),
    "null id": ([*GOOD, (None, 0.5, 1.0, "a")], True),
    "empty id": ([*GOOD, ("", 0.5, 1.0, "a")], True),
    "score above max": ([*GOOD, ("z", 1.5, 1.0, "a")], True),
    "score below min": ([*GOOD, ("z", -0.1, 1.0, "a")], True),
    "score NaN": ([*GOOD, ("z", math.nan, 1.0, "a")], True),
    "score inf": ([*GOOD, ("z", math.inf, 1.0, "a")], True),
    "count below min": ([*GOOD, ("z", 0.5, 0.0, "a")], True),
    "count not whole": ([*GOOD, ("z", 0.5, 2.5, "a")], True),
    "count null": ([*GOOD, ("z", 0.5, None, "a")], True),
    "kind not a choice": ([*GOOD, ("z", 0.5, 1.0, "c")], True),
    "kind null": ([*GOOD, ("z", 0.5, 1.0, None)], True),
    "repeated key": ([*GOOD, ("x", 0.1, 1.0, "b")], True),
}


def raw_rows(rows: list[tuple]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(
        f'CREATE TABLE raw ("Id" VARCHAR, "Score" DOUBLE, "N" DOUBLE, "Kind" VARCHAR, '
        f"{FILE_COLUMN} VARCHAR, {ROW_COLUMN} BIGINT)"
    )
    for number, row in enumerate(rows, 1):
        con.execute("INSERT INTO raw VALUES (?, ?, ?, ?, 'f.csv', ?)", [*row, number])
    return con


def refused(con: duckdb.DuckDBPyConnection, contract: TableContract) -> bool:
    try:
        check_values(con, contract, "raw", NAMES, "probe", "f.csv")
    except InputError:
        return True
    return False


@pytest.mark.parametrize(("rows", "broken"), list(CASES.values()), ids=list(CASES))
def test_the_probe_says_broken_exactly_when_check_values_refuses(
    rows: list[tuple], broken: bool
) -> None:
    con = raw_rows(rows)
    probed = con.execute(fault_probe(CONTRACT, NAMES, "raw")).fetchone()
    assert probed is not None
    assert probed[0] is broken
    assert refused(con, CONTRACT) is broken


def test_an_empty_table_is_no_fault_where_the_contract_allows_it() -> None:
    allowing = TableContract(CONTRACT.name, CONTRACT.columns, CONTRACT.key, allow_empty=True)
    con = raw_rows([])
    assert con.execute(fault_probe(allowing, NAMES, "raw")).fetchone() == (False,)
    assert not refused(con, allowing)
