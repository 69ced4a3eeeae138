"""`duckscore fuse` and `duckscore run` on the SciFact log and on small logs."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.connection import EngineSettings
from duckscore.core.errors import DuckscoreError, InputError, PolicyError
from duckscore.fusion.contract import MAX_SCORE
from duckscore.fusion.pipeline import fuse
from duckscore.fusion.recipe import FUSIONS, MAX_WEIGHT, NORMALIZERS
from duckscore.fusion.stages import STAGES as FUSE_STAGES
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run

from ..helpers import SCIFACT

LOG = SCIFACT / "retrieval_log.parquet"
# every method but ltr, which fuses with a model a recipe carries (tests/fuse/test_ltr.py)
FORMULAS = [method for method in FUSIONS if method != "ltr"]


@pytest.fixture(scope="module")
def canonical(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("canonical") / "out"
    fuse(LOG, out, "canonical_rrf")
    return pd.read_parquet(out / "fused.parquet")


@pytest.fixture(scope="module")
def log() -> pd.DataFrame:
    return pd.read_parquet(LOG)


@pytest.fixture(scope="module")
def small_log(log: pd.DataFrame) -> pd.DataFrame:
    """The first 30 queries: enough for every stage, a tenth of the time."""
    return log[log["query_id"].isin(sorted(log["query_id"].unique())[:30])]


def fused(
    log_input,
    tmp_path: Path,
    recipe: str = "canonical_rrf",
    sets: list[str] | None = None,
    settings: EngineSettings | None = None,
) -> pd.DataFrame:
    out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
    fuse(log_input, out, recipe, sets, settings)
    return pd.read_parquet(out / "fused.parquet")


def test_canonical_rrf_reproduces_the_scifact_reference(canonical: pd.DataFrame) -> None:
    reference = pd.read_parquet(SCIFACT / "reference_rrf_k60.parquet")
    merged = reference.merge(
        canonical,
        left_on=["query_id", "parent_id"],
        right_on=["query_id", "item_id"],
        how="outer",
        indicator=True,
    )
    assert (merged["_merge"] == "both").all() and len(merged) == 40282
    assert (merged["rank_x"] == merged["rank_y"]).all()
    assert (merged["rrf_score"] - merged["fused_score"]).abs().max() < 1e-15


def test_contributions_explain_every_fused_score(canonical: pd.DataFrame) -> None:
    for row in canonical.head(500).itertuples():
        parts = list(row.contributions)
        assert len(parts) == row.n_sources
        assert [p["source"] for p in parts] == sorted(p["source"] for p in parts)
        assert abs(sum(p["contribution"] for p in parts) - row.fused_score) < 1e-15
        for p in parts:
            assert p["contribution"] == pytest.approx(1 / (60 + p["rank"]), abs=1e-18)


def test_ranks_derived_from_scores_when_the_log_has_none(
    log: pd.DataFrame, canonical: pd.DataFrame, tmp_path: Path
) -> None:
    without_rank = fused(log.drop(columns=["rank"]), tmp_path)
    pd.testing.assert_frame_equal(
        without_rank[["query_id", "item_id", "fused_score", "rank"]],
        canonical[["query_id", "item_id", "fused_score", "rank"]],
    )


def test_distance_sources_are_converted(log: pd.DataFrame, tmp_path: Path) -> None:
    # 1 - cosine as a distance; a max aligner and min-max are shift-invariant, so the fused
    # scores must equal those of the similarities
    sets = ["sources.dense.normalize=minmax", "fusion.method=weighted_sum"]
    plain = fused(log, tmp_path, "canonical_rrf", sets)
    flipped = log.assign(score=lambda d: d["score"].where(d["source"] != "dense", 1 - d["score"]))
    as_distance = fused(flipped, tmp_path, "canonical_rrf", sets + ["sources.dense.distance=true"])
    assert as_distance["item_id"].tolist() == plain["item_id"].tolist()
    assert (as_distance["fused_score"] - plain["fused_score"]).abs().max() < 1e-9


def test_top_k_cuts_each_source(log: pd.DataFrame, tmp_path: Path) -> None:
    out = fused(log, tmp_path, "canonical_rrf", ["sources.sparse={top_k: 10}"])
    ranks = [p["rank"] for parts in out["contributions"] for p in parts if p["source"] == "sparse"]
    assert max(ranks) <= 10


def test_independent_of_row_order_and_threads(small_log: pd.DataFrame, tmp_path: Path) -> None:
    sets = ["fusion.method=weighted_sum", "source_defaults.normalize=zscore", "aligner.method=sum"]
    first = fused(small_log, tmp_path, "hybrid_v1", sets, EngineSettings(threads=1))
    shuffled = small_log.sample(frac=1.0, random_state=7).reset_index(drop=True)
    second = fused(shuffled, tmp_path, "hybrid_v1", sets, EngineSettings(threads=2))
    pd.testing.assert_frame_equal(
        first.drop(columns=["contributions", "best_provenance"]),
        second.drop(columns=["contributions", "best_provenance"]),
    )


@pytest.mark.parametrize("normalizer", [n for n in NORMALIZERS if n != "bounds"])
def test_every_normaliser_runs_on_scifact(
    normalizer: str, small_log: pd.DataFrame, tmp_path: Path
) -> None:
    out = fused(
        small_log,
        tmp_path,
        "hybrid_v1",
        [f"source_defaults.normalize={normalizer}", "fusion.method=weighted_sum"],
    )
    assert out["fused_score"].notna().all()
    assert (
        out.groupby("query_id")["rank"]
        .apply(lambda r: sorted(r) == list(range(1, len(r) + 1)))
        .all()
    )


@pytest.mark.parametrize(
    ("normalizer", "method"),
    [*((n, "weighted_sum") for n in NORMALIZERS), *(("none", m) for m in FORMULAS)],
)
def test_the_log_range_fuses_finite(normalizer: str, method: str, tmp_path: Path) -> None:
    """Scores at the ends of the log's range (MAX_SCORE), at the largest weight: every normaliser
    and fusion method gives finite values (at 1.7e308 minmax's range and zscore's variance
    overflowed to NaN)."""
    log = pd.DataFrame(
        {
            "query_id": "q",
            "source": ["a", "a", "a", "b", "b", "b"],
            "item_id": ["x", "y", "z", "x", "y", "z"],
            "parent_id": ["x", "y", "z", "x", "y", "z"],
            "score": [MAX_SCORE, 0.0, -MAX_SCORE, -MAX_SCORE, MAX_SCORE, MAX_SCORE],
        }
    )
    sets = [
        f"source_defaults.normalize={normalizer}",
        f"fusion.method={method}",
        f"source_defaults.weight={MAX_WEIGHT}",
        "normalizer_params.bounds=[-1e100, 1e100]",
    ]
    out = fused(log, tmp_path, "hybrid_v1", sets)
    assert len(out) == 3
    assert np.isfinite(out["fused_score"].dropna()).all() and out["fused_score"].notna().any()


@pytest.mark.parametrize(
    "distance",
    [
        ["source_defaults.distance=true"],  # every source discovered, each a distance
        ["sources.a.distance=true"],  # a declared one
        ["source_defaults.distance=true", "sources.a.distance=false"],  # b discovered, a not
    ],
)
def test_a_rank_only_distance_source_keeps_its_order(distance: list[str], tmp_path: Path) -> None:
    """A rank is best-first whatever a source's scores are: in a log without scores, `distance`
    changes nothing (it used to turn -rank into +rank, reversing the list)."""
    log = pd.DataFrame(
        {
            "query_id": "q",
            "source": ["a", "a", "a", "b", "b"],
            "item_id": ["x", "y", "z", "y", "x"],
            "parent_id": ["x", "y", "z", "y", "x"],
            "rank": [1, 2, 3, 1, 2],
        }
    )
    sets = ["source_defaults.normalize=minmax", "fusion.method=weighted_sum"]
    plain = fused(log, tmp_path, "hybrid_v1", sets)
    # minmax of -rank: a x 1, y .5, z 0; b y 1, x 0
    assert list(zip(plain["item_id"], plain["fused_score"])) == [("y", 1.5), ("x", 1.0), ("z", 0.0)]
    far = fused(log, tmp_path, "hybrid_v1", sets + distance)
    columns = ["item_id", "fused_score", "rank"]
    pd.testing.assert_frame_equal(far[columns], plain[columns])


@pytest.mark.parametrize("method", FORMULAS)
@pytest.mark.parametrize("order", ["before_fusion", "after_fusion"])
def test_every_fusion_method_runs_on_scifact(
    method: str, order: str, small_log: pd.DataFrame, tmp_path: Path
) -> None:
    out = fused(
        small_log,
        tmp_path,
        "hybrid_v1",
        [f"fusion.method={method}", f"aligner.order={order}", "source_defaults.normalize=minmax"],
    )
    assert out["query_id"].nunique() == 30
    assert (
        out.groupby("query_id")["rank"]
        .apply(lambda r: sorted(r) == list(range(1, len(r) + 1)))
        .all()
    )


def test_block_target_fuses_items(log: pd.DataFrame, tmp_path: Path) -> None:
    out = fused(
        log[log["query_id"] == "1"], tmp_path, "canonical_rrf", ["target_granularity=block"]
    )
    assert out["item_id"].str.contains(":").any()


def test_query_analyzer_boosts_matching_queries(log: pd.DataFrame, tmp_path: Path) -> None:
    rules = '[{match: "(?i)cancer", boost: {sparse: 2.0}}]'
    out = fused(
        log,
        tmp_path,
        "canonical_rrf",
        ["query_analyzer.enabled=true", f"query_analyzer.rules={rules}"],
    )
    texts = log.groupby("query_id")["query_text"].first()
    for row in out.head(2000).itertuples():
        for p in row.contributions:
            expected = (
                2.0 if p["source"] == "sparse" and "cancer" in texts[row.query_id].lower() else 1.0
            )
            assert p["weight"] == expected


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["sources.nosuch.weight=1"], "sources.nosuch is not in the log"),
        (["fusion.method=borda_count"], "'borda_count' is not one of"),
        (["source_defaults.normalize=minmaxx"], "'minmaxx' is not one of"),
        (["sources.dense.weight=-1"], "sources.dense.weight: -1 is outside [0, 1e+09]"),
        (
            [
                "sources.dense.weight=1000",
                "query_analyzer.enabled=true",
                "query_analyzer.rules=[{match: x, boost: {dense: 1e6}}, {match: y, boost: {dense: 2}}]",
            ],
            "sources.dense.weight times its query_analyzer boosts can reach 2e+09, above 1e+09",
        ),
        (["fusion.k=0"], "fusion.k: 0 is outside (0, inf]"),
        (
            ["fusion.kk=1"],
            "--set-recipe fusion.kk: unknown key 'fusion.kk' (did you mean 'fusion.k'?)",
        ),
        (["fusion"], "--set-recipe 'fusion': expected key=value"),
        (
            ["source_defaults.normalize=bounds"],
            "normalizer_params.bounds is required by source_defaults.normalize: bounds",
        ),
        (
            ["query_analyzer.enabled=true", "query_analyzer.rules=[{match: x, boost: {nope: 2}}]"],
            "query_analyzer boosts unknown source 'nope'",
        ),
        # every fused score used to be NULL, exit 0
        (
            ["fusion.method=arithmetic_mean", "source_defaults.weight=0"],
            "every source's weight is 0, so arithmetic_mean gives no item a score",
        ),
        (["source_defaults.weight=0"], "every source's weight is 0, so rrf"),
        # DuckDB failed mid-run, naming sql/fuse/fused.sql instead of the rule
        (
            [
                "query_analyzer.enabled=true",
                'query_analyzer.rules=[{match: ok, boost: {}}, {match: "(unclosed", boost: {dense: 2}}]',
            ],
            "query_analyzer.rules[1].match '(unclosed' is not a valid RE2 pattern (missing ):",
        ),
    ],
)
def test_bad_recipes_name_the_key(sets: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as raised:
        fuse(LOG, tmp_path / "out", "canonical_rrf", sets)
    assert message in str(raised.value)
    assert not (tmp_path / "out").exists()


def _small_log() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query_id": ["q"] * 4,
            "source": ["a", "a", "b", "b"],
            "item_id": ["x", "y", "x", "z"],
            "parent_id": ["x", "y", "x", "z"],
            "score": [2.0, 1.0, 0.9, 0.8],
            "rank": [1, 2, 1, 2],
        }
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.drop(columns=["score", "rank"]), "needs a score or a rank column"),
        (lambda d: d.assign(score=[2.0, float("nan"), 0.9, 0.8]), "column 'score' is"),
        # beyond the range every normaliser keeps finite (test_the_log_range_fuses_finite)
        (lambda d: d.assign(score=[1.0000001e100, 1, 0.9, 0.8]), "'score' is above 1e+100"),
        (lambda d: d.assign(score=[2.0, 1, 0.9, -1.7e308]), "'score' is below -1e+100"),
        (lambda d: pd.concat([d, d.iloc[[0]]]), "duplicate (query_id, source, item_id)"),
        (lambda d: d.assign(rank=[2, 3, 1, 2]), "smallest rank is 2, not 1"),
        (lambda d: d.assign(rank=[1, 1, 1, 2]), "rank values repeat"),
        (lambda d: d.assign(rank=[0, 1, 1, 2]), "column 'rank' is below 1"),
        # an unknown granularity used to count as no chunk: coverage_ratio silently 0
        (
            lambda d: d.assign(granularity=["doc", "chapter", "doc", "block"]),
            "column 'granularity' is not one of doc, block",
        ),
    ],
)
def test_bad_logs_name_the_column(change, message: str, tmp_path: Path) -> None:
    with pytest.raises(InputError) as raised:
        fuse(change(_small_log()), tmp_path / "out", "canonical_rrf")
    assert message in str(raised.value)
    assert not (tmp_path / "out").exists()


def _long_list(ranks: list[int]) -> pd.DataFrame:
    """One (query, source) list with the given ranks: long lists pass the >64 branch of the check."""
    return pd.DataFrame(
        {
            "query_id": "q",
            "source": "a",
            "item_id": [f"i{n}" for n in range(len(ranks))],
            "parent_id": "p",
            "score": 1.0,
            "rank": ranks,
        }
    )


@pytest.mark.parametrize(
    ("ranks", "message"),
    [
        (list(range(1, 101)), None),
        ([1, 3, 70, 200], None),
        (list(range(1, 100)) + [99], "1 rank values repeat"),
        (list(range(1, 65)) + [64], "1 rank values repeat"),
        ([1, 66, 66, 66], "2 rank values repeat"),
    ],
)
def test_rank_check_is_exact_on_long_lists(
    ranks: list[int], message: str | None, tmp_path: Path
) -> None:
    if message is None:
        assert len(fused(_long_list(ranks), tmp_path)) == 1
        return
    with pytest.raises(InputError, match=message):
        fuse(_long_list(ranks), tmp_path / "out", "canonical_rrf")


def test_rank_only_log_fuses_by_rank(tmp_path: Path) -> None:
    out = fused(_small_log().drop(columns=["score"]), tmp_path)
    assert out.set_index("item_id")["fused_score"].to_dict() == pytest.approx(
        {"x": 2 / 61, "y": 1 / 62, "z": 1 / 62}
    )
    assert out["item_id"].tolist() == ["x", "y", "z"]


def test_cli_fuse_and_run(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "-q",
            "fuse",
            "--log",
            str(LOG),
            "--out",
            str(tmp_path / "f"),
            "--recipe",
            "canonical_rrf",
            "--set-recipe",
            "fusion.k=20",
        ],
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "f" / "manifest.json").read_text())
    assert manifest["recipe_id"].startswith("canonical_rrf+") and manifest["fusion"]["k"] == 20
    assert set(manifest["sources"]) == {"dense", "sparse", "summary"}
    assert manifest["target_granularity"] == "doc" and "created_at" in manifest
    result = runner.invoke(cli, ["-q", "run", "--log", str(LOG), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    names = {p.name for p in (tmp_path / "r").iterdir()}
    assert {
        "fused.parquet",
        "parent_features.parquet",
        "parents.parquet",
        "queries.parquet",
        "contract.jsonl",
        "manifest.json",
        "sql",
    } <= names
    bad = runner.invoke(
        cli,
        [
            "-q",
            "fuse",
            "--log",
            str(LOG),
            "--out",
            str(tmp_path / "b"),
            "--set-recipe",
            "fusion.method=nope",
        ],
    )
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1 and not (tmp_path / "b").exists()


def test_no_features_is_fusion_alone(canonical: pd.DataFrame, tmp_path: Path) -> None:
    """`fuse --no-features` (issue 34): the same fused.parquet, no parent_features.parquet."""
    out = tmp_path / "f"
    result = CliRunner().invoke(
        cli,
        ["-q", "fuse", "--log", str(LOG), "--out", str(out), "--recipe", "canonical_rrf",
         "--no-features"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["fused.parquet", "manifest.json", "sql"]
    pd.testing.assert_frame_equal(pd.read_parquet(out / "fused.parquet"), canonical)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["parent_features"] is False and manifest["explanations"] is True
    assert "parent_features.parquet" not in manifest["outputs"]
    assert not any("parent_features" in p.name for p in (out / "sql").rglob("*"))
    done = fuse(LOG, tmp_path / "g", "canonical_rrf", features=False)
    assert done.parents == 0 and done.fused_rows == len(canonical)


def test_printed_fuse_sql_matches_the_runner(canonical: pd.DataFrame) -> None:
    result = CliRunner().invoke(cli, ["sql", "fuse", "--recipe", "canonical_rrf"])
    assert result.exit_code == 0, result.output
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW retrieval_log AS SELECT *, NULL::VARCHAR AS snippet FROM read_parquet('{LOG}')"
    )
    printed = con.execute(result.output).df()
    assert printed["item_id"].tolist() == canonical["item_id"].tolist()
    assert printed["fused_score"].tolist() == canonical["fused_score"].tolist()


def test_run_outputs_score_the_fused_parents(tmp_path: Path) -> None:
    result = run(LOG, tmp_path / "r", Job(recipe="canonical_rrf"))
    assert result.queries == 300
    features = pd.read_parquet(tmp_path / "r" / "parent_features.parquet")
    parents = pd.read_parquet(tmp_path / "r" / "parents.parquet")
    assert len(features) == len(parents) == 40282


def test_fuse_then_eval_reproduces_the_reference_metrics(canonical: pd.DataFrame) -> None:
    from duckscore.metrics.retrieval import evaluate

    reference = json.loads((SCIFACT / "reference_metrics.json").read_text())["metrics_canonical"][
        "rrf_k60"
    ]
    means, _ = evaluate(canonical, SCIFACT / "qrels.parquet", "ndcg@10,recall@100")
    assert means["ndcg@10"] == pytest.approx(reference["ndcg@10"], abs=1e-15)
    assert means["recall@100"] == pytest.approx(reference["recall@100"], abs=1e-15)


@pytest.mark.parametrize("stage", FUSE_STAGES)
def test_each_fuse_stage_runs_on_its_own(stage: str) -> None:
    result = CliRunner().invoke(cli, ["sql", "fuse", "--recipe", "canonical_rrf", "--stage", stage])
    assert result.exit_code == 0, result.output
    con = duckdb.connect()
    con.execute(
        f"CREATE VIEW retrieval_log AS SELECT *, NULL::VARCHAR AS snippet "
        f"FROM read_parquet('{LOG}') WHERE query_id IN ('1', '3')"
    )
    assert con.execute(f"SELECT count(*) FROM ({result.output})").fetchall()[0][0] > 0


@pytest.mark.parametrize("stage", ["ltr_features", "model_inputs", "ltr_scored"])
def test_a_learned_stage_of_a_recipe_without_a_model_is_refused(stage: str) -> None:
    result = CliRunner().invoke(cli, ["sql", "fuse", "--recipe", "canonical_rrf", "--stage", stage])
    assert result.exit_code == 2
    assert f"--stage {stage}: a stage of a learned recipe" in result.output
    assert "canonical_rrf fuses by rrf" in result.output


def test_a_failed_write_names_the_file_and_keeps_the_thread_setting(tmp_path: Path) -> None:
    from duckscore.core.session import copy_to

    con = duckdb.connect(config={"threads": 2})
    assert copy_to(con, "SELECT 1 AS a", tmp_path / "ok.jsonl") == 1
    with pytest.raises(DuckscoreError, match=r"writing out\.jsonl: DuckDB failed"):
        copy_to(con, "SELECT 1 AS a", tmp_path / "missing" / "out.jsonl")
    assert con.execute("SELECT current_setting('threads')").fetchall()[0][0] == 2
