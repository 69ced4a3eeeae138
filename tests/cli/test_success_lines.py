"""Success is not silent: `fuse`, `score`, `run`, `answers` and `bids` end with one line on
stderr — what they did, where the outputs are — that -q and --no-progress silence; stdout stays
empty. And a typo in --set-recipe is reported as --set-recipe on every command that takes it."""

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
        "score": ["score", "--features", str(tmp_path / "features.csv")],
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


@pytest.mark.parametrize("name", list(SUCCESS))
def test_success_prints_one_line_on_stderr(name: str, tmp_path: Path) -> None:
    result = invoke(*command(name, tmp_path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()  # bids adds its failed gates (tests/bids/test_bids.py)
    assert len(lines) == (2 if name == "bids" else 1), result.stderr
    first = lines[0]
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
