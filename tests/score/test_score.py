"""`duckscore score` end to end on the SciFact-derived parent features."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import jsonschema
import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.connection import EngineSettings
from duckscore.core.resources import contract_schema
from duckscore.core.session import Session
from duckscore.fusion.pipeline import fuse
from duckscore.scoring.pipeline import score
from duckscore.scoring.stages import STAGES as SCORE_STAGES

from ..helpers import SCIFACT

SCHEMA = json.loads(contract_schema("score").read_text())


@pytest.fixture(scope="module")
def features(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("features") / "parent_features.parquet"
    fuse(SCIFACT / "retrieval_log.parquet", path.parent / "fused", "canonical_rrf")
    (path.parent / "fused" / "parent_features.parquet").rename(path)
    return path


@pytest.fixture(scope="module")
def scored(features: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("scored") / "out"
    score(features, out)
    return out


def read_contract(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "contract.jsonl").read_text().splitlines()]


def test_every_contract_line_matches_the_schema(scored: Path) -> None:
    lines = read_contract(scored)
    assert len(lines) == 300
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for line in lines:
        validator.validate(line)
    assert [line["query_id"] for line in lines] == sorted(line["query_id"] for line in lines)


def test_schema_rejects_a_malformed_line(scored: Path) -> None:
    line = read_contract(scored)[0]
    for broken in (
        {**line, "confidence_level": "certain"},
        {**line, "extra": 1},
        {k: v for k, v in line.items() if k != "need_hitl"},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, SCHEMA)


def test_outputs_agree_with_each_other(scored: Path, features: Path) -> None:
    parents = pd.read_parquet(scored / "parents.parquet")
    queries = pd.read_parquet(scored / "queries.parquet")
    contract = read_contract(scored)
    assert len(parents) == len(pd.read_parquet(features))
    best = parents[parents["rank"] == 1].set_index("query_id")
    for line in contract:
        q = line["query_id"]
        assert line["best_parent_id"] == best.loc[q, "parent_id"]
        assert line["best_overall_score"] == best.loc[q, "overall_score"]
        assert 1 <= len(line["top_parents"]) <= 5
        assert [t["parent_id"] for t in line["top_parents"]] == parents[
            parents["query_id"] == q
        ].sort_values("rank")["parent_id"].head(5).tolist()
    assert queries["query_id"].tolist() == [line["query_id"] for line in contract]
    assert queries["need_hitl"].tolist() == [line["need_hitl"] for line in contract]


def test_manifest_records_policy_sql_and_inputs(scored: Path, features: Path) -> None:
    import hashlib

    manifest = json.loads((scored / "manifest.json").read_text())
    assert manifest["policy"]["score_policy_version"] == "overall_v3"
    assert manifest["policy"]["parameters"]["alpha"] == 1.0
    [file] = manifest["inputs"]["features"]["files"]
    assert file["sha256"] == hashlib.sha256(features.read_bytes()).hexdigest()
    for template, record in manifest["sql"].items():
        text = (scored / "sql" / template.replace("/", "_")).read_text()
        assert record["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert manifest["outputs"]["contract.jsonl"]["rows"] == 300


def test_printed_sql_gives_the_same_contract_as_the_runner(scored: Path, features: Path) -> None:
    result = CliRunner().invoke(cli, ["sql", "score"])
    assert result.exit_code == 0, result.output
    con = duckdb.connect()
    con.execute(f"CREATE VIEW parent_features AS SELECT * FROM read_parquet('{features}')")
    printed = con.execute(result.output).df()
    runner = pd.read_parquet(scored / "queries.parquet")
    assert printed["query_id"].tolist() == runner["query_id"].tolist()
    assert printed["best_overall_score"].tolist() == runner["best_overall_score"].tolist()
    assert printed["confidence_level"].tolist() == runner["confidence_level"].tolist()


@pytest.mark.parametrize("stage", SCORE_STAGES)
def test_each_stage_runs_on_its_own(stage: str, features: Path, tmp_path: Path) -> None:
    mapped = tmp_path / "mapped.yaml"  # `probabilities` is a stage of a policy with a map,
    mapped.write_text(  # `query_actions` of one with diagnostics
        "score_policy_version: mapped\nextends: overall_v1\nparameters:\n  probability:\n"
        "    {method: platt, platt: {intercept: -3.0, best_overall_score: 5.0, top2_ratio: 0.0},\n"
        "     levels_by: score, p_low: 0.5, p_high: 0.85}\n"
        "  diagnostics: {ambiguous_candidate: {actions: [clarify], need_hitl: false}}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(cli, ["sql", "score", "--stage", stage, "--policy", str(mapped)])
    assert result.exit_code == 0, result.output
    con = duckdb.connect()
    con.execute(f"CREATE VIEW parent_features AS SELECT * FROM read_parquet('{features}')")
    rows = con.execute(f"SELECT count(*) FROM ({result.output})").fetchall()[0][0]
    # per query, per parent (ROLLUP-free stages only); query_actions: the queries with actions
    assert rows in (300, 301, 40282) or (stage == "query_actions" and 0 < rows <= 300)


def test_queries_without_candidates_fall_back_to_the_web(features: Path, tmp_path: Path) -> None:
    ids = pd.DataFrame({"query_id": ["1", "no-hits-α"]})
    out = tmp_path / "out"
    score(features, out, queries=ids, top_n=2)
    lines = {line["query_id"]: line for line in read_contract(out)}
    empty = lines["no-hits-α"]
    assert empty["best_parent_id"] is None and empty["best_overall_score"] is None
    assert empty["top_parents"] == [] and empty["web_fallback"] is True
    assert empty["confidence_level"] == "low" and empty["need_hitl"] is False
    assert len(lines) == 301
    assert all(len(line["top_parents"]) <= 2 for line in lines.values())


def test_threads_and_memory_settings_are_applied(
    features: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB's own settings, read in the run's session when it closes (after the SQL ran), and
    the manifest's record of them."""
    seen: list[tuple[str, str, str]] = []
    close = Session.close

    def read_settings_then_close(session: Session) -> None:
        seen.append(
            session.con.execute(
                "SELECT current_setting('threads')::VARCHAR, current_setting('memory_limit'), "
                "current_setting('temp_directory')"
            ).fetchone()
        )
        close(session)

    monkeypatch.setattr(Session, "close", read_settings_then_close)
    out = tmp_path / "out"
    spill = tmp_path / "spill"
    score(features, out, settings=EngineSettings(threads=1, memory_limit="500MB", temp_dir=spill))
    [(threads, memory_limit, temp_directory)] = seen
    assert threads == "1"
    assert memory_limit == "476.8 MiB"  # 500 MB = 500e6 bytes, shown in MiB
    assert Path(temp_directory).parent == spill  # the run's own folder under --temp-dir
    assert not Path(temp_directory).exists()  # removed with the session
    options = json.loads((out / "manifest.json").read_text())["options"]
    assert (options["threads"], options["memory_limit"], options["temp_dir"]) == (
        1,
        "500MB",
        str(spill),
    )


def test_overrides_reach_the_contract(features: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            "-q",
            "score",
            "--features",
            str(features),
            "--out",
            str(out),
            "--set",
            "T_high=0.99",
            "--set",
            "T_low=0.98",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = read_contract(out)
    assert all(line["thresholds_used"]["T_high"] == 0.99 for line in lines)
    assert lines[0]["score_policy_version"].startswith("overall_v3+")
    levels = {line["confidence_level"] for line in lines}
    assert "high" not in levels or all(
        line["best_overall_score"] >= 0.99 for line in lines if line["confidence_level"] == "high"
    )


def test_demo_derivation_matches_a_pandas_reimplementation(features: Path) -> None:
    """The documented derivation, recomputed independently with pandas groupby."""
    log = pd.read_parquet(SCIFACT / "retrieval_log.parquet")
    grouped = log.groupby(["query_id", "source"])["score"]
    low, high = grouped.transform("min"), grouped.transform("max")
    spread = high - low
    log["minmax"] = ((log["score"] - low) / spread.where(spread != 0)).fillna(1.0)
    log["rrf"] = 1.0 / (60 + log["rank"])
    blocks = log[log["granularity"] == "block"].drop_duplicates(
        ["query_id", "parent_id", "item_id"]
    )
    expected = log.groupby(["query_id", "parent_id"]).agg(
        rrf_sum=("rrf", "sum"),
        max_score=("minmax", "max"),
        coverage=("block_type", "nunique"),
        total_chunks=("total_chunks", "max"),
    )
    hit = blocks.groupby(["query_id", "parent_id"]).size().reindex(expected.index, fill_value=0)
    expected["coverage_ratio"] = (hit / expected["total_chunks"]).clip(upper=1.0)
    actual = pd.read_parquet(features).set_index(["query_id", "parent_id"]).sort_index()
    expected = expected.sort_index()
    assert actual.index.equals(expected.index)
    for column in ("rrf_sum", "max_score", "coverage", "total_chunks", "coverage_ratio"):
        pd.testing.assert_series_equal(
            actual[column].astype(float),
            expected[column].astype(float),
            rtol=1e-12,
            atol=1e-12,
            check_names=False,
        )


def test_policy_list_and_show() -> None:
    listed = CliRunner().invoke(cli, ["policy", "list"])
    assert listed.exit_code == 0 and listed.output.split() == [
        "overall_v1",
        "overall_v2",
        "overall_v3",
    ]
    shown = CliRunner().invoke(cli, ["policy", "show", "overall_v1", "--set", "alpha=0.7"])
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.output)
    assert record["parameters"]["alpha"] == 0.7 and record["overrides"] == {"alpha": 0.7}
    assert record["score_policy_version"].startswith("overall_v1+")
