"""The stage graph (core/graph.py): what it refuses, what a subgraph holds, how a chain is
written, and how a Session materialises it (tables, views, streams, drops, outputs)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb
import pytest

from duckscore.core.errors import TemplateError
from duckscore.core.graph import Graph, Publication, Stage
from duckscore.core.render import RenderedSQL
from duckscore.core.session import Session


def stage(name: str, *sources: str, **options: object) -> Stage:
    """A stage selecting `n + 1` from its first source (or 1 AS n), reading each by key."""

    def render(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        body = f"SELECT n + 1 AS n FROM {inputs[sources[0]]}" if sources else "SELECT 1 AS n"
        joined = "".join(f" CROSS JOIN (SELECT count(*) FROM {inputs[s]})" for s in sources[1:])
        order = " ORDER BY n" if ordered else ""
        return RenderedSQL(f"t/{name}.sql", f"{body}{joined}{order}\n")

    return Stage(name, f"t/{name}.sql", tuple((s, s) for s in sources), render, **options)  # type: ignore[arg-type]


def test_a_read_must_be_an_earlier_stage_or_an_input() -> None:
    with pytest.raises(TemplateError, match="reads 'b' as b, which is neither a stage before"):
        Graph((stage("a", "b"), stage("b", "i")), ("i",))
    with pytest.raises(TemplateError, match="stage a: the name is taken"):
        Graph((stage("a", "i"), stage("a", "i")), ("i",))
    with pytest.raises(TemplateError, match="stage a is streamed, but b reads it"):
        Graph((stage("a", "i", keep="stream"), stage("b", "a")), ("i",))


def test_a_subgraph_holds_what_its_targets_need_and_reads_what_is_given() -> None:
    graph = Graph(
        (stage("a", "i"), stage("b", "a"), stage("c", "a"), stage("d", "b", "j")), ("i", "j")
    )
    assert graph.subgraph(["d"]).names == ("a", "b", "d")
    assert graph.subgraph(["d"]).inputs == ("i", "j")
    given = graph.subgraph(["d"], given=["b"])
    assert given.names == ("d",) and given.inputs == ("j", "b")
    assert graph.readers("a") == ("b", "c")
    joined = Graph((stage("x", "i"),), ("i",)).then(Graph((stage("y", "x", "k"),), ("x", "k")))
    assert joined.names == ("x", "y") and joined.inputs == ("i", "k")


def test_a_chain_is_one_statement_each_stage_a_cte() -> None:
    graph = Graph((stage("a", "i"), stage("b", "a"), stage("c", "b")), ("i",))
    chain = graph.chain("c", {"i": "input_table"}, ordered=True)
    assert [name for name, _ in chain.stages] == ["a", "b"]
    assert chain.sql(["i AS (SELECT 1)"]) == (
        "WITH\ni AS (SELECT 1),\n"
        "a AS (\nSELECT n + 1 AS n FROM input_table\n),\n"
        "b AS (\nSELECT n + 1 AS n FROM a\n)\n"
        "SELECT * FROM (\nSELECT n + 1 AS n FROM b ORDER BY n\n)"
    )
    given = graph.chain("c", {"b": "kept_b"})
    assert given.stages == () and given.sql() == "SELECT n + 1 AS n FROM kept_b\n"
    with duckdb.connect() as con:
        con.execute("CREATE TABLE input_table AS SELECT 41 AS n")
        assert con.execute(chain.sql()).fetchall() == [(44,)]


def test_a_session_materialises_tables_views_and_streams_in_order(tmp_path: Path) -> None:
    published = (Publication("b.parquet", order=("n",)),)
    graph = Graph(
        (
            stage("a", "i", keep="view"),
            stage("b", "a", transient=True, publications=published),
            stage("c", "b", keep="stream", publications=(Publication("c.parquet"),)),
            stage("d", "b"),
        ),
        ("i",),
    )
    tables = "SELECT table_name, table_type FROM information_schema.tables ORDER BY ALL"
    with Session() as session:
        session.execute("CREATE TABLE given AS SELECT 1 AS n")
        session.materialise(graph, relations={"i": "given"})
        # b was dropped after d, its last reader; c, a stream, was only checked
        assert session.con.execute(tables).fetchall() == [
            ("a", "VIEW"), ("d", "LOCAL TEMPORARY"), ("given", "BASE TABLE")
        ]  # fmt: skip
        assert session.first_row("SELECT n FROM d") == (4,)
        assert list(session.sql) == ["t/a.sql", "t/b.sql", "t/d.sql"]
    with Session() as session:
        session.execute("CREATE TABLE given AS SELECT 1 AS n")
        with session.publish(tmp_path / "out") as out:
            session.materialise(graph, out, relations={"i": "given"})
        assert list(session.sql) == ["t/a.sql", "t/b.sql", "t/c.sql", "t/d.sql"]
        assert list(out.counts) == ["b.parquet", "c.parquet"]
    assert duckdb.execute(f"SELECT n FROM '{tmp_path / 'out' / 'c.parquet'}'").fetchall() == [(4,)]
    assert duckdb.execute(f"SELECT n FROM '{tmp_path / 'out' / 'b.parquet'}'").fetchall() == [(3,)]
