"""The docs cannot rot: every example in README.md and docs/ runs, on the bundled data.

Fenced blocks, by their info string (docs/testing.md#examples-in-the-docs explains the rules):

- ```sh      shell commands, run in order in a scratch folder holding `fixtures/` (the bundled
             data) and a copy of `benchmarks/`, with `duckscore` on the PATH; each must exit 0.
- ```text output   right after a `sh` block: its exact standard output (a line `...` stands for
             any number of lines).
- ```sql     run in DuckDB in the same folder, one connection per page (views persist from block
             to block); a line `.read FILE` runs the SQL in FILE, as in the DuckDB shell.
- ```python  run with this interpreter in the same folder.
- ```sh extended   (or ```python extended) a slow block whose result another test checks: run, with
             its output block, only in the extended tier, where the whole page runs again.
- ```sh setup   the two set-up commands of the README: `make demo` and `make test` (not run
             here: CI runs `make test` itself, and .ci/run must call it).
- ```sh phoenix (and their outputs)   commands against a running Phoenix server: run by
             tests/integrations/test_phoenix.py against the server it starts, not here.

Any other block (```text, ```yaml, ```json …) is shown, not run. Links between pages must resolve,
anchors included; the README stays a front door of at most README_MAX_LINES lines; every command
has its page.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from ..helpers import DBT, ROOT, need_tool

README_MAX_LINES = 250
NOT_EXAMPLES = ("docs/specs", "docs/reference")  # verbatim specifications and read references
# pages whose examples run an integration's tool: in the extended tier, the tool needed
NEEDS_TOOL = {"docs/dbt.md": DBT}
# pages whose examples take long and repeat what other tests check: in the extended tier too
# (docs/learn.md, 23 s: learning fusion models on SciFact, as tests/calibrate/test_learn.py does)
SLOW_PAGES = {"docs/learn.md"}
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
# a decimal's significant digits compared by the examples (at_shown_precision)
SHOWN_DIGITS = 12
LONG_DECIMAL = re.compile(r"(?<![\w.])-?(?P<mantissa>\d+\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\((?P<target>[^)\s]+)\)|!\[[^\]\n]*\]\((?P<image>[^)\s]+)\)")


@dataclass(frozen=True)
class Block:
    kind: str  # the info string's first word
    tags: tuple[str, ...]
    text: str
    line: int


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [p for p in found if not p.relative_to(ROOT).as_posix().startswith(NOT_EXAMPLES)]


def blocks(text: str) -> list[Block]:
    found, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, info = opening.group("fence"), opening.group("info").strip().split()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j])
            j += 1
        found.append(Block(info[0] if info else "", tuple(info[1:]), "\n".join(body) + "\n", i + 1))
        i = j + 1
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces
    to hyphens."""
    text = re.sub(r"[`*]|<[^>]+>", "", heading.lstrip("#").strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_fence = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            base = slug(line)
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def at_shown_precision(line: str) -> str:
    """`line` with each decimal of more than SHOWN_DIGITS significant digits at SHOWN_DIGITS:
    the last bits of a float (0.6604601182827836) are the C library's and the BLAS's, which
    differ from machine to machine; duckscore's own work is exact far above them."""

    def rounded(found: re.Match[str]) -> str:
        digits = len(found.group("mantissa").replace(".", "").lstrip("0"))
        return (
            found.group() if digits <= SHOWN_DIGITS else f"{float(found.group()):.{SHOWN_DIGITS}g}"
        )

    return LONG_DECIMAL.sub(rounded, line)


def matches(expected: str, actual: str) -> bool:
    """`expected`'s lines equal `actual`'s, decimals at SHOWN_DIGITS (at_shown_precision); a
    line `...` matches any number of lines."""
    want = [at_shown_precision(line.rstrip()) for line in expected.strip("\n").splitlines()]
    got = [at_shown_precision(line.rstrip()) for line in actual.strip("\n").splitlines()]

    def match(i: int, j: int) -> bool:
        if i == len(want):
            return j == len(got)
        if want[i] == "...":
            return any(match(i + 1, k) for k in range(j, len(got) + 1))
        return j < len(got) and want[i] == got[j] and match(i + 1, j + 1)

    return match(0, 0)


def scratch_folder(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "fixtures").symlink_to(ROOT / "fixtures", target_is_directory=True)
    shutil.copytree(
        ROOT / "benchmarks",
        work / "benchmarks",
        ignore=shutil.ignore_patterns("data", "results", "__pycache__"),
    )
    shutil.copytree(
        ROOT / "examples",
        work / "examples",
        ignore=shutil.ignore_patterns("target", "logs", "*.duckdb", "*.duckdb.wal", ".user.yml"),
    )
    return work


def environment() -> dict[str, str]:
    scripts = sysconfig.get_path("scripts")
    return {
        **os.environ,
        # dbt from its own environment (`make integrations`), after this one's python and duckscore
        "PATH": os.pathsep.join([scripts, str(DBT.parent), os.environ.get("PATH", "")]),
        "COLUMNS": "100",
        "PYTHON": sys.executable,
    }


def run_sql(con: duckdb.DuckDBPyConnection, text: str, work: Path) -> None:
    statements: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith(".read "):
            statements.append((work / line.strip().split(None, 1)[1]).read_text(encoding="utf-8"))
        else:
            statements.append(line)
    con.execute("\n".join(statements))


def example_pages() -> list[Any]:
    """Each page once; a page with `extended` blocks once without them and once, in the extended
    tier, with every block."""
    found = []
    for page in pages():
        name = page.relative_to(ROOT).as_posix()
        if name in NEEDS_TOOL.keys() | SLOW_PAGES:
            found.append(pytest.param(page, True, id=name, marks=pytest.mark.extended))
            continue
        found.append(pytest.param(page, False, id=name))
        if any("extended" in b.tags for b in blocks(page.read_text(encoding="utf-8"))):
            found.append(
                pytest.param(page, True, id=f"{name}+extended", marks=pytest.mark.extended)
            )
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("page", "every_block"), example_pages())
def test_every_example_runs(page: Path, every_block: bool, tmp_path: Path) -> None:
    name = page.relative_to(ROOT).as_posix()
    if name in NEEDS_TOOL:
        need_tool(NEEDS_TOOL[name])
    work = scratch_folder(tmp_path)
    env = environment()
    con: duckdb.DuckDBPyConnection | None = None
    last_output: str | None = None
    left_out = False  # the last sh or python block was an extended one, not run here
    try:
        for block in blocks(page.read_text(encoding="utf-8")):
            where = f"{name}:{block.line}"
            if block.kind == "sh" and "setup" in block.tags:
                continue
            if block.kind in ("sh", "bash", "python"):
                left_out = "extended" in block.tags and not every_block
                if left_out:
                    continue
            if left_out and block.kind == "text" and "output" in block.tags:
                continue
            if "phoenix" in block.tags:  # run against a live Phoenix by tests/integrations
                continue
            if block.kind in ("sh", "bash"):
                done = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", block.text],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                assert done.returncode == 0, (
                    f"{where} failed ({done.returncode}):\n{block.text}\n{done.stderr}"
                )
                last_output = done.stdout
            elif block.kind == "text" and "output" in block.tags:
                assert last_output is not None, f"{where}: an output block follows no sh block"
                assert matches(block.text, last_output), (
                    f"{where}: the shown output is not what runs:\n{last_output}"
                )
                last_output = None
            elif block.kind == "sql":
                os.chdir(work)
                if con is None:
                    con = duckdb.connect()
                try:
                    run_sql(con, block.text, work)
                except duckdb.Error as exc:
                    raise AssertionError(f"{where}: {exc}\n{block.text}") from None
            elif block.kind == "python":
                done = subprocess.run(
                    [sys.executable, "-c", block.text],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                assert done.returncode == 0, f"{where} failed:\n{block.text}\n{done.stderr}"
                last_output = done.stdout
    finally:
        os.chdir(ROOT)
        if con is not None:
            con.close()


@pytest.mark.parametrize(
    "page", pages() + [ROOT / "docs/specs/README.md"], ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_links_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for match in LINK.finditer(re.sub(r"```.*?```", "", text, flags=re.S)):
        target = match.group("target") or match.group("image")
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.exists(), f"{page.relative_to(ROOT)}: link to a missing file {target}"
        assert file.is_relative_to(ROOT), (
            f"{page.relative_to(ROOT)}: link out of the repository {target}"
        )
        if anchor and file.suffix == ".md":
            assert anchor in anchors(file.read_text(encoding="utf-8")), (
                f"{page.relative_to(ROOT)}: no heading for #{anchor} in {file.relative_to(ROOT)}"
            )


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_two_commands_are_the_ci_and_makefile_ones() -> None:
    setup = [
        b
        for b in blocks((ROOT / "README.md").read_text(encoding="utf-8"))
        if b.kind == "sh" and "setup" in b.tags
    ]
    assert len(setup) == 1
    commands = [line.split("#")[0].strip() for line in setup[0].text.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^demo:", makefile, re.M) and re.search(r"^test:", makefile, re.M)
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_readme_shows_the_demo_docs_demo_runs() -> None:
    """The README shows `duckscore demo` without running it again (it calibrates a policy: 15 s):
    what it shows must be the output docs/demo.md runs and checks."""
    command = "duckscore demo --out demo\n"
    readme = blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    [shown] = [b for b in readme if b.kind == "text" and b.text.startswith(f"$ {command}")]
    page = blocks((ROOT / "docs" / "demo.md").read_text(encoding="utf-8"))
    [at] = [i for i, b in enumerate(page) if b.kind == "sh" and b.text == command]
    assert page[at + 1].kind == "text" and "output" in page[at + 1].tags
    assert shown.text == f"$ {command}{page[at + 1].text}"


def test_every_command_has_a_page() -> None:
    from duckscore.cli import cli

    headings = "\n".join(
        line
        for p in pages()
        for line in p.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    )
    for name in cli.commands:
        assert re.search(rf"`duckscore {name}\b", headings), (
            f"no page has a heading on `duckscore {name}`"
        )


def test_the_checks_see_rot(tmp_path: Path) -> None:
    assert matches("a\n...\nz\n", "a\nb\nc\nz\n") and not matches("a\nz\n", "a\nb\nz\n")
    # a float's last bits are not compared, its 12th significant digit is
    assert matches('{"ndcg@10": 0.6604601182827836}', '{"ndcg@10": 0.6604601182827829}')
    assert not matches('{"ndcg@10": 0.6604601182827836}', '{"ndcg@10": 0.6604601182837836}')
    assert matches("x 0.9560000000000001", "x 0.956") and not matches("0.956", "0.957")
    assert at_shown_precision("cal_17c2cf6a 1.5e-12 2026-12-02 10.123") == (
        "cal_17c2cf6a 1.5e-12 2026-12-02 10.123"
    )
    assert slug("## `duckscore fuse` and `duckscore run`") == "duckscore-fuse-and-duckscore-run"
    assert anchors("# A\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
    shown = blocks("text\n```sh\necho hi\n```\n```text output\nhi\n```\n```sql\nSELECT 1;\n```\n")
    assert [(b.kind, b.tags, b.line) for b in shown] == [
        ("sh", (), 2),
        ("text", ("output",), 5),
        ("sql", (), 8),
    ]
