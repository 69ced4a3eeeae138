"""The mutation operators on small templates: what they change, what they leave alone."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from .catalogue import OPERATORS, mutants
from .report import against_catalogue
from .run import (
    CAPABILITIES,
    FAILED_TEST,
    Killers,
    Result,
    capped,
    catalogue,
    equivalents,
    main,
    recorded_equivalents,
    results_so_far,
    sample,
    selection_for,
    targets,
)

ROOT = Path(__file__).resolve().parents[2]
# the tests that catalogue every template, on one worker: the catalogue is cached per process
CATALOGUE = pytest.mark.xdist_group("mutant_catalogue")


def edits(text: str, operator: str) -> list[tuple[str, str]]:
    return [(m.original, m.replacement) for m in mutants("t/x.sql", text) if m.operator == operator]


def test_comments_strings_and_jinja_delimiters_are_never_mutated() -> None:
    text = (
        "{#- a < b, 1 + 2 -#}\n"
        "SELECT 'a-b', \"x*y\" -- 3 > 2\n"
        "{%- if x -%}\n"
        "/* 4 / 5 */ FROM t\n"
        "{%- endif %}\n"
    )
    found = mutants("t/x.sql", text)
    assert {(m.operator, m.original) for m in found} == {("cond", "x")}


@pytest.mark.parametrize(
    ("operator", "text", "expected"),
    [
        ("relop", "WHERE a < b AND c >= d AND e = f AND g <> h", [("<", "<="), (">=", ">"), ("=", "<>"), ("<>", "=")]),
        ("relop", "{% if a == 'x' %}1{% endif %}", [("==", "!=")]),
        ("arith", "SELECT a + b, c * d, -e, count(*), t.* FROM u", [("+", "-"), ("*", "/")]),
        ("arith", "SELECT 1e-9, x / y, CASE WHEN c THEN -d END", [("/", "*")]),
        ("logic", "ROWS BETWEEN a AND b WHERE c AND d OR e", [("AND", "OR"), ("OR", "AND")]),
        ("isnull", "a IS NULL OR b IS NOT NULL", [("IS NULL", "IS NOT NULL"), ("IS NOT NULL", "IS NULL")]),
        ("num", "SELECT x[1], 0.5, s_q_lo, {{ 2.0 | lit }}", [("1", "2"), ("0.5", "1.5"), ("2.0", "3.0")]),
        ("order", "ORDER BY a DESC NULLS LAST", [("DESC", "ASC"), ("NULLS LAST", "NULLS FIRST")]),
        ("tiebreak", "OVER (ORDER BY a DESC, b ASC, c)", [(", b ASC", ""), (", c", "")]),
        ("coalesce", "coalesce(f(a, b), 0.0)", [(", 0.0", "")]),
        ("param", "THEN {{ boost | float | lit }} ELSE {{ 1.0 | lit }}", [("{{ boost | float | lit }}", "{{ 1.0 | lit }}")]),
        ("cond", "{{ a if p.clip else b }}", [("p.clip", "false"), ("p.clip", "true")]),
    ],
)  # fmt: skip
def test_operator(operator: str, text: str, expected: list[tuple[str, str]]) -> None:
    assert sorted(edits(text, operator)) == sorted(expected)


def test_case_swaps_a_single_branch_and_drops_one_of_several() -> None:
    single = edits("CASE WHEN c THEN a ELSE b END", "case")
    assert single == [(" a ELSE b ", " b ELSE a ")]
    several = edits("CASE WHEN c THEN a WHEN d THEN b ELSE e END", "case")
    assert sorted(several) == [("WHEN c THEN a ", ""), ("WHEN d THEN b ", "")]


def test_ids_do_not_move_with_unrelated_lines() -> None:
    text = "SELECT a + b\nFROM t\n"
    before = {m.id for m in mutants("t/x.sql", text)}
    after = {m.id for m in mutants("t/x.sql", "-- a new first line\n" + text)}
    assert before == after and len(before) == len(mutants("t/x.sql", text))


def test_a_mutant_that_breaks_the_template_is_left_out() -> None:
    assert all(
        m.replacement != "" or m.operator != "cond"
        for m in mutants("t/x.sql", "{% if a %}x{% endif %}")
    )


@CATALOGUE
def test_the_two_survivors_of_issue_37_are_in_the_catalogue() -> None:
    ids = {m.id: m for m in catalogue(["fuse"], [])}
    boost = ids["fuse/fused.sql:param:1e8a0403"]
    assert (boost.original, boost.replacement) == ("{{ boost | float | lit }}", "{{ 1.0 | lit }}")
    clip = ids["fuse/components/normalizer/bounds.sql:cond:3f23ee95"]
    assert (clip.original, clip.replacement) == ("params.bounds_clip", "true")


@CATALOGUE
def test_every_template_has_tests_and_every_equivalent_mutant_exists() -> None:
    found = catalogue(list(CAPABILITIES), [])
    table = targets()
    for m in found:
        assert all(
            (ROOT / path).exists() for path in selection_for(m.template, table) if "::" not in path
        )
    assert set(equivalents()) <= {m.id for m in found}
    assert set(OPERATORS) == {m.operator for m in found}


@CATALOGUE
def test_the_sample_takes_as_many_of_each_capability_and_is_stable() -> None:
    found = catalogue(list(CAPABILITIES), [])
    first, again = sample(found, 3, seed=7), sample(found, 3, seed=7)
    assert [m.id for m in first] == [m.id for m in again]
    assert [m.capability for m in first] == [c for c in CAPABILITIES for _ in range(3)]


def test_the_last_killers_come_first_and_only_three_are_kept() -> None:
    killers, selection = Killers(), ["tests/a.py", "tests/b.py"]
    for test in ("t1", "t2", "t1", "t3", "t4"):
        killers.remember(selection, test)
    assert killers.of(selection) == ["t4", "t3", "t1"]
    assert killers.of(["tests/a.py"]) == []


def test_the_first_failing_test_is_read_from_pytests_summary() -> None:
    output = (
        "F\n=== short test summary info ===\n"
        "FAILED tests/fuse/test_x.py::test_y[a-b] - AssertionError: 1 != 2\n"
        "ERROR tests/fuse/test_x.py::test_z\n1 failed in 2.0s\n"
    )
    assert [m.group(1) for m in FAILED_TEST.finditer(output)] == [
        "tests/fuse/test_x.py::test_y[a-b]",
        "tests/fuse/test_x.py::test_z",
    ]


def test_a_resumed_run_keeps_the_last_result_of_each_mutant(tmp_path: Path) -> None:
    equivalent = next(iter(equivalents()))
    lines = [
        Result("a", "t.sql", "num", 1, "1", "2", "survived", 1.0),
        Result("a", "t.sql", "num", 1, "1", "2", "killed", 2.0, killed_by="tests/x.py::t"),
        Result(equivalent, "t.sql", "order", 2, "ASC", "DESC", "survived", 3.0),
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(asdict(r)) + "\n" for r in lines))
    kept = {r.id: r for r in results_so_far(tmp_path)}
    assert kept["a"].status == "killed" and kept["a"].killed_by == "tests/x.py::t"
    assert kept[equivalent].status == "equivalent" and kept[equivalent].reason
    assert results_so_far(tmp_path / "nothing") == []


@CATALOGUE
def test_recorded_equivalents_are_reported_without_a_run(tmp_path: Path) -> None:
    """--skip-equivalent: a recorded equivalent is reported with its reason and no run (no
    overlay is built, no test starts); the one beside it, not recorded, still runs (--list
    stands in: its resumed result is kept, so nothing is left to run)."""
    found = catalogue(["bids"], [])
    known = equivalents()
    recorded = next(m for m in found if m.id in known)
    other = next(m for m in found if m.id not in known)
    earlier = Result(other.id, other.template, other.operator, other.line, other.original,
                     other.replacement, "killed", 5.0, killed_by="tests/x.py::t")  # fmt: skip
    (tmp_path / "results.jsonl").write_text(json.dumps(asdict(earlier)) + "\n")
    code = main(["--id", recorded.id, "--id", other.id, "--skip-equivalent", "--resume",
                 "--out", str(tmp_path)])  # fmt: skip
    report = {r["id"]: r for r in json.loads((tmp_path / "report.json").read_text())}
    assert code == 0 and not (tmp_path / "work").exists()
    assert report[recorded.id]["status"] == "equivalent" and report[recorded.id]["seconds"] == 0.0
    assert report[recorded.id]["reason"] == known[recorded.id]
    assert report[other.id]["status"] == "killed"
    assert [r.id for r in recorded_equivalents([recorded, other], set())] == [recorded.id]
    assert recorded_equivalents([recorded, other], {recorded.id}) == []


def test_the_report_leaves_out_gone_mutants_and_counts_those_not_run() -> None:
    ids = {"fuse/a.sql:num:1": "fuse", "fuse/a.sql:num:2": "fuse", "bids/b.sql:num:3": "bids"}
    results = [{"id": "fuse/a.sql:num:1"}, {"id": "fuse/a.sql:num:9"}]
    kept, note = against_catalogue(results, ids)
    assert kept == [{"id": "fuse/a.sql:num:1"}]
    assert (
        note == "1 results of mutants no longer in the catalogue left out; not run: fuse 1, bids 1."
    )


def test_a_capped_test_run_cannot_take_more_than_its_memory() -> None:
    """A mutant whose query grows without end fails its own run, not the machine."""
    probe = "import resource; print(resource.getrlimit(resource.RLIMIT_AS)[0]); bytearray(2**31)"
    done = subprocess.run(capped([sys.executable, "-c", probe], 2**30), capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.stdout.strip() == str(2**30)
    assert done.returncode == 1 and "MemoryError" in done.stderr
