"""The cache across processes (core/cache.py, issue 34): a check that passed is not parsed again
by the next process — unless the SQL, the schema or the checker's code differ; a log file whose
rows passed is not checked again — unless a byte of it differs, and an object in memory always
is; a cache that is off, corrupt or unwritable costs a check, never a failure; nothing
half-written."""

from __future__ import annotations

import tempfile
from pathlib import Path

import jinja2
import pandas as pd
import pytest

from duckscore.core import cache, check, inputs
from duckscore.core.errors import InputError, TemplateError
from duckscore.core.render import RenderedSQL
from duckscore.core.session import Session
from duckscore.fusion import log as fuse_log
from duckscore.fusion.log import open_log
from duckscore.fusion.recipe import load_recipe

from ..helpers import SCIFACT

SQL = RenderedSQL("cache_case.sql", "SELECT a, b FROM t ORDER BY a NULLS LAST")
SCHEMA = {"t": {"a": "INTEGER", "b": "VARCHAR"}}
PARSED = check._parsed  # the cached function, before a test counts its calls


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache"


def new_process(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Forget what this process learnt; count what is parsed from now on."""
    check._QUALIFIED.clear()
    check._tables_read.cache_clear()
    PARSED.cache_clear()
    parsed: list[str] = []
    real = PARSED.__wrapped__

    def counting(template: str, text: str):  # type: ignore[no-untyped-def]
        parsed.append(text)
        return real(template, text)

    monkeypatch.setattr(check, "_parsed", counting)
    return parsed


def checked(sql: RenderedSQL = SQL, schema: dict = SCHEMA) -> list[str]:
    tables = check.tables_read(sql)
    check.check_sql(sql, {t: schema[t] for t in tables})
    return tables


def test_the_next_process_does_not_parse_a_passed_check(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = new_process(monkeypatch)
    assert checked() == ["t"]
    assert first  # parsed, linted, qualified, stored
    second = new_process(monkeypatch)
    assert checked() == ["t"]
    assert second == []
    assert not list(folder.rglob("*.tmp"))  # written whole: no scratch left


@pytest.mark.parametrize("change", ["schema", "sql", "checker"])
def test_another_schema_sql_or_checker_is_checked_again(
    folder: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    new_process(monkeypatch)
    checked()
    again = new_process(monkeypatch)
    sql, schema = SQL, SCHEMA
    if change == "schema":
        schema = {"t": {"a": "BIGINT", "b": "VARCHAR"}}
    elif change == "sql":
        sql = RenderedSQL("cache_case.sql", SQL.text.replace("a, b", "b, a"))
    else:
        monkeypatch.setattr(check, "_checker", lambda: "another checker")
    checked(sql, schema)
    assert again


def test_a_failed_check_is_never_stored(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = RenderedSQL("cache_case.sql", "SELECT c FROM t ORDER BY c NULLS LAST")
    for _ in range(2):
        new_process(monkeypatch)
        with pytest.raises(TemplateError, match=r"sql/cache_case\.sql"):
            checked(bad)


@pytest.mark.parametrize("state", ["off", "corrupt", "unwritable"])
def test_a_cache_off_corrupt_or_unwritable_costs_a_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: str
) -> None:
    if state == "off":
        monkeypatch.setenv(cache.VARIABLE, "")
    elif state == "unwritable":
        (tmp_path / "file").write_text("not a folder")
        monkeypatch.setenv(cache.VARIABLE, str(tmp_path / "file"))
    else:
        monkeypatch.setenv(cache.VARIABLE, str(tmp_path / "cache"))
        new_process(monkeypatch)
        checked()
        for entry in (tmp_path / "cache").rglob("*"):
            if entry.is_file():
                entry.write_text("{not json")
    first = new_process(monkeypatch)
    assert checked() == ["t"]
    assert first  # parsed: nothing usable was stored
    second = new_process(monkeypatch)
    assert checked() == ["t"]
    # a corrupt entry was replaced by a good one; a cache off or unwritable stores nothing
    assert (second == []) == (state == "corrupt")


def counted_log_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    values, ranks = inputs.check_values, fuse_log._check_ranks_one_based

    def counting_values(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append("values")
        return values(*args, **kwargs)

    def counting_ranks(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append("ranks")
        return ranks(*args, **kwargs)

    monkeypatch.setattr(inputs, "check_values", counting_values)
    monkeypatch.setattr(fuse_log, "_check_ranks_one_based", counting_ranks)
    return seen


def opened_rows(given: object) -> int:
    with Session() as session:
        opened, _ = open_log(session, given, load_recipe("canonical_rrf"))
        return opened.rows


def test_a_log_file_is_checked_once_until_a_byte_changes(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame = pd.read_parquet(SCIFACT / "retrieval_log.parquet")
    log = tmp_path / "log.parquet"
    frame.to_parquet(log)
    seen = counted_log_checks(monkeypatch)
    assert opened_rows(log) == opened_rows(log) == len(frame)
    assert seen == ["values", "ranks"]  # the second open read both answers from the cache
    broken = frame.copy()
    broken.loc[7, "score"] = float("inf")
    broken.to_parquet(log)  # same path, new bytes
    with pytest.raises(InputError, match=r"row 8, .*column 'score' is NaN or infinite"):
        opened_rows(log)
    assert opened_rows(frame) == opened_rows(frame) == len(frame)  # in memory: every time
    assert seen == ["values", "ranks", "values", "values", "ranks", "values", "ranks"]


def rendered_with_template_cache(monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """A template rendered by a new environment keeping its compiled code in the cache (as
    render.environment does), and how many templates it compiled."""
    compiled: list[str] = []
    real = jinja2.Environment.compile

    def counting(self, source, name=None, filename=None, raw=False, defer_init=False):  # type: ignore[no-untyped-def]
        compiled.append(name)
        return real(self, source, name, filename, raw, defer_init)

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    env = jinja2.Environment(
        loader=jinja2.DictLoader({"t.sql": "SELECT {{ 1 + 1 }}"}),
        bytecode_cache=cache.template_code("code"),
    )
    text = env.get_template("t.sql").render()
    monkeypatch.setattr(jinja2.Environment, "compile", real)
    return text, len(compiled)


@pytest.mark.parametrize("damage", ["emptied", "truncated", "removed", "unreadable"])
def test_compiled_templates_are_kept_and_a_damaged_one_is_compiled_again(
    folder: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    assert rendered_with_template_cache(monkeypatch) == ("SELECT 2", 1)
    stored = list((folder / "templates" / "code").iterdir())
    assert len(stored) == 1 and stored[0].suffix == ".cache"  # written whole: no scratch left
    assert rendered_with_template_cache(monkeypatch) == ("SELECT 2", 0)
    if damage in ("removed", "unreadable"):
        stored[0].unlink()
        if damage == "unreadable":  # opening it fails (a link to itself: too many levels)
            stored[0].symlink_to(stored[0].name)
    else:  # truncated: Jinja's header and the source's checksum intact, the code cut short
        code = stored[0].read_bytes()
        stored[0].write_bytes(code[: len(code) - 40] if damage == "truncated" else b"")
    assert rendered_with_template_cache(monkeypatch) == ("SELECT 2", 1)
    assert rendered_with_template_cache(monkeypatch) == ("SELECT 2", 0)


def test_no_template_cache_when_the_cache_is_off_or_unwritable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(cache.VARIABLE, "")
    assert cache.template_code("code") is None
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setenv(cache.VARIABLE, str(tmp_path / "file"))
    assert cache.template_code("code") is None
    assert rendered_with_template_cache(monkeypatch) == ("SELECT 2", 1)


def test_a_template_cache_that_cannot_be_written_is_no_cache(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", full)
    assert rendered_with_template_cache(monkeypatch) == ("SELECT 2", 1)
    assert not list((folder / "templates" / "code").iterdir())
