"""A command that needs an optional extra says so in one text, the same for every extra, naming
the extra that pyproject.toml declares and that holds what the command imports (issue 47 §4:
`serve` and `pull` gave two different hints, `pull`'s naming a package instead of the extra).
`make demo` installs duckscore alone, so these are the lines a new user meets."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from typing import Any

import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.common.extras import EXTRAS, INSTALL_HINT, needs_extra

from ..helpers import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def requirement_names(extra: str) -> set[str]:
    return {
        re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower()
        for requirement in PYPROJECT["optional-dependencies"][extra]
    }


def test_every_hint_names_an_extra_that_installs_what_is_imported() -> None:
    assert PYPROJECT["name"] == "duckscore"  # what `pip install 'duckscore[…]'` names
    # `fixtures` installs what fixtures/code/build_fixture.py retrieves with (bm25s …): a
    # build script's extra, which no command imports
    declared = set(PYPROJECT["optional-dependencies"]) - {"test", "fixtures"}
    assert set(EXTRAS) == declared
    providers = importlib.metadata.packages_distributions()
    for extra, modules in EXTRAS.items():
        for module in modules:
            given_by = {name.lower() for name in providers.get(module.split(".")[0], [])}
            assert given_by & requirement_names(extra), (extra, module, given_by)
    assert INSTALL_HINT.count("{extra}") == 2
    with pytest.raises(ValueError, match="no extra 'phenix'"):
        needs_extra("pull", "phenix")


def blocked(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """`import module` fails for each of `modules`, as without the extra."""
    for module in modules:
        monkeypatch.setitem(sys.modules, module, None)


def refused(*args: str) -> str:
    done = CliRunner().invoke(cli, list(args))
    assert done.exit_code == 2, (done.stderr, done.exception)
    return done.stderr


def test_serve_without_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from duckscore.serve import server

    def never(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the server started")

    monkeypatch.setattr(server, "serve", never)
    blocked(monkeypatch, "uvicorn", "starlette")
    assert refused("serve") == (
        "duckscore: error: duckscore serve needs the serve extra: pip install 'duckscore[serve]'\n"
    )


def test_pull_and_export_without_the_phoenix_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    blocked(monkeypatch, "phoenix", "phoenix.client")
    pulled = refused("pull", "--from", "http://localhost:1", "--project", "rag",
                     "--out", str(tmp_path / "spans.parquet"))  # fmt: skip
    assert pulled == (
        "duckscore: error: --from http://localhost:1: talking to Phoenix needs the phoenix "
        "extra: pip install 'duckscore[phoenix]'\n"
    )
    from duckscore.core.errors import OptionError
    from duckscore.phoenix.server import phoenix_client

    with pytest.raises(OptionError) as posting:
        phoenix_client("http://localhost:1", "--to")
    assert str(posting.value) == (
        "--to http://localhost:1: talking to Phoenix needs the phoenix extra: "
        "pip install 'duckscore[phoenix]'"
    )


def test_spark_and_postgres_without_their_extras(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    blocked(monkeypatch, "pyspark", "pyspark.sql", "psycopg")
    log = tmp_path / "log.csv"
    log.write_text("query_id,source,item_id,parent_id,rank\nq1,bm25,A:1,A,1\n", encoding="utf-8")
    spark = refused("run", "--engine", "spark", "--log", str(log), "--out", str(tmp_path / "o"))
    assert spark == (
        "duckscore: error: --engine spark needs the spark extra: pip install 'duckscore[spark]'\n"
    )
    store = refused("instincts", "init", "--db", "postgresql://localhost/instincts")
    assert store == (
        "duckscore: error: a PostgreSQL store needs the postgres extra: "
        "pip install 'duckscore[postgres]'\n"
    )


def test_learned_trees_without_the_ltr_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """`--model trees` needs LightGBM (refused before any work); `--model linear` does not."""
    from ..helpers import SCIFACT

    blocked(monkeypatch, "lightgbm")
    log, qrels = SCIFACT / "retrieval_log.parquet", SCIFACT / "qrels.parquet"
    trees = refused(
        "learn", "--log", str(log), "--qrels", str(qrels), "--out", str(tmp_path / "l.yaml")
    )
    assert trees == (
        "duckscore: error: duckscore learn --model trees needs the ltr extra: "
        "pip install 'duckscore[ltr]'\n"
    )
    assert not (tmp_path / "l.yaml").exists()
    linear = CliRunner().invoke(
        cli,
        ["-q", "learn", "--log", str(log), "--qrels", str(qrels), "--model", "linear",
         "--features", "present,rrf", "--folds", "2", "--out", str(tmp_path / "l.yaml")],
    )  # fmt: skip
    assert linear.exit_code == 0, linear.stderr
