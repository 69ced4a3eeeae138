"""The example plugins (examples/plugins: the normaliser tanh_scaled and the fusion method
dismax) end to end on SciFact: `fuse` against a plain-Python oracle of their formulas, and
`run`, the macro pack, the dbt package and Spark giving the same fused items (issue 48 §3)."""

from __future__ import annotations

import math
import shutil
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import jinja2
import pytest
import sqlglot
import yaml
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.dbt.package import build_package
from duckscore.fusion.pipeline import fuse
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run

from ..helpers import SCIFACT, need, need_module

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "tanh_dismax.yaml"
LOG = SCIFACT / "retrieval_log.parquet"
SCALE, TIE_BREAKER, DECAY = 10.0, 0.3, 0.5  # the recipe's component_params, hybrid_v1's decay
FUSED = "SELECT query_id, item_id, fused_score, rank FROM {} ORDER BY query_id, rank"


def oracle() -> dict[tuple[str, str], float]:
    """The recipe's fused score of each (query, parent), in Python: a source's hits on a parent
    aligned by hybrid_v1's max_decay (s1 + d s2 + d² s3 … over the scores descending), then
    tanh(aligned / scale); fused by dismax, max(w s) + tie_breaker (Σ w s − max(w s)), w = 1."""
    hits: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    rows = duckdb.execute(f"SELECT query_id, source, parent_id, score FROM '{LOG}'").fetchall()
    for query, source, parent, score in rows:
        hits[(query, parent, source)].append(score)
    normalised: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for (query, parent, source), scores in hits.items():
        aligned = sum(s * DECAY**i for i, s in enumerate(sorted(scores, reverse=True)))
        normalised[(query, parent)][source] = math.tanh(aligned / SCALE)
    fused = {}
    for key, by_source in normalised.items():
        terms = [1.0 * by_source[source] for source in sorted(by_source)]
        fused[key] = max(terms) + TIE_BREAKER * (sum(terms) - max(terms))
    return fused


@pytest.fixture(scope="module")
def fused(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fuse") / "out"
    fuse(LOG, out, recipe=str(RECIPE))
    return out / "fused.parquet"


def fused_rows(relation: str, con: duckdb.DuckDBPyConnection | None = None) -> list[Any]:
    return (con or duckdb.connect()).execute(FUSED.format(relation)).fetchall()


def test_fuse_gives_the_oracles_scores_on_scifact(fused: Path) -> None:
    expected = oracle()
    rows = fused_rows(f"'{fused}'")
    assert len(rows) == len(expected) == 40_282
    worst = max(abs(score - expected[(query, item)]) for query, item, score, _ in rows)
    assert worst < 1e-12
    by_query: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for query, _, score, rank in rows:
        by_query[query].append((rank, score))
    for ranked in by_query.values():  # ranked by the score
        assert [rank for rank, _ in ranked] == list(range(1, len(ranked) + 1))
        assert all(round(a, 12) >= round(b, 12) for (_, a), (_, b) in pairwise(ranked))


def test_run_fuses_as_fuse_does_and_records_the_plugins(fused: Path, tmp_path: Path) -> None:
    job = Job(recipe=str(RECIPE), policy="overall_v3", allow_recipe_mismatch=True)
    result = run(LOG, tmp_path / "run", job)
    assert fused_rows(f"'{tmp_path / 'run' / 'fused.parquet'}'") == fused_rows(f"'{fused}'")
    recorded = result.manifest["policy"]["parameters"]["plugins"]
    assert [entry["path"] for entry in recorded] == [
        "components/dismax.sql",
        "components/tanh_scaled.sql",
    ]


def test_the_macro_pack_fuses_as_fuse_does(fused: Path, tmp_path: Path) -> None:
    made = CliRunner().invoke(cli, ["-q", "sql", "macros", "--recipe", str(RECIPE)])
    assert made.exit_code == 0, made.output
    con = duckdb.connect()
    con.execute(made.stdout)
    con.execute(f"CREATE VIEW log AS FROM '{LOG}'")
    assert fused_rows("ds_fuse('log')", con) == fused_rows(f"'{fused}'")


def dbt_model(text: str) -> str:
    """A model of the package as dbt renders it for a full (not incremental) build: its source
    the table `log`, the duckscore macros' non-partitioned bodies."""
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    package = SimpleNamespace(
        duckscore_batch=lambda relation: f"SELECT * FROM {relation}",
        duckscore_rows=lambda rows, batch: f"SELECT * FROM {rows}",
    )
    return env.from_string(text).render(
        config=lambda **_: "",
        var=lambda name, default=None: default,
        source=lambda *_: "log",
        duckscore=package,
    )


def test_the_dbt_package_model_fuses_as_fuse_does(fused: Path) -> None:
    package = build_package("overall_v3", [], str(RECIPE), [], True, log=str(LOG))
    model = package.files["models/duckscore_fused.sql"]
    assert "tanh(raw_score / CAST(10.0 AS DOUBLE))" in model
    con = duckdb.connect()
    con.execute(f"CREATE VIEW log AS FROM '{LOG}'")
    con.execute(f"CREATE VIEW duckscore_fused AS {dbt_model(model)}")
    assert fused_rows("duckscore_fused", con) == fused_rows(f"'{fused}'")


def test_the_spark_sql_calls_the_plugins() -> None:
    shown = CliRunner().invoke(
        cli,
        ["sql", "fuse", "--sources", "dense,sparse,summary", "--recipe", str(RECIPE),
         "--dialect", "spark"],
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert "TANH(raw_score / CAST(10.0 AS DOUBLE))" in shown.stdout
    assert "MAX(weight * contribution) + CAST(0.3 AS DOUBLE) * (" in shown.stdout
    sqlglot.parse_one(shown.stdout, read="spark")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.xdist_group("jvm")
def test_spark_runs_the_plugins_as_duckdb_does(tmp_path: Path) -> None:
    need(shutil.which("java") is not None, "a JVM")
    need_module("pyspark")
    from duckscore.runner.spark import run_on_spark

    from ..conftest import spark_session
    from ..engines.test_spark import assert_same_outputs

    job = Job(recipe=str(RECIPE), policy="overall_v3", allow_recipe_mismatch=True)
    with spark_session():
        run(LOG, tmp_path / "duck", job)
        run_on_spark(LOG, tmp_path / "spark", job, shards=3)
    assert_same_outputs(tmp_path / "duck", tmp_path / "spark")


@pytest.mark.parametrize("verb", ["tune", "learn"])
def test_a_recipe_tune_or_learn_writes_elsewhere_finds_its_plugins(
    tmp_path: Path, verb: str
) -> None:
    """tune and learn write a recipe whose plugin files stay where the recipe they started from
    found them: its `plugins` are recorded relative to the written file's folder, so it loads
    (and fuses) from there, and from a copy of that folder moved together with the plugins."""
    written = tmp_path / "elsewhere" / "deeper" / f"{verb}.yaml"
    written.parent.mkdir(parents=True)
    options = {
        "tune": ["--grid", "component_params.dismax.tie_breaker=0.1,0.3"],
        "learn": ["--model", "linear", "--folds", "2"],
    }[verb]
    done = CliRunner().invoke(
        cli,
        ["-q", verb, "--log", str(LOG), "--qrels", str(SCIFACT / "qrels.parquet"),
         "--recipe", str(RECIPE), *options, "--out", str(written)],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    recorded = yaml.safe_load(written.read_text(encoding="utf-8"))["plugins"]
    assert [(written.parent / e["path"]).resolve() for e in recorded] == [
        RECIPE.parent / "components" / name for name in ("dismax.sql", "tanh_scaled.sql")
    ]
    assert not any(Path(e["path"]).is_absolute() for e in recorded)
    fuse(LOG, tmp_path / "fused", str(written))
    rows = duckdb.sql(f"SELECT count(*) FROM '{tmp_path / 'fused' / 'fused.parquet'}'").fetchall()
    assert rows == [(40282,)]
