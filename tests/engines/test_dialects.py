"""`duckscore sql … --dialect`: the rendered SQL transpiled for Spark and PostgreSQL is executed
there, on the same input tables, and every row and column must equal DuckDB's (floats within
1e-9 relative). Every capability: score (both policies), fuse (both recipes, every normaliser,
every fusion method, distances, top_k, query analyzer), answers (with and without events).
PostgreSQL is Debian's package, started by the tests; Spark is local. In CI both must be there:
a missing engine fails the run instead of skipping it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.answering.policy import load_answer_policy
from duckscore.answering.stages import render_answers, render_contract
from duckscore.answering.tables import ANSWERS, CHUNKS, CITATIONS, EVENTS
from duckscore.cli import cli
from duckscore.core.errors import TemplateError
from duckscore.core.inputs import open_input
from duckscore.core.policy import dump_yaml
from duckscore.core.render import RenderedSQL, lit
from duckscore.core.resources import fixtures_dir
from duckscore.engines import DIALECTS
from duckscore.engines.dialects import to_dialect
from duckscore.fusion.contract import RETRIEVAL_LOG
from duckscore.fusion.ltr import DEFAULT_FEATURES, feature_names
from duckscore.fusion.recipe import load_recipe, plan
from duckscore.fusion.stages import render_fused
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run
from duckscore.scoring.policy_view import load_score_policy
from duckscore.scoring.stages import render_parents, render_queries
from duckscore.scoring.tables import PARENT_FEATURES

from ..helpers import FIXTURES, need, need_module
from .warehouses import (
    duck_rows,
    first_difference,
    postgres_bin,
    postgres_server,
    spark_rows,
)

# one worker runs them all (and test_spark_engine.py): one JVM, one PostgreSQL server, one copy of the inputs
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("jvm")]
ENGINE_MARKS = {"postgres": pytest.mark.postgres, "spark": pytest.mark.spark}
ENGINES = [pytest.param(engine, marks=mark) for engine, mark in ENGINE_MARKS.items()]


def on_engines(cases: list[tuple]) -> list:
    """Every case on every engine (Spark's in the extended tier, as every Spark test)."""
    return [
        pytest.param(engine, *case, marks=mark)
        for engine, mark in ENGINE_MARKS.items()
        for case in cases
    ]


SCIFACT_LOG = fixtures_dir() / "scifact" / "retrieval_log.parquet"
ANSWERS_DIR = FIXTURES / "answers"


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """One DuckDB database with every input: SciFact's log and parent features, an edge log and
    its features, the answers fixture."""
    folder = tmp_path_factory.mktemp("inputs")
    con = duckdb.connect()
    open_input(con, RETRIEVAL_LOG, SCIFACT_LOG)
    con.execute("CREATE TABLE scifact_log AS FROM retrieval_log")
    edge_log = folder / "edge_log.parquet"
    _edge_log().to_parquet(edge_log)
    open_input(con, RETRIEVAL_LOG, edge_log)
    con.execute("CREATE TABLE edge_log AS FROM retrieval_log")
    for name, log in (("scifact", SCIFACT_LOG), ("edge", edge_log)):
        run(log, folder / name, Job(recipe="hybrid_v1", policy="overall_v1"))  # the features only
        open_input(con, PARENT_FEATURES, folder / name / "parent_features.parquet")
        con.execute(f"CREATE TABLE {name}_features AS FROM parent_features")
    for contract in (ANSWERS, CITATIONS, CHUNKS, EVENTS):
        open_input(con, contract, ANSWERS_DIR / f"{contract.name}.csv")
        con.execute(f"CREATE TABLE fixture_{contract.name} AS FROM {contract.name}")
    con.executemany("INSERT INTO fixture_answers VALUES (?, ?, ?, ?)", ENGLISH_ANSWERS)
    yield con
    con.close()


def _edge_log() -> pd.DataFrame:
    """Ties, all-equal scores, one candidate, a source missing for some parents, unicode ids,
    blocks of one parent, query text for the analyzer; scores usable as distances too."""
    rows = []
    for source, scores in (
        ("bm25", [3.0, 3.0, 3.0, 1.5]),
        ("dense", [0.5, 0.5, 0.2, 0.1]),
        ("summary", [0.9, 0.4, 0.4, 0.3]),
    ):
        for rank, score in enumerate(scores, start=1):
            rows.append(
                ("q-ü", source, f"{source}-{rank}", f"文档{rank % 3}", score, rank, "why 为什么")
            )
    rows += [
        ("q_single", "bm25", "only", "p1", 1.0, 1, "what"),
        ("q_two", "dense", "a", "pa", 0.9, 1, "how"),
        ("q_two", "dense", "b", "pb", 0.9, 2, "how"),
        ("q_two", "summary", "c", "pa", 0.2, 1, "how"),
    ]
    return pd.DataFrame(
        rows, columns=["query_id", "source", "item_id", "parent_id", "score", "rank", "query_text"]
    )


# the English lexicons' edges: case, word boundaries (beside CJK, inside longer words), the
# longest term first, a phrase with a gap, blank paragraphs, nothing visible
ENGLISH_ANSWERS = [
    (
        "en_hedged",
        "q_en",
        "Maybe the cause is unclear.\n\nPerhaps some say otherwise; it might be so.",
        3,
    ),
    (
        "en_assertive",
        "q_en",
        "Clearly, in fact, the answer is 42.\n \t\nIn conclusion, it is definitely so.",
        12,
    ),
    (
        "en_boundaries",
        "q_en",
        "MAYBE因为 maybes, a lot of things; a number of mayhem. I think so, not sure.",
        0,
    ),
    ("en_blank", "q_en", " \n\n \t ", 1),
]


@pytest.fixture(scope="module")
def postgres():
    need(postgres_bin() is not None, "PostgreSQL")
    need_module("psycopg")
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="module")
def spark():
    need(shutil.which("java") is not None, "a JVM")
    need_module("pyspark")
    from ..conftest import spark_session

    with spark_session() as session:
        yield session


def _views(con: duckdb.DuckDBPyConnection, names: dict[str, str]) -> list[str]:
    """Point the names the SQL reads (retrieval_log …) at the tables of one case."""
    for view, table in names.items():
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS FROM {table}")  # shadows open_input's
    return list(names)


_copied: dict[tuple[str, str], str] = {}  # (engine, view) -> the table copied there under that name


def _check(
    engine: str,
    con: duckdb.DuckDBPyConnection,
    inputs: dict[str, str],
    rendered: RenderedSQL,
    key: tuple[str, ...],
    server,
) -> None:
    views = _views(con, inputs)
    expected = duck_rows(con, rendered.text)
    assert expected, "a parity case with no rows proves nothing"
    transpiled = to_dialect(rendered, engine)
    stale = [view for view in views if _copied.get((engine, view)) != inputs[view]]
    if engine == "postgres":
        for view in stale:
            server.load(con, view)
        actual = server.rows(transpiled)
    else:
        actual = spark_rows(server, con, stale, transpiled)
    _copied.update({(engine, view): inputs[view] for view in stale})
    problem = first_difference(expected, actual, key)
    assert problem is None, f"{rendered.template} on {engine}: {problem}"


# a probability map (issue 24): breakpoints in a VALUES table, levels by p_good
ISOTONIC_MAP = [
    "probability={method: isotonic, isotonic: {x: [0.2, 0.5, 0.9], y: [0.1, 0.4, 0.95]}, "
    "levels_by: probability, p_low: 0.3, p_high: 0.8}"
]
# beta calibration (issue 32): ln of the best score clipped into (0, 1), SciFact's best scores
# reaching 1 and the edge cases' 0
BETA_MAP = [
    "probability={method: beta, beta: {intercept: 0.5, ln_score: 2.0, ln_one_minus_score: -0.7}, "
    "levels_by: probability, p_low: 0.3, p_high: 0.8}"
]
SCORE_CASES = [
    *(
        (policy, features, [])
        for policy in ("overall_v1", "overall_v2")
        for features in ("scifact", "edge")
    ),
    ("overall_v1", "edge", ISOTONIC_MAP),
    ("overall_v1", "edge", BETA_MAP),
    ("overall_v1", "scifact", BETA_MAP),
]


@pytest.mark.parametrize(
    ("engine", "policy", "features", "overrides"),
    on_engines(SCORE_CASES),
)
def test_score_on(
    engine: str, policy: str, features: str, overrides: list[str], tables, request
) -> None:
    server = request.getfixturevalue(engine)
    loaded = load_score_policy(policy, overrides)
    inputs = {"parent_features": f"{features}_features"}
    _check(engine, tables, inputs, render_parents(loaded), ("query_id", "parent_id"), server)
    _check(
        engine,
        tables,
        inputs,
        render_queries(loaded, 5, standalone=True, with_query_ids=False),
        ("query_id",),
        server,
    )


SCIFACT_SOURCES = ("dense", "sparse", "summary")


def learned(kind: str, sources: tuple[str, ...] = ("bm25", "dense", "summary")) -> list[str]:
    """Overrides making a recipe learned, of every feature of the three sources: a linear model,
    or random trees of every missing type (tests/fuse/test_ltr.py's)."""
    from ..fuse.test_ltr import random_tree

    names = feature_names(list(DEFAULT_FEATURES), sources)
    rng = np.random.default_rng(3)
    if kind == "linear":
        model = {
            "kind": "linear",
            "intercept": 0.5,
            "weights": rng.normal(size=len(names)).tolist(),
        }
    else:
        model = {"kind": "trees", "trees": [random_tree(rng, 7, len(names)) for _ in range(6)]}
    block = dump_yaml({"features": names, "model": model}, flow=True, width=10**7).strip()
    return [
        "discover_sources=false",
        *(f"sources.{s}.weight=1.0" for s in sources),
        "fusion.method=ltr",
        f"ltr={block}",
    ]


FUSE_CASES = [
    ("hybrid_v1", "scifact", []),
    ("canonical_rrf", "scifact", []),
    (
        "hybrid_v1",
        "edge",
        [
            "query_analyzer.enabled=true",
            "query_analyzer.rules=[{match: '为什么|why', boost: {bm25: 2.0}}]",
        ],
    ),
    *[
        ("canonical_rrf", "edge", [f"source_defaults.normalize={n}", f"fusion.method={m}"])
        for n, m in (
            ("minmax", "combsum"),
            ("max", "combmnz"),
            ("sum", "combanz"),
            ("zscore", "weighted_sum"),
            ("l2", "combmax"),
            ("softmax", "combmin"),
            ("sigmoid", "combmed"),
            ("quantile", "arithmetic_mean"),
            ("dbsf", "geometric_mean"),
            ("rank", "harmonic_mean"),
            ("borda", "combsum"),
            ("none", "isr"),
        )
    ],
    (
        "canonical_rrf",
        "edge",
        ["fusion.missing=list_min", "source_defaults.normalize=minmax", "fusion.method=combsum"],
    ),
    ("canonical_rrf", "edge", ["source_defaults.distance=true", "source_defaults.top_k=2"]),
    ("hybrid_v1", "edge", ["target_granularity=block"]),
    # learned fusion: every feature, a weighted sum and nested CASE trees
    ("canonical_rrf", "edge", learned("linear")),
    ("canonical_rrf", "edge", learned("trees")),
    ("hybrid_v1", "edge", [*learned("trees"), "target_granularity=block"]),
    ("canonical_rrf", "scifact", learned("trees", SCIFACT_SOURCES)),
]


@pytest.mark.parametrize(
    ("engine", "recipe", "log", "overrides"),
    on_engines(FUSE_CASES),
)
def test_fuse_on(engine: str, recipe: str, log: str, overrides: list[str], tables, request) -> None:
    server = request.getfixturevalue(engine)
    sources = [
        s
        for (s,) in tables.execute(
            f"SELECT DISTINCT source FROM {log}_log ORDER BY source"
        ).fetchall()
    ]
    fuse_plan = plan(load_recipe(recipe, overrides), sources, has_rank=True)
    _check(
        engine,
        tables,
        {"retrieval_log": f"{log}_log"},
        render_fused(fuse_plan),
        ("query_id", "item_id"),
        server,
    )


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("with_events", [True, False])
@pytest.mark.parametrize("policy", ["answer_v1", "answer_v1_en"])
def test_answers_on(engine: str, with_events: bool, policy: str, tables, request) -> None:
    server = request.getfixturevalue(engine)
    inputs = {name: f"fixture_{name}" for name in ("answers", "citations", "chunks")}
    if with_events:
        inputs["events"] = "fixture_events"
    rendered = render_answers(load_answer_policy(policy, []), with_events)
    _check(engine, tables, inputs, rendered, ("answer_id",), server)
    hits = tables.execute(
        f"SELECT sum(uncertain_hits + vague_hits + assertive_hits), "
        f"count(*) FILTER (WHERE has_conclusion) FROM ({rendered.text})"
    ).fetchall()[0]
    assert hits[0] >= 3, "the lexicons must match something, or the regex translation goes untested"


# RE2 constructs portable_pattern translates, against DuckDB's own matches: ASCII word boundaries
# (a CJK letter beside a word is a boundary in RE2 only), \x{..} escapes, a dot before a newline
# with and without (?s), a leading ] in a class and in a negated class
PATTERNS = [
    r"\bmay\b",
    r"a\x{20}lot",
    r"x.y",
    r"(?s)x.y",
    r"[]a]+",
    r"[^]a ]+",
    r"\d+\.\d",
    r"(?:\bi\x{20}think\b|\bmaybe\b)",
]
PATTERN_TEXTS = [
    "may因为",
    "maybe",
    "a lot",
    "x\ny",
    "xzy",
    "]a]",
    "b",
    "3.5 and 10.25",
    "I think maybe",
    "mayhem may",
]


@pytest.mark.parametrize("engine", ENGINES)
def test_regular_expressions_match_as_in_duckdb(engine: str, tables, request) -> None:
    server = request.getfixturevalue(engine)
    tables.execute(
        "CREATE OR REPLACE TABLE pattern_texts AS SELECT * FROM (VALUES "
        + ", ".join(f"({i}, ?)" for i in range(len(PATTERN_TEXTS)))
        + ") AS t (id, s)",
        PATTERN_TEXTS,
    )
    columns = ", ".join(
        f"regexp_matches(s, {lit(p)}) AS m{i}, regexp_extract_all(s, {lit(p)}) AS found{i}"
        for i, p in enumerate(PATTERNS)
    )
    rendered = RenderedSQL("probe.sql", f"SELECT id, lower(s) AS s, {columns} FROM texts")
    _check(engine, tables, {"texts": "pattern_texts"}, rendered, ("id",), server)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_answer_contract_text_is_refused(dialect: str) -> None:
    rendered = render_contract(load_answer_policy("answer_v1", []), True, standalone=True)
    with pytest.raises(TemplateError, match=f"sql/answers/contract.sql for {dialect}: printf"):
        to_dialect(rendered, dialect)


@pytest.mark.parametrize(
    "text,dialect,reason",
    [
        ("SELECT quantile_cont(x, 0.5) FROM t", "trino", "trino has no exact grouped quantile"),
        (
            "SELECT quantile_cont(x, 0.5) FROM t",
            "bigquery",
            "bigquery has no exact grouped quantile",
        ),
        (
            "SELECT quantile_cont(x, 0.5) OVER (PARTITION BY q ORDER BY x NULLS LAST) AS m FROM t",
            "postgres",
            "a windowed quantile_cont other than over whole, identical partitions",
        ),
        (
            "SELECT quantile_cont(x, 0.5) OVER (PARTITION BY q) AS m FROM t JOIN u ON u.q = t.q",
            "postgres",
            "a windowed quantile_cont other than over whole, identical partitions of one table",
        ),
        ("SELECT log(x) FROM t", "spark", "one-argument log is base 10"),
        (
            "SELECT list_filter(xs, lambda x: x > 1) FROM t",
            "snowflake",
            "snowflake is not supported for DuckDB list",
        ),
        ("SELECT flatten(xs) FROM t", "postgres", "flatten"),
        (
            "SELECT CAST(x * 2 AS INTEGER) FROM t",
            "postgres",
            "DuckDB rounds a number cast to an integer",
        ),
        ("SELECT 1.0 / n FROM t", "spark", "the decimal literal 1.0 in a division"),
    ],
)
def test_refusals_name_the_construct(text: str, dialect: str, reason: str) -> None:
    with pytest.raises(TemplateError, match=reason):
        to_dialect(RenderedSQL("probe.sql", text), dialect)


@pytest.mark.parametrize(
    "text,dialect,expected",
    [
        # Spark drops a list's ORDER BY and rejects two-argument percentile_cont; sqlglot writes both
        (
            "SELECT list(v ORDER BY k DESC NULLS LAST) FROM t",
            "spark",
            "ARRAY_SORT(COLLECT_LIST(STRUCT(k AS k0, v AS v))",
        ),
        ("SELECT quantile_cont(x, 0.9) FROM t GROUP BY q", "spark", "PERCENTILE(x, 0.9)"),
        (
            "SELECT *, quantile_cont(x, 0.9) OVER (PARTITION BY q) AS x_hi FROM t",
            "spark",
            "PERCENTILE(x, 0.9) OVER (PARTITION BY q) AS x_hi",
        ),
        # a quantile inside an expression (the score's bounds held within [min, max])
        (
            "SELECT greatest(min(x) OVER (PARTITION BY q), quantile_cont(x, 0.1) OVER "
            "(PARTITION BY q)) AS x_lo FROM t",
            "postgres",
            "SELECT GREATEST(MIN(t.x) OVER (PARTITION BY t.q), _quantiles._q0) AS x_lo FROM t "
            "JOIN (SELECT q AS _key0, PERCENTILE_CONT(0.1) WITHIN GROUP (ORDER BY x) AS _q0 "
            "FROM t GROUP BY q) AS _quantiles ON _quantiles._key0 = t.q",
        ),
        (
            "SELECT *, quantile_cont(x, 0.9) OVER (PARTITION BY q) AS x_hi, y + 1 AS z FROM t",
            "postgres",
            "SELECT t.*, _quantiles.x_hi AS x_hi, t.y + 1 AS z FROM t JOIN (SELECT q AS _key0, "
            "PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY x) AS x_hi FROM t GROUP BY q) AS _quantiles "
            "ON _quantiles._key0 = t.q",
        ),
        (
            "SELECT quantile_cont(x, 0.9) FROM t GROUP BY q",
            "postgres",
            "PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY x",
        ),
        (
            "SELECT round(x, 12) FROM t",
            "postgres",
            "CAST(ROUND(CAST(x AS DECIMAL), 12) AS DOUBLE PRECISION)",
        ),
        (
            "SELECT any_value(x) FILTER (WHERE s = 'a') FROM t",
            "postgres",
            "(ARRAY_AGG(x) FILTER(WHERE (s = 'a') AND NOT x IS NULL))[1]",
        ),
    ],
)
def test_rewrites(text: str, dialect: str, expected: str) -> None:
    assert "".join(expected.split()) in "".join(
        to_dialect(RenderedSQL("probe.sql", text), dialect).split()
    )


def test_cli_dialect_option(tmp_path: Path) -> None:
    runner = CliRunner()
    # the seed's overall_v1 normalises per query: quantiles (the default reads stored bounds)
    score = runner.invoke(cli, ["sql", "score", "--policy", "overall_v1", "--dialect", "postgres"])
    assert score.exit_code == 0, score.output
    assert "PERCENTILE_CONT" in score.output and "WITHIN GROUP" in score.output
    refused = runner.invoke(cli, ["sql", "answers", "--stage", "contract", "--dialect", "spark"])
    assert refused.exit_code == 2
    assert refused.stderr.count("\n") == 1 and "printf" in refused.stderr
    trino = runner.invoke(cli, ["sql", "score", "--dialect", "trino"])
    assert (
        trino.exit_code == 2 and "trino is not supported for DuckDB list functions" in trino.stderr
    )
