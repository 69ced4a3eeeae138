"""The example dbt project (examples/dbt_scifact) built by the real dbt-core and dbt-duckdb, and
its tables compared with `duckscore run` on the same SciFact log: every rank, id, flag and
decision equal, every number within 1e-12. Then the models by partition: incremental runs
that compute the newest partitions only and together equal the whole run.

dbt lives in its own environment, .venv-dbt (`make integrations`: it pins pathspec below what
the test extra's mypy needs). Without it these tests skip — and fail under CI, which must run
them (`make test-extended`)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from duckscore.cli import cli

from ..helpers import DBT, ROOT, SCIFACT, need_tool

pytestmark = [pytest.mark.extended, pytest.mark.slow, pytest.mark.xdist_group("dbt")]

EXAMPLE = ROOT / "examples" / "dbt_scifact"
TOLERANCE = 1e-12
# model -> (the file of `duckscore run` it equals, the order both are read in)
TABLES = {
    "duckscore_fused": ("fused.parquet", "query_id, rank"),
    "duckscore_parent_features": ("parent_features.parquet", "query_id, parent_id"),
    "duckscore_parents": ("parents.parquet", "query_id, rank"),
    "duckscore_queries": ("queries.parquet", "query_id"),
}
DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")


def dbt(project: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`dbt <args> --profiles-dir .` run inside `project`, as a user runs it there."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env |= {"DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1"}
    done = subprocess.run(
        [str(need_tool(DBT)), *args, "--profiles-dir", ".", "--no-use-colors"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check:
        assert done.returncode == 0, f"dbt {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def copy_example(where: Path) -> Path:
    """The example project, as a checkout has it, two folders below a `fixtures` (its source's
    relative path), without what a build or `dbt deps` leaves; its package installed by `dbt
    deps`, as a user's first command installs it."""
    project = where / "examples" / "dbt_scifact"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns(
            "target", "logs", "dbt_packages", "*.duckdb", "*.wal", ".user.yml"
        ),
    )
    (where / "fixtures").symlink_to(ROOT / "fixtures", target_is_directory=True)
    dbt(project, "deps")
    return project


def records(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def compare(actual: Any, expected: Any, where: str, worst: dict[str, float]) -> None:
    """Equal, but numbers within TOLERANCE (relative or absolute); the largest difference of
    each comparison is kept in `worst`."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), where
        for key in expected:
            compare(actual[key], expected[key], f"{where}.{key}", worst)
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            compare(a, e, f"{where}[{i}]", worst)
    elif isinstance(expected, float) and not isinstance(actual, bool) and actual is not None:
        assert math.isclose(actual, expected, rel_tol=TOLERANCE, abs_tol=TOLERANCE), (
            f"{where}: {actual!r} != {expected!r}"
        )
        worst["max_abs_diff"] = max(worst.get("max_abs_diff", 0.0), abs(actual - expected))
    else:
        assert type(actual) is type(expected) and actual == expected, (
            f"{where}: {actual!r} != {expected!r}"
        )


def compare_with_run(db: Path, run: Path, exclude: str = "") -> dict[str, dict[str, float]]:
    """Every model's rows against the run's files (`exclude`: a column only the models have);
    returns the rows and largest difference per model."""
    found: dict[str, dict[str, float]] = {}
    with duckdb.connect(str(db), read_only=True) as con:
        drop = f" EXCLUDE ({exclude})" if exclude else ""
        for model, (file, order) in TABLES.items():
            got = records(con, f"SELECT *{drop} FROM {model} ORDER BY {order}")
            want = records(con, f"SELECT * FROM '{run / file}' ORDER BY {order}")
            worst = {"rows": float(len(want))}
            assert len(got) == len(want), f"{model}: {len(got)} rows, the run has {len(want)}"
            for i, (a, e) in enumerate(zip(got, want, strict=True)):
                compare(a, e, f"{model} row {i}", worst)
            found[model] = worst
        got = records(con, f"SELECT *{drop} FROM duckscore_contract ORDER BY query_id")
    lines = (run / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    want = [json.loads(line) for line in lines]
    assert len(got) == len(want) == 300
    worst = {"rows": float(len(want))}
    for i, (a, e) in enumerate(zip(got, want, strict=True)):
        compare({k: a[k] for k in e}, e, f"duckscore_contract row {i}", worst)
        assert sorted(a) == sorted(e), f"contract columns {sorted(a)} != {sorted(e)}"
    found["duckscore_contract"] = worst
    return found


@pytest.fixture(scope="module")
def run_outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`duckscore run` on the SciFact log with the defaults the example's package was made
    with (overall_v3, the recipe it was calibrated on, canonical_rrf)."""
    out = tmp_path_factory.mktemp("run") / "run"
    log = str(SCIFACT / "retrieval_log.parquet")
    result = CliRunner().invoke(cli, ["-q", "run", "--log", log, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The example built with `dbt build --profiles-dir .`, as a checkout has it."""
    project = copy_example(tmp_path_factory.mktemp("dbt"))
    dbt(project, "build")
    yield project


def statuses(project: Path) -> dict[str, str]:
    """The status of every node of the last dbt command, by name."""
    results = json.loads((project / "target" / "run_results.json").read_text(encoding="utf-8"))
    return {r["unique_id"].split(".")[-1]: r["status"] for r in results["results"]}


def test_dbt_build_builds_every_model_and_passes_every_test(built: Path) -> None:
    found = statuses(built)
    assert set(found.values()) <= {"success", "pass"}, found
    for model in [*TABLES, "duckscore_contract", "scifact_evidence"]:
        assert found.get(model) == "success", model
    assert found["duckscore_fused_ranks_are_1_based_and_unique"] == "pass"
    assert found["duckscore_log_sources_known"] == "pass"
    assert sum(1 for s in found.values() if s == "pass") >= 20


def test_the_example_survives_dbt_deps(tmp_path: Path) -> None:
    """`dbt deps` installs the package from packages.yml (a local path outside dbt_packages/),
    again and again, and leaves it as the repository has it: the first command a dbt user
    types neither deletes nor changes it, and the project then finds every model."""
    project = copy_example(tmp_path)  # its first `dbt deps`
    dbt(project, "deps")
    package = project / "duckscore_dbt"
    installed = {
        p.relative_to(package): p.read_bytes() for p in sorted(package.rglob("*")) if p.is_file()
    }
    committed = EXAMPLE / "duckscore_dbt"
    assert installed == {
        p.relative_to(committed): p.read_bytes()
        for p in sorted(committed.rglob("*"))
        if p.is_file()
    }
    assert (project / "dbt_packages" / "duckscore" / "dbt_project.yml").is_file()
    listed = dbt(project, "ls", "--resource-type", "model", "--output", "name", "--quiet")
    assert sorted(listed.stdout.split()) == sorted(
        [*TABLES, "duckscore_contract", "scifact_evidence"]
    )


def test_the_models_equal_duckscore_run(built: Path, run_outputs: Path) -> None:
    found = compare_with_run(built / "scifact.duckdb", run_outputs)
    assert found["duckscore_fused"]["rows"] == 40282 and found["duckscore_parents"]["rows"] == 40282
    print(json.dumps(found))


def test_the_models_record_the_policy_and_recipe_in_their_meta(built: Path) -> None:
    manifest = json.loads((built / "target" / "manifest.json").read_text(encoding="utf-8"))
    for model in [*TABLES, "duckscore_contract"]:
        meta = manifest["nodes"][f"model.duckscore.{model}"]["config"]["meta"]["duckscore"]
        assert meta["score_policy_version"] == "overall_v3"
        assert meta["recipe_id"] == "canonical_rrf"
        assert len(meta["recipe_parameters_sha256"]) == 64


def test_the_dbt_macros_compute_what_the_duckdb_macros_compute(built: Path) -> None:
    """The example's own model, scifact_evidence, calls the package's dbt macros; the same query
    with the macro pack's DuckDB macros (`duckscore sql macros`) gives the same numbers."""
    result = CliRunner().invoke(cli, ["sql", "macros"])
    assert result.exit_code == 0
    with duckdb.connect() as con:
        con.execute(result.stdout)
        con.execute(f"ATTACH '{built / 'scifact.duckdb'}' AS scifact (READ_ONLY)")
        log = SCIFACT / "retrieval_log.parquet"
        want = records(
            con,
            f"""
            WITH chunks AS (SELECT query_id, parent_id, count(*) AS chunks FROM '{log}' GROUP BY ALL),
            evidence AS (
                SELECT f.query_id, f.parent_id, ds_weighted_geomean(
                    ds_quantile_norm(f.rrf_sum, quantile_cont(f.rrf_sum, 0.1) OVER q,
                                     quantile_cont(f.rrf_sum, 0.9) OVER q), 0.7,
                    ds_clamp(ds_log_scale(c.chunks) / ds_log_scale(60)), 0.3) AS evidence
                FROM scifact.duckscore_parent_features AS f JOIN chunks AS c USING (query_id, parent_id)
                WINDOW q AS (PARTITION BY f.query_id)
            )
            SELECT *, ds_rank_desc(evidence, query_id, parent_id) AS evidence_rank FROM evidence
            ORDER BY query_id, parent_id""",
        )
        got = records(con, "SELECT * FROM scifact.scifact_evidence ORDER BY query_id, parent_id")
    assert len(got) == len(want) == 40282
    worst: dict[str, float] = {}
    for i, (a, e) in enumerate(zip(got, want, strict=True)):
        compare(a, e, f"scifact_evidence row {i}", worst)


def write_day(project: Path, day: str, query_ids: list[str]) -> None:
    folder = project / "logs" / f"dt={day}"
    folder.mkdir(parents=True)
    with duckdb.connect() as con:
        con.execute(
            f"COPY (FROM '{SCIFACT / 'retrieval_log.parquet'}' WHERE list_contains(?, query_id) "
            f"ORDER BY ALL) TO '{folder / 'part-0.parquet'}'",
            [query_ids],
        )


def test_partitions_build_incrementally_and_together_equal_the_whole_run(
    tmp_path: Path, run_outputs: Path
) -> None:
    """Three days of the log, a third of its queries each. Built on days 1-2, then incremental
    with day 3 added and day 1's files gone: day 1's rows stay as built, days 2-3 are computed
    (the newest built partition again, and the new one), and the whole equals the run of the
    whole log, each row with its query's day. A query in two partitions stops the build."""
    project = copy_example(tmp_path)
    (project / "models" / "sources.yml").write_text(
        "version: 2\nsources:\n  - name: scifact\n    tables:\n      - name: retrieval_log\n"
        "        config:\n          meta:\n            external_location: "
        "\"read_parquet('logs/*/*.parquet', hive_partitioning = true)\"\n",
        encoding="utf-8",
    )
    with duckdb.connect() as con:
        log = SCIFACT / "retrieval_log.parquet"
        queries = [
            q
            for (q,) in con.execute(f"SELECT DISTINCT query_id FROM '{log}' ORDER BY 1").fetchall()
        ]
    thirds = {day: queries[i * 100 : (i + 1) * 100] for i, day in enumerate(DAYS)}
    partitioned = ["--vars", "{duckscore_partition_by: dt}", "--select", "duckscore"]
    for day in DAYS[:2]:
        write_day(project, day, thirds[day])
    dbt(project, "build", *partitioned)
    write_day(project, DAYS[2], thirds[DAYS[2]])
    shutil.rmtree(project / "logs" / f"dt={DAYS[0]}")
    dbt(project, "build", *partitioned)
    log_lines = (project / "logs" / "dbt.log").read_text(encoding="utf-8")
    assert "incremental model main.duckscore_fused" in log_lines
    compare_with_run(project / "scifact.duckdb", run_outputs, exclude="dt")
    day_of = {query: day for day, ids in thirds.items() for query in ids}
    with duckdb.connect(str(project / "scifact.duckdb"), read_only=True) as con:
        for model in [*TABLES, "duckscore_contract"]:
            placed = con.execute(
                f"SELECT DISTINCT query_id, CAST(dt AS VARCHAR) FROM {model}"
            ).fetchall()
            assert dict(placed) == day_of and len(placed) == len(day_of), model
    shutil.copytree(project / "logs" / f"dt={DAYS[2]}", project / "logs" / "dt=2024-01-04")
    refused = dbt(project, "build", *partitioned, check=False)
    assert refused.returncode != 0
    assert "is not in exactly one partition of dt" in refused.stdout


def test_a_log_with_sources_the_package_does_not_fuse_fails_a_test_by_name(
    tmp_path: Path,
) -> None:
    """Issue 47: the example's package (dense, sparse, summary) over a log whose sources are
    named otherwise. `dbt build` used to build five empty tables and pass; now the test
    duckscore_log_sources_known fails, its rows naming each source, and the models are skipped.
    The package generated again from the log (`--log`) builds, and equals `duckscore run`."""
    project = copy_example(tmp_path)
    renamed = project / "renamed.parquet"
    with duckdb.connect() as con:
        con.execute(
            "COPY (SELECT * REPLACE (CASE source WHEN 'dense' THEN 'vector' WHEN 'sparse' "
            "THEN 'bm25' ELSE source END AS source) "
            f"FROM '{SCIFACT / 'retrieval_log.parquet'}') TO '{renamed}'"
        )
    (project / "models" / "sources.yml").write_text(
        "version: 2\nsources:\n  - name: scifact\n    tables:\n      - name: retrieval_log\n"
        "        config:\n          meta:\n            external_location: renamed.parquet\n",
        encoding="utf-8",
    )
    refused = dbt(project, "build", check=False)
    assert refused.returncode != 0
    assert "Failure in test duckscore_log_sources_known" in refused.stdout, refused.stdout
    found = statuses(project)
    assert found["duckscore_log_sources_known"] == "fail"
    assert {found[model] for model in [*TABLES, "duckscore_contract"]} == {"skipped"}
    shown = dbt(project, "show", "--select", "duckscore_log_sources_known", "--output", "json")
    rows = json.loads(shown.stdout[shown.stdout.index("{") :])["show"]
    assert [(r["source"], r["hits"]) for r in rows] == [("bm25", 29987), ("vector", 30000)]
    assert all(
        r["problem"].startswith("not fused: the package fuses dense, sparse, summary") for r in rows
    )

    package = CliRunner().invoke(
        cli,
        ["-q", "dbt", "package", "--log", str(renamed), "--out", str(project / "duckscore_dbt")],
    )
    assert package.exit_code == 0, package.output
    dbt(project, "build", "--select", "duckscore")
    assert set(statuses(project).values()) <= {"success", "pass"}
    run = tmp_path / "run"
    done = CliRunner().invoke(cli, ["-q", "run", "--log", str(renamed), "--out", str(run)])
    assert done.exit_code == 0, done.output
    compare_with_run(project / "scifact.duckdb", run)


def test_a_learned_recipe_builds_in_dbt_and_equals_duckscore_run(tmp_path: Path) -> None:
    """Issue 48 §4: a recipe `duckscore learn` writes (fusion.method ltr, its trees compiled to
    SQL) packaged for dbt and built by the real dbt-core: every model equals `duckscore run`
    with the same recipe, with no Python model at run time."""
    log = str(SCIFACT / "retrieval_log.parquet")
    learned = tmp_path / "learned.yaml"
    taught = CliRunner().invoke(
        cli,
        ["-q", "learn", "--log", log, "--qrels", str(SCIFACT / "qrels.parquet"),
         "--folds", "2", "--trees", "8", "--leaves", "7", "--out", str(learned)],
    )  # fmt: skip
    assert taught.exit_code == 0, taught.output
    assert "method: ltr" in learned.read_text(encoding="utf-8")
    project = copy_example(tmp_path)
    recipe = ["--recipe", str(learned), "--allow-recipe-mismatch"]
    package = CliRunner().invoke(
        cli,
        ["-q", "dbt", "package", "--log", log, *recipe, "--out", str(project / "duckscore_dbt")],
    )
    assert package.exit_code == 0, package.output
    dbt(project, "build", "--select", "duckscore")
    assert set(statuses(project).values()) <= {"success", "pass"}
    run = tmp_path / "run"
    done = CliRunner().invoke(cli, ["-q", "run", "--log", log, *recipe, "--out", str(run)])
    assert done.exit_code == 0, done.output
    found = compare_with_run(project / "scifact.duckdb", run)
    assert found["duckscore_fused"]["rows"] == 40282


PLUGIN_RECIPE = ROOT / "examples" / "plugins" / "tanh_dismax.yaml"


def test_a_package_of_a_recipe_with_plugins_builds_and_equals_duckscore_run(
    tmp_path: Path,
) -> None:
    """The example project with its package made from the plugin recipe (docs/fuse.md,
    "Components and plugins"): dbt builds it, and every model equals `duckscore run` with it."""
    project = tmp_path / "examples" / "dbt_scifact"
    shutil.copytree(
        EXAMPLE,
        project,
        ignore=shutil.ignore_patterns("target", "logs", "dbt_packages", "*.duckdb", "*.wal"),
    )
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures", target_is_directory=True)
    shutil.rmtree(project / "duckscore_dbt")
    log = str(SCIFACT / "retrieval_log.parquet")
    chosen = ["--recipe", str(PLUGIN_RECIPE), "--allow-recipe-mismatch"]
    for args in (
        ["dbt", "package", "--log", log, *chosen, "--out", str(project / "duckscore_dbt")],
        ["run", "--log", log, *chosen, "--out", str(tmp_path / "run")],
    ):
        done = CliRunner().invoke(cli, ["-q", *args])
        assert done.exit_code == 0, done.output
    dbt(project, "deps")
    dbt(project, "build")
    found = compare_with_run(project / "scifact.duckdb", tmp_path / "run")
    assert found["duckscore_fused"]["rows"] == 40282
