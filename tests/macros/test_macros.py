"""Every macro against its input/expected fixture (tests/macros/cases/<macro>.yaml), in DuckDB.

Expected values are computed by hand in the fixture comments, never copied from a run.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
import yaml

import duckscore
from duckscore.core.render import macro_names, render_expression
from duckscore.core.resources import macros_dir

from ..helpers import same_value

MACRO_FIXTURES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))


def _cases() -> list[tuple[str, dict]]:
    cases = []
    for path in MACRO_FIXTURES:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for case in document["cases"]:
            cases.append(
                pytest.param(document["macro"], case, id=f"{path.stem}: {case['title'][:40]}")
            )
    return cases


def run_case(case: dict) -> list[tuple[object, object]]:
    con = duckdb.connect()
    columns = case["columns"]
    definition = ", ".join(f'"{name}" {dtype}' for name, dtype in columns.items())
    con.execute(f"CREATE TABLE t (__row INTEGER, {definition})")
    placeholders = ", ".join("?" for _ in range(len(columns) + 1))
    con.executemany(
        f"INSERT INTO t VALUES ({placeholders})",
        [[i, *(row[c] for c in columns)] for i, row in enumerate(case["rows"])],
    )
    expression = render_expression(case["expression"])
    actual = con.execute(f"SELECT {expression} AS actual FROM t ORDER BY __row").fetchall()
    return [(a[0], row["expected"]) for a, row in zip(actual, case["rows"])]


@pytest.mark.parametrize(("macro", "case"), _cases())
def test_macro_fixture(macro: str, case: dict) -> None:
    assert re.search(rf"\b{macro}\(", case["expression"]), "a case must call its own macro"
    for index, (actual, expected) in enumerate(run_case(case)):
        assert same_value(actual, expected), f"row {index}: got {actual!r}, expected {expected!r}"


def test_every_macro_has_a_fixture_and_a_doc() -> None:
    with_fixtures = {p.stem for p in MACRO_FIXTURES}
    for name in macro_names():
        assert name in with_fixtures, f"macros/{name}.sql has no tests/macros/cases/{name}.yaml"
        text = (macros_dir() / f"{name}.sql").read_text(encoding="utf-8")
        assert text.startswith("{#-"), f"macros/{name}.sql starts with its doc comment"
        assert f"{{% macro {name}(" in text
        assert "Args:" in text and "Usage:" in text


def test_fixture_runner_detects_a_wrong_expectation() -> None:
    case = {
        "expression": "{{ clamp('x') }}",
        "columns": {"x": "DOUBLE"},
        "rows": [{"x": 2.0, "expected": 2.0}],
    }
    [(actual, expected)] = run_case(case)
    assert not same_value(actual, expected)


def test_weighted_geomean_refuses_zero_total_weight() -> None:
    from duckscore.core.errors import TemplateError

    with pytest.raises(TemplateError, match="positive total weight"):
        render_expression("{{ weighted_geomean([]) }}")


def test_macro_files_are_found_from_the_installed_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The macros are the files beside the imported package (nested in it when installed from a
    wheel, beside it in a source checkout: core/resources.py), whatever the working folder."""
    package = Path(duckscore.__file__).resolve().parent
    nested, beside = package / "macros", package.parent / "macros"
    assert macros_dir().resolve() == (nested if nested.is_dir() else beside).resolve()
    assert set(macro_names()) == {p.stem for p in macros_dir().glob("*.sql")} != set()
    monkeypatch.chdir(tmp_path)  # a folder without macros/: still rendered from the package
    assert "greatest" in render_expression("{{ clamp('x') }}").lower()
