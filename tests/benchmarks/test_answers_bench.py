"""The answers benchmark's pandas config (c) gives duckscore's answers.parquet, and `compare` notices
when it does not: on a small synthetic set and on hand-made edge cases, under both packaged policies."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from benchmarks.answers_pandas import compare, run_pandas
from benchmarks.synthetic_answers import generate
from duckscore.answering.pipeline import score_answers
from duckscore.core.connection import EngineSettings

INPUTS = ("answers", "citations", "chunks", "events")


def both(data: Path, tmp_path: Path, policy: str = "answer_v1") -> tuple[Path, Path]:
    tables = {name: data / f"{name}.parquet" for name in INPUTS}
    score_answers(
        tables["answers"],
        tables["citations"],
        tables["chunks"],
        tmp_path / "duckscore",
        policy=policy,
        events=tables["events"],
        settings=EngineSettings(threads=2),
    )
    run_pandas(data, tmp_path / "pandas", policy)
    return tmp_path / "duckscore" / "answers.parquet", tmp_path / "pandas" / "answers.parquet"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("answers_2k")
    generate(data, 2_000, seed=3)
    return data


@pytest.mark.parametrize("policy", ["answer_v1", "answer_v1_en"])
def test_a_synthetic_set_gives_the_same_answers(
    synthetic: Path, tmp_path: Path, policy: str
) -> None:
    assert compare(*both(synthetic, tmp_path, policy)) == []


EDGE_TEXTS = {
    "empty": "",
    "blank": " \n\n\t\n ",
    "short": "可能",
    "overlap": "这一点并不清楚，但确实清楚了。不确定性很多，较多一些。",
    "gap": "综合\n以上几点\n\n来看，答案明确。",
    "gap_empty": "综合来看。",
    "paragraphs": "\n\n第一段。\r\n\r\n第二段。\n \n\n第三段\n单行\n\n\n",
    "english": "MAY the mayor may_ act? It may. Maybe; may1 _may 可能may是. Sometimes some, a few few.",
    "phrases": "Taking all of this into account, it seems clear. takinginto account. In conclusion",
    "unicode": "É may 😀 may. Ärger: certainly certain uncertain.",
    "long": "数据。" * 700 + "\n\n总之，可能。",
}


@pytest.fixture(scope="module")
def edge_cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("answers_edge")
    ids = list(EDGE_TEXTS)
    pd.DataFrame(
        {
            "answer_id": ids,
            "query_id": ["q"] * len(ids),
            "answer_text": list(EDGE_TEXTS.values()),
            "retrieved_count": [0, 3, 40, 20, 10, 5, 1, 2, 7, 30, 0],
        }
    ).to_parquet(data / "answers.parquet")
    chunks = pd.DataFrame(
        [("overlap", f"c{i}", s) for i, s in enumerate([0.5, 0.5, 1.0, 0.0, 0.5, 0.25, 0.5])]
        + [("english", "b", 0.3), ("english", "a", 0.3), ("short", "x", 1.0), ("long", "y", 0.0)],
        columns=["answer_id", "chunk_id", "rerank_score"],
    )
    chunks.to_parquet(data / "chunks.parquet")
    citations = chunks[chunks["answer_id"].isin(["overlap", "english", "long"])][
        ["answer_id", "chunk_id"]
    ]
    citations.to_parquet(data / "citations.parquet")  # long: 1 citation, 0 retrieved (rate NULL)
    pd.DataFrame(
        {
            "answer_id": ["overlap", "overlap", "gap", "unicode", "unicode"],
            "severity": ["low", "medium", "high", "low", "low"],
        }
    ).to_parquet(data / "events.parquet")
    return data


@pytest.mark.parametrize("policy", ["answer_v1", "answer_v1_en"])
def test_edge_cases_give_the_same_answers(edge_cases: Path, tmp_path: Path, policy: str) -> None:
    assert compare(*both(edge_cases, tmp_path, policy)) == []


def test_compare_reports_a_changed_value_a_changed_list_and_a_missing_row(
    edge_cases: Path, tmp_path: Path
) -> None:
    duckscore_file, pandas_file = both(edge_cases, tmp_path)
    changed = pd.read_parquet(pandas_file)
    overlap = changed.index[changed["answer_id"] == "overlap"][0]
    changed.loc[overlap, "relevance_mean"] *= 1 + 1e-6
    changed.at[overlap, "vague_terms"] = ["很多", "一些"]
    changed = changed[changed["answer_id"] != "blank"]
    changed.to_parquet(tmp_path / "changed.parquet")

    problems = compare(duckscore_file, tmp_path / "changed.parquet")

    assert problems[0] == "answers.parquet: 1 answers only in duckscore, 0 only in pandas"
    assert problems[1].startswith(
        "answers.parquet: relevance_mean differs on 1 rows, e.g. answer_id='overlap'"
    )
    assert problems[2] == (
        "answers.parquet: vague_terms differs on 1 rows, e.g. answer_id='overlap': "
        "duckscore ('很多', '较多', '一些'), pandas ('很多', '一些')"
    )
    assert len(problems) == 3
    assert compare(duckscore_file, tmp_path / "changed.parquet", rel_tol=1e-3) == [
        problems[0],
        problems[2],
    ]
