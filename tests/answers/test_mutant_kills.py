"""Tests written for mutants of sql/answers/ that survived the other tests (tests/mutants/,
issue 37): the seed examples' percentages have two decimals at most, so the contract's
`round(percentage, 2)` made `round(percentage, 3)` wrote the same lines. With the certainty's
weight 1.7 (the weights then sum to 9.2) they do not (docs/answers.md: the contract's percentage
is rounded to 2 decimals, its total and factors to 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from duckscore.answers.pipeline import score_answers

from ..helpers import FIXTURES

EXAMPLES = FIXTURES / "answers"


def contract_of_the_examples(
    out: Path, overrides: list[str] | None = None, chunks: Path = EXAMPLES / "chunks.csv"
) -> list[dict[str, Any]]:
    """contract.jsonl of the seed-001 examples scored into `out` with `overrides`, one dict a
    line."""
    score_answers(
        EXAMPLES / "answers.csv",
        EXAMPLES / "citations.csv",
        chunks,
        out,
        events=EXAMPLES / "events.csv",
        overrides=overrides or [],
    )
    return [json.loads(line) for line in (out / "contract.jsonl").read_text().splitlines()]


def test_the_contract_rounds_the_percentage_to_two_decimals(tmp_path: Path) -> None:
    lines = contract_of_the_examples(tmp_path, ["weights.certainty=1.7"])
    got = {line["answer_id"]: (line["percentage"], line["total"]) for line in lines}
    # totals as the seed examples give them with certainty weighted 1.7 instead of 2.5:
    # 100 × 7.075 / 9.2 = 76.9021…, 100 × 4.38 / 9.2 = 47.6086…, 100 × 5.305 / 9.2 = 57.6630…
    assert got == {
        "seed_high": (76.9, 7.075),
        "seed_low": (47.61, 4.38),
        "seed_medium": (57.66, 5.305),
    }


def test_the_why_line_rounds_the_certainty_penalties_to_four_decimals(tmp_path: Path) -> None:
    """The penalties of the packaged policy have two decimals, so `round(uncertain_penalty, 4)`
    made `round(…, 5)` wrote the same text; with 0.123456 and 0.054321 a hit it does not."""
    lines = contract_of_the_examples(
        tmp_path, ["certainty.uncertain.per_hit=0.123456", "certainty.vague.per_hit=0.054321"]
    )
    why = {
        line["answer_id"]: [w for w in line["why"] if w.startswith("certainty")] for line in lines
    }
    # seed_low: 3 uncertain words, 3 × 0.123456 = 0.370368 → 0.3704; 3 vague, 0.162963 → 0.163
    # (%g drops the 0); certainty 1 − 0.370368 − 0.162963 + 0.1 = 0.566669 → 0.567
    assert why["seed_low"] == [
        "certainty 0.567: base 1, 3 uncertain word(s) -0.3704, 3 vague -0.163, 1 assertive +0.1"
    ]
    assert why["seed_medium"] == [
        "certainty 0.877: base 1, 1 uncertain word(s) -0.1235, 0 vague -0, 0 assertive +0"
    ]


def test_the_why_line_names_the_mean_rerank_score_of_the_top_chunks(tmp_path: Path) -> None:
    """No test read the citation line's last part: swapping its CASE (`no reranked chunks` when
    there are chunks) survived. The mean is of the top 5 rerank scores of chunks.csv (seed 001
    §1); an answer without chunks says so."""
    chunks = pd.read_csv(EXAMPLES / "chunks.csv")
    without = tmp_path / "chunks.csv"
    chunks[chunks["answer_id"] != "seed_low"].to_csv(without, index=False)
    lines = contract_of_the_examples(tmp_path / "out", chunks=without)
    firsts = {line["answer_id"]: line["why"][0] for line in lines}
    for answer_id in ("seed_high", "seed_medium"):
        top = chunks[chunks["answer_id"] == answer_id]["rerank_score"].nlargest(5)
        expected = f"(mean rerank score {top.mean():.4g} of the top {len(top)} chunk(s))"
        assert firsts[answer_id].endswith(expected), firsts[answer_id]
    assert firsts["seed_low"].endswith("(no reranked chunks)"), firsts["seed_low"]


def test_the_contract_rounds_every_factor_to_four_decimals(tmp_path: Path) -> None:
    """docs/answers.md: each factor rounded to 4 decimals. The packaged points have one or two
    decimals, so `round(answer_quality, 4)` made 5 survived; with paragraph_points 0.123456 an
    answer of several paragraphs has more."""
    lines = contract_of_the_examples(tmp_path, ["structure.paragraph_points=0.123456"])
    exact = pd.read_parquet(tmp_path / "answers.parquet").set_index("answer_id")
    assert any(round(v, 4) != v for v in exact["answer_quality"])
    for line in lines:
        for factor, value in line["factors"].items():
            assert value == round(float(exact.loc[line["answer_id"], factor]), 4), factor
