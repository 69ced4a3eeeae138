"""Reach (reach.py, reach_plugin.py): which lines get a marker, that markers change nothing but
comments, and that a test is given what its fixtures rendered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jinja2

from .reach import MARKER, Reach, edited_lines, marked, marked_lines

ROOT = Path(__file__).resolve().parents[2]

TEMPLATE = """\
{# a comment
   over two lines #}
SELECT a,
{% if wide %}
    b + 1 AS b,
{% endif %}
    'two
lines' AS s,  -- a comment
    {{ x | string }} AS x {% if wide %}, c{% endif %}
{{ x }}
FROM t
"""


def environment() -> jinja2.Environment:
    """As core/render.py's: blocks trimmed and stripped."""
    return jinja2.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def test_only_lines_of_plain_sql_are_marked() -> None:
    # not: Jinja comment (1, 2), block tags (4, 6, 9), inside a string (7), no SQL (10)
    assert marked_lines(TEMPLATE) == {3, 5, 8, 11}


def test_markers_add_comments_and_nothing_else() -> None:
    text = marked("cap/t.sql", TEMPLATE)
    assert len(text.split("\n")) == len(TEMPLATE.split("\n"))
    for wide in (True, False):
        rendered = environment().from_string(text).render(wide=wide, x=2)
        plain = environment().from_string(TEMPLATE).render(wide=wide, x=2)
        assert MARKER.sub("", rendered) == plain
        seen = {f"{m['template']}:{m['line']}" for m in MARKER.finditer(rendered)}
        assert seen == {"cap/t.sql:3", "cap/t.sql:8", "cap/t.sql:11"} | (
            {"cap/t.sql:5"} if wide else set()
        )


def test_a_mutant_runs_the_tests_that_rendered_any_of_its_lines_and_those_always_run() -> None:
    reach = Reach({"a": {"t.sql:3"}, "b": {"t.sql:4"}, "c": set(), "d": {"u.sql:3"}}, {"c"})
    assert reach.tests_for("t.sql", edited_lines(3, "x\ny")) == ["a", "b", "c"]
    assert reach.tests_for("t.sql", edited_lines(5, "x")) == ["c"]


def test_a_test_is_given_what_its_fixtures_rendered(tmp_path: Path) -> None:
    (tmp_path / "test_rendering.py").write_text(
        textwrap.dedent(
            """
            import subprocess
            import sys

            import jinja2
            import pytest

            def render(line: int) -> str:
                return jinja2.Template(f"SELECT 1/*@reach:t.sql:{line}*/").render()

            SQL = render(1)  # at import: every test's

            @pytest.fixture(scope="module")
            def shared() -> str:
                return render(2)

            @pytest.fixture
            def dynamic() -> str:
                return render(3)

            def test_first(shared: str) -> None:
                render(4)

            def test_second(shared: str) -> None:
                pass

            def test_dynamic(request: pytest.FixtureRequest) -> None:
                request.getfixturevalue("dynamic")

            def test_failing() -> None:
                assert False

            def test_subprocess() -> None:
                subprocess.run([sys.executable, "-c", "pass"], check=True)
            """
        ),
        encoding="utf-8",
    )
    out = tmp_path / "reach.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "tests.mutants.reach_plugin",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_rendering.py"),
        ],
        cwd=ROOT,
        env={**os.environ, "DUCKSCORE_REACH_OUT": str(out)},
        capture_output=True,
        check=False,
    )
    reach = Reach.read(out)
    lines = {
        t.split("::")[1]: sorted(int(m.split(":")[1]) for m in s) for t, s in reach.tests.items()
    }
    assert lines == {
        "test_first": [1, 2, 4],
        "test_second": [1, 2],
        "test_dynamic": [1, 3],
        "test_failing": [1],
        "test_subprocess": [1],
    }
    assert {t.split("::")[1] for t in reach.always} == {"test_failing", "test_subprocess"}
    assert json.loads(out.read_text())["always"] == sorted(reach.always)
