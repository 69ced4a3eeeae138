"""Success is not silent: `fuse`, `score`, `run`, `answers` and `bids` end with one line on
stderr — what they did, where the outputs are — and `score` and `run` add a line of how the policy
decided the queries; -q and --no-progress silence both; stdout stays empty. And a typo in
--set-recipe is reported as --set-recipe on every command that takes it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli

from ..helpers import FIXTURES

LOG = """\
query_id,source,item_id,parent_id,score,block_type,total_chunks
q1,bm25,A:1,A,12.0,body,4
q1,bm25,B:0,B,9.5,intro,2
q2,bm25,A:0,A,7.0,intro,4
q1,vec,B:1,B,0.79,body,2
q1,vec,A:1,A,0.65,body,4
q2,vec,C:0,C,0.20,intro,1
"""
FEATURES = """\
query_id,parent_id,rrf_sum,max_score,coverage,total_chunks,coverage_ratio
q1,P123,0.05,0.9,3,9,0.5
q1,P456,0.03,0.7,2,4,0.5
q2,P789,0.01,0.2,1,19,0.05
"""
ANSWERS = FIXTURES / "answers"


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def command(name: str, tmp_path: Path) -> list[str]:
    """The arguments of a successful run of `name`, writing to tmp_path/out."""
    (tmp_path / "log.csv").write_text(LOG, encoding="utf-8")
    (tmp_path / "features.csv").write_text(FEATURES, encoding="utf-8")
    log = ["--log", str(tmp_path / "log.csv"), "--recipe", "canonical_rrf"]
    return {
        "fuse": ["fuse", *log],
        "run": ["run", *log],
        # the seed's seven columns: overall_v1's, not the default overall_v3's (parent_rrf)
        "score": ["score", "--features", str(tmp_path / "features.csv"), "--policy", "overall_v1"],
        "answers": [
            "answers",
            *("--answers", str(ANSWERS / "answers.csv")),
            *("--citations", str(ANSWERS / "citations.csv")),
            *("--chunks", str(ANSWERS / "chunks.csv")),
        ],
        "bids": ["bids", "--input", str(FIXTURES / "bids" / "tender")],
    }[name] + ["--out", str(tmp_path / "out")]


SUCCESS = {
    "fuse": "fused 4 items from 6 hits of 2 sources into {out}/ "
    "(fused.parquet, parent_features.parquet, manifest.json, sql/)",
    "score": "scored 3 parents of 2 queries into {out}/ "
    "(parents.parquet, queries.parquet, contract.jsonl, manifest.json, sql/)",
    "run": "fused and scored 4 parents of 2 queries into {out}/ (fused.parquet, "
    "parent_features.parquet, parents.parquet, queries.parquet, contract.jsonl, manifest.json, "
    "sql/)",
    "answers": "scored 3 answers into {out}/ "
    "(answers.parquet, contract.jsonl, manifest.json, sql/)",
    "bids": "scored 4 supplier evaluations into {out}/ (contract.jsonl, evaluations.parquet, "
    "criteria.parquet, candidates.parquet, evidence.parquet, gates.json, and 8 more)",
}
# the second line of `score` and `run`: their decisions, by the numbers above.
# score, overall_v1 (per-query P10/P90, so of two parents the larger is 1 and the smaller 0, and a
# lone parent is 0): q1's P123 has strength 1, coverage 0.5·1 + 0.5·0.5, stability
# 0.5·(0.5 + 0.5·1), so 1^0.5 · 0.75^0.3 · 0.5^0.2 = 0.7986 >= T_high 0.68, and P456 strength 0,
# so 0 and ratio 0; q2's lone P789 strength 0, so 0: low, no second parent, web fallback.
# run, canonical_rrf then overall_v3 (0.7 strength, 0.3 separation): in q1 A and B are ranks 1
# and 2 in one source and 2 and 1 in the other, so parent_rrf 1/61 + 1/62 = 0.0325 each, by
# overall_v3's stored bounds (0.0297, 0.0492) 0.1437, and 0.1437^0.7 · 1^0.3 = 0.257 < T_low;
# their separations 0.5 + 0.5·(12 − 9.5)/12/2 and 0.5 + 0.5·(0.79 − 0.65)/0.79/2 give a top-2
# ratio (0.5443/0.5521)^0.3 = 0.996: HITL. In q2 A and C are each first in one source, 1/61 is
# below the bounds, so both 0: low, no ratio, web fallback.
DECISIONS = {
    "score": "2 queries: high 1, medium 0, low 1 (by best score: T_low 0.35, T_high 0.68); "
    "need_hitl 0 (top-2 ratio >= R_hitl 0.92); web_fallback 1 (low without HITL, or no candidate)",
    "run": "2 queries: high 0, medium 0, low 2 (by best score: T_low 0.8202, T_high 0.8544); "
    "need_hitl 1 (top-2 ratio >= R_hitl 0.9668); web_fallback 1 (low without HITL, or no "
    "candidate)",
}


@pytest.mark.parametrize("name", list(SUCCESS))
def test_success_prints_one_line_on_stderr(name: str, tmp_path: Path) -> None:
    result = invoke(*command(name, tmp_path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()  # bids adds its failed gates (tests/bids/test_bids.py)
    assert len(lines) == (2 if name in ("bids", *DECISIONS) else 1), result.stderr
    first = lines[0]
    if name in DECISIONS:
        assert lines[1] == "duckscore: " + DECISIONS[name]
    assert first == "duckscore: " + SUCCESS[name].format(out=tmp_path / "out")
    for file in first.split("(", 1)[1].rstrip(")").split(", ")[:-1]:
        assert (tmp_path / "out" / file).exists(), file


@pytest.mark.parametrize("quiet", ["-q", "--quiet", "--no-progress"])
@pytest.mark.parametrize("name", ["fuse", "score", "run", "answers"])
def test_quiet_silences_the_success_line(name: str, quiet: str, tmp_path: Path) -> None:
    result = invoke(quiet, *command(name, tmp_path))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize(
    "args",
    [
        ["fuse", "--log", str(FIXTURES / "scifact" / "retrieval_log.parquet")],
        ["run", "--log", str(FIXTURES / "scifact" / "retrieval_log.parquet"), "--set", "alpha=0.7"],
        ["sql", "fuse"],
        [
            "calibrate",
            *("--log", str(FIXTURES / "scifact" / "retrieval_log.parquet")),
            *("--labels", "labels.parquet"),
        ],
    ],
    ids=["fuse", "run", "sql fuse", "calibrate"],
)
def test_a_set_recipe_typo_names_set_recipe(args: list[str], tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / ("out.yaml" if args[0] == "calibrate" else "out"))]
    result = invoke("-q", *args, "--set-recipe", "fusion.kk=3", *(out if args[0] != "sql" else []))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        "duckscore: error: --set-recipe fusion.kk: unknown key 'fusion.kk' "
        "(did you mean 'fusion.k'?)\n"
    )
    assert not list(tmp_path.iterdir())
