"""The default a user ships without labels (issue 32): on SciFact and on CISI (another domain),
`duckscore run` with no --policy and no --recipe gives a best parent relevant at least as often
as the fused ranking's own top-1 (within 0.02), more than one confidence level, and a HITL share
that the policy's own R_hitl explains; the seed's overall_v1 is warned about on SciFact.

Relevance comes from the judgments here, by pandas, not from the code's metrics."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.common.defaults import DEFAULT_POLICY, DEFAULT_RECIPE
from duckscore.core.resources import policies_dir

from ..helpers import FIXTURES

pytestmark = pytest.mark.slow

COLLECTIONS = ("scifact", "cisi")


def run_default(collection: str, out: Path, *extra: str) -> tuple[pd.DataFrame, str]:
    log = FIXTURES / collection / "retrieval_log.parquet"
    result = CliRunner().invoke(cli, ["run", "--log", str(log), "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return pd.read_parquet(out / "queries.parquet"), result.stderr


def relevant_share(frame: pd.DataFrame, column: str, qrels: pd.DataFrame) -> float:
    """Share of judged queries whose `column` parent is judged relevant."""
    judged = frame[frame["query_id"].isin(qrels["query_id"])]
    relevant = set(zip(qrels["query_id"], qrels["parent_id"]))
    hits = [(q, p) in relevant for q, p in zip(judged["query_id"], judged[column])]
    return sum(hits) / len(judged)


@pytest.mark.parametrize("collection", COLLECTIONS)
def test_the_default_picks_parents_as_well_as_the_fused_ranking(
    collection: str, tmp_path: Path
) -> None:
    queries, stderr = run_default(collection, tmp_path / "out")
    qrels = pd.read_parquet(FIXTURES / collection / "qrels.parquet")
    qrels = qrels[qrels["relevance"] > 0]
    fused = pd.read_parquet(tmp_path / "out" / "fused.parquet")
    log = pd.read_parquet(FIXTURES / collection / "retrieval_log.parquet")
    parents = log.drop_duplicates("item_id").set_index("item_id")["parent_id"]
    top1 = fused[fused["rank"] == 1].assign(
        top1_parent=lambda f: f["item_id"].map(parents).fillna(f["item_id"])
    )
    best = relevant_share(queries, "best_parent_id", qrels)
    fused_top1 = relevant_share(top1, "top1_parent", qrels)
    assert best >= fused_top1 - 0.02, (best, fused_top1)
    assert queries["confidence_level"].nunique() > 1
    assert "warning" not in stderr


@pytest.mark.parametrize("collection", COLLECTIONS)
def test_the_hitl_share_is_the_policys_own_threshold(collection: str, tmp_path: Path) -> None:
    queries, stderr = run_default(collection, tmp_path / "out")
    r_hitl = yaml.safe_load((policies_dir("score") / f"{DEFAULT_POLICY}.yaml").read_text())[
        "parameters"
    ]["R_hitl"]
    expected = int((queries["top2_ratio"].fillna(0.0) >= r_hitl).sum())
    assert int(queries["need_hitl"].sum()) == expected
    assert f"need_hitl {expected:,} (top-2 ratio >= R_hitl {r_hitl:.4g})" in stderr


def test_the_default_recipe_is_the_default_policys(tmp_path: Path) -> None:
    run_default("scifact", tmp_path / "out")
    manifest = yaml.safe_load((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["policy"]["recipe_id"] == DEFAULT_RECIPE
    assert manifest["score_policy"]["score_policy_version"] == DEFAULT_POLICY


def test_the_seeds_reference_policy_is_warned_about(tmp_path: Path) -> None:
    """overall_v1 rates all of SciFact high and sends 268 of 300 to a human: both are said."""
    queries, stderr = run_default("scifact", tmp_path / "out", "--policy", "overall_v1")
    assert (queries["confidence_level"] == "high").all()
    lines = [line for line in stderr.splitlines() if line.startswith("duckscore: warning:")]
    assert len(lines) == 2, stderr
    assert "rates all 300 queries high" in lines[0]
    assert f"asks a human about {int(queries['need_hitl'].sum())} of 300 queries" in lines[1]
    quiet = CliRunner().invoke(
        cli,
        ["-q", "run", "--log", str(FIXTURES / "scifact" / "retrieval_log.parquet"),
         "--out", str(tmp_path / "quiet"), "--policy", "overall_v1"],
    )  # fmt: skip
    assert quiet.exit_code == 0 and quiet.stderr == ""
