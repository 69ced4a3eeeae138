"""answer_v2 (seed 001 §未来改进 1, 2 and §使用方式's streaming start) against the plain-Python
oracle tests/answers/answers_v2_reference.py, hand-computed cases, and its input checks."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from duckscore.answering.pipeline import score_answers
from duckscore.cli import cli
from duckscore.core.errors import DuckscoreError
from duckscore.core.resources import contract_schema

from .answers_reference import load_params, score_answer
from .answers_v2_reference import V2_COLUMNS, load_v2_params, score_v2

SCHEMA = json.loads(contract_schema("answers").read_text())
T0 = dt.datetime(2024, 5, 1)
WORDS = ["总之", "可能", "一些", "明确", "数据", "结果", "\n\n", "。", "maybe", "clearly", "x"]


def frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        {name: pd.Series([r[name] for r in rows], dtype=dtype) for name, dtype in columns.items()}
    )


ANSWER_COLUMNS = {
    "answer_id": object,
    "query_id": object,
    "answer_text": object,
    "retrieved_count": "int64",
    "streaming": bool,
}
TABLES = {
    "citations": {"answer_id": object, "chunk_id": object},
    "chunks": {"answer_id": object, "chunk_id": object, "rerank_score": "float64"},
    "events": {"answer_id": object, "severity": object},
    "logprobs": {"answer_id": object, "token_index": "int64", "logprob": "float64"},
    "feedback": {"answer_id": object, "rating": "float64", "given_at": "datetime64[us]"},
}


def run_v2(
    out: Path,
    answers: list[dict[str, Any]],
    policy: str = "answer_v2",
    as_of: str | None = None,
    **tables: list[dict[str, Any]],
) -> pd.DataFrame:
    given = {name: frame(tables.get(name, []), columns) for name, columns in TABLES.items()}
    score_answers(
        frame(answers, ANSWER_COLUMNS), given["citations"], given["chunks"], out, policy,
        events=given["events"], logprobs=given["logprobs"], feedback=given["feedback"], as_of=as_of,
    )  # fmt: skip
    for line in (out / "contract.jsonl").read_text(encoding="utf-8").splitlines():
        jsonschema.validate(json.loads(line), SCHEMA)
    return pd.read_parquet(out / "answers.parquet").set_index("answer_id", drop=False)


def answer(
    answer_id: str, text: str = "数据结果", retrieved: int = 10, streaming: bool = False
) -> dict[str, Any]:
    return {
        "answer_id": answer_id,
        "query_id": "q",
        "answer_text": text,
        "retrieved_count": retrieved,
        "streaming": streaming,
    }


def reference(
    answers: list[dict[str, Any]],
    as_of: dt.datetime | None,
    base: str = "answer_v1",
    params: dict[str, Any] | None = None,
    **tables: list[dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    params = params or load_v2_params(base)
    rows = {}
    for a in answers:
        mine = {
            name: [r for r in tables.get(name, []) if r["answer_id"] == a["answer_id"]]
            for name in TABLES
        }
        events = [r["severity"] for r in mine["events"]]
        v1 = score_answer(
            a,
            [r["chunk_id"] for r in mine["citations"]],
            [(r["chunk_id"], r["rerank_score"]) for r in mine["chunks"]],
            events,
            params,
            "answer_v2",
        )
        rows[a["answer_id"]] = score_v2(
            v1, [(r["token_index"], r["logprob"]) for r in mine["logprobs"]],
            [(r["rating"], r["given_at"]) for r in mine["feedback"]], as_of, a["streaming"], events, params,
        )  # fmt: skip
    return rows


def same(got: Any, expected: Any) -> bool:
    if expected is None:
        return got is None or (isinstance(got, float) and math.isnan(got))
    if isinstance(expected, float):
        return math.isclose(got, expected, rel_tol=1e-12, abs_tol=1e-12)
    if isinstance(expected, list):
        return list(got) == expected
    return bool(got == expected)


def assert_matches(
    got: pd.DataFrame, expected: dict[str, dict[str, Any]], columns: Sequence[str] = V2_COLUMNS
) -> None:
    assert list(got.columns) == list(columns)
    for answer_id, row in expected.items():
        for column in columns:
            value = got.loc[answer_id, column]
            assert same(value, row[column]), (
                f"{answer_id}.{column}: SQL {value!r}, oracle {row[column]!r}"
            )


def test_logprobs_blend_into_certainty_by_hand(tmp_path: Path) -> None:
    rows = run_v2(tmp_path / "o", [answer("a"), answer("b"), answer("c")], logprobs=[
        {"answer_id": "a", "token_index": 0, "logprob": -0.1},
        {"answer_id": "a", "token_index": 1, "logprob": -0.3},
        {"answer_id": "b", "token_index": 0, "logprob": 0.0},
    ])  # fmt: skip
    # 数据结果 has no lexicon word: lexicon certainty 1.0
    assert rows.loc["a", "token_probability"] == pytest.approx(math.exp(-0.2), abs=1e-15)
    assert rows.loc["a", "certainty"] == pytest.approx(0.5 + 0.5 * math.exp(-0.2), abs=1e-15)
    assert rows.loc["b", "certainty"] == 1.0  # logprob 0: probability 1
    assert rows.loc["c", "logprob_tokens"] == 0 and rows.loc["c", "certainty"] == 1.0  # no tokens
    assert (rows.loc["a", "logprob_tokens"], rows.loc["b", "logprob_tokens"]) == (2, 1)


def test_the_mean_logprob_sums_in_token_order(tmp_path: Path) -> None:
    # -0.1 - 0.2 - 0.3 is -0.6000000000000001 in token order, -0.6 backwards: checked to the bit
    assert -0.1 + -0.2 + -0.3 != -0.3 + -0.2 + -0.1
    tokens = [(2, -0.3), (0, -0.1), (1, -0.2)]  # given out of order
    rows = run_v2(tmp_path / "o", [answer("a")], logprobs=[
        {"answer_id": "a", "token_index": k, "logprob": lp} for k, lp in tokens
    ])  # fmt: skip
    assert rows.loc["a", "mean_logprob"] == (-0.1 + -0.2 + -0.3) / 3


def test_feedback_moves_the_percentage_by_hand(tmp_path: Path) -> None:
    ratings = [
        {"answer_id": "a", "rating": 1.0, "given_at": T0 - dt.timedelta(days=1)},
        {"answer_id": "a", "rating": -0.5, "given_at": T0 - dt.timedelta(days=31)},
        {"answer_id": "z", "rating": 0.0, "given_at": T0},  # exactly 0, given at as_of
    ]
    rows = run_v2(tmp_path / "o", [answer("a"), answer("z")], as_of="2024-05-01", feedback=ratings)
    # weights 0.5^(1/30) and 0.5^(31/30): their ratio is 2, so r = (2·1 − 0.5) / 3 = 0.5
    assert rows.loc["a", "feedback_rating"] == pytest.approx(0.5, abs=1e-12)
    assert rows.loc["a", "percentage"] == pytest.approx(
        rows.loc["a", "factor_percentage"] + 5.0, abs=1e-12
    )
    assert rows.loc["z", "feedback_points"] == 0.0
    assert (rows.loc["a", "feedback_count"], rows.loc["z", "feedback_count"]) == (2, 1)
    assert rows.loc["z", "percentage"] == rows.loc["z", "factor_percentage"]


def test_feedback_clamps_and_recomputes_the_level(tmp_path: Path) -> None:
    ratings = [
        {"answer_id": "a", "rating": -1.0, "given_at": T0},
        {"answer_id": "b", "rating": 1.0, "given_at": T0},
    ]
    plain = run_v2(tmp_path / "p", [answer("a"), answer("b")])
    rows = run_v2(
        tmp_path / "o", [answer("a"), answer("b")], feedback=ratings, policy="answer_v2", as_of=None
    )
    assert rows.loc["a", "percentage"] == pytest.approx(plain.loc["a", "percentage"] - 10.0)
    full = run_v2(
        tmp_path / "f", [answer("a")], feedback=[{"answer_id": "a", "rating": 1.0, "given_at": T0}]
    )
    assert full.loc["a", "percentage"] <= 100.0
    assert (
        plain.loc["a", "score_level"] != rows.loc["a", "score_level"]
        or rows.loc["a", "percentage"] < 50
    )


def test_old_ratings_do_not_underflow(tmp_path: Path) -> None:
    old = T0 - dt.timedelta(days=100_000)
    rows = run_v2(tmp_path / "o", [answer("a")], as_of="2024-05-01", feedback=[
        {"answer_id": "a", "rating": -0.4, "given_at": old},
        {"answer_id": "a", "rating": -0.4, "given_at": old},
    ])  # fmt: skip
    assert rows.loc["a", "feedback_rating"] == pytest.approx(-0.4)


@pytest.mark.parametrize(
    ("events", "level"),
    [([], "high"), (["medium"], "medium"), (["high"], "low"), (["low"], "high")],
)
def test_a_streaming_answer_starts_at_high(tmp_path: Path, events: list[str], level: str) -> None:
    short = answer("s", text="可能", retrieved=0, streaming=True)  # its score would be low
    rows = run_v2(tmp_path / "o", [short, answer("n", text="可能", retrieved=0)],
                  events=[{"answer_id": "s", "severity": e} for e in events])  # fmt: skip
    assert rows.loc["s", "score_level"] == "high" and rows.loc["s", "level"] == level
    assert math.isnan(rows.loc["s", "percentage"]) and math.isnan(rows.loc["s", "total"])
    assert rows.loc["n", "level"] == "low"
    line = json.loads(
        (tmp_path / "o" / "contract.jsonl").read_text(encoding="utf-8").splitlines()[1]
    )
    assert (
        line["percentage"] is None
        and "streaming: no score yet; the level starts at high" in line["why"]
    )


def test_without_the_new_inputs_v2_scores_as_v1(tmp_path: Path) -> None:
    answers = [
        answer("a", "总之可能一些明确。\n\n明确"),
        answer("b", "x", 0),
        answer("c", "可能可能", 25),
    ]
    v2 = run_v2(tmp_path / "v2", answers)
    score_answers(
        frame(answers, ANSWER_COLUMNS),
        *(frame([], TABLES[n]) for n in ("citations", "chunks")),
        tmp_path / "v1",
        events=frame([], TABLES["events"]),
    )
    v1 = pd.read_parquet(tmp_path / "v1" / "answers.parquet").set_index("answer_id", drop=False)
    shared = [c for c in v1.columns if c != "answer_policy_version"]
    pd.testing.assert_frame_equal(v2[shared], v1[shared])
    # no --logprobs, no --feedback, no streaming column at all: the same, and the new columns empty
    columns = {k: v for k, v in ANSWER_COLUMNS.items() if k != "streaming"}
    score_answers(
        frame(answers, columns), *(frame([], TABLES[n]) for n in ("citations", "chunks")),
        tmp_path / "bare", "answer_v2", events=frame([], TABLES["events"]),
    )  # fmt: skip
    bare = pd.read_parquet(tmp_path / "bare" / "answers.parquet").set_index("answer_id", drop=False)
    pd.testing.assert_frame_equal(bare[shared], v1[shared])
    assert list(bare["streaming"]) == [False] * 3
    assert list(bare["logprob_tokens"]) == [0] * 3 and list(bare["feedback_count"]) == [0] * 3
    assert bare["mean_logprob"].isna().all() and bare["feedback_rating"].isna().all()


BLOCK_COLUMNS = {
    "logprob_certainty": (
        "lexicon_certainty",
        "logprob_tokens",
        "mean_logprob",
        "token_probability",
    ),
    "feedback": ("factor_percentage", "feedback_count", "feedback_rating", "feedback_points"),
    "streaming": ("streaming",),
}
FULL_TEXT = (
    "总之" + "数据" * 60 + "\n\n" + "结果" * 10
)  # 144 characters, two paragraphs, a conclusion


@pytest.mark.parametrize(
    "blocks",
    [
        ("logprob_certainty",),
        ("feedback",),
        ("streaming",),
        ("logprob_certainty", "feedback"),
        ("logprob_certainty", "streaming"),
    ],
)
def test_a_policy_with_some_of_the_blocks(tmp_path: Path, blocks: tuple[str, ...]) -> None:
    """answer_v1 plus some of answer_v2's blocks (a feedback weight of 50): its columns, and each
    row against the oracle; a full answer's 100 % + 50 clamps at 100, a weak one's at 0."""
    params = load_v2_params()
    params["feedback"] = {"weight": 50.0, "half_life_days": 30.0}
    policy = tmp_path / "answer_some.yaml"
    policy.write_text(json.dumps({"answer_policy_version": "answer_some", "extends": "answer_v1",
                                  "parameters": {b: params[b] for b in blocks}}), encoding="utf-8")  # fmt: skip
    answers = [answer("full", FULL_TEXT, 20), answer("weak", "可能" * 5, 0),
               answer("s", "数据", 5, streaming="streaming" in blocks)]  # fmt: skip
    tables: dict[str, list[dict[str, Any]]] = {
        "citations": [{"answer_id": "full", "chunk_id": f"c{i}"} for i in range(6)],
        "chunks": [{"answer_id": "full", "chunk_id": f"c{i}", "rerank_score": 1.0} for i in range(5)],
    }  # fmt: skip
    if "logprob_certainty" in blocks:
        tables["logprobs"] = [
            {"answer_id": a, "token_index": 0, "logprob": -0.2} for a in ("full", "s")
        ]
    if "feedback" in blocks:
        tables["feedback"] = [{"answer_id": "full", "rating": 1.0, "given_at": T0},
                              {"answer_id": "weak", "rating": -1.0, "given_at": T0}]  # fmt: skip
    columns = ANSWER_COLUMNS if "streaming" in blocks else {
        k: v for k, v in ANSWER_COLUMNS.items() if k != "streaming"}  # fmt: skip
    score_answers(
        frame(answers, columns), *(frame(tables.get(n, []), TABLES[n]) for n in ("citations", "chunks")),
        tmp_path / "o", str(policy),
        **{n: frame(tables[n], TABLES[n]) for n in ("logprobs", "feedback") if n in tables},
        as_of="2024-05-01" if "feedback" in tables else None,
    )  # fmt: skip
    got = pd.read_parquet(tmp_path / "o" / "answers.parquet").set_index("answer_id", drop=False)
    absent = {c for b, cs in BLOCK_COLUMNS.items() if b not in blocks for c in cs}
    expected = reference(answers, T0, params=params, **tables)
    for row in expected.values():
        row["answer_policy_version"] = "answer_some"
    assert_matches(got, expected, [c for c in V2_COLUMNS if c not in absent])
    if "feedback" in blocks:
        assert (got.loc["full", "percentage"], got.loc["weak", "percentage"]) == (100.0, 0.0)


texts = st.lists(st.sampled_from(WORDS), max_size=8).map("".join)
answer_rows = st.lists(st.tuples(texts, st.integers(0, 30), st.booleans()), min_size=1, max_size=8)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=answer_rows,
    base=st.sampled_from(["answer_v1", "answer_v1_en"]),
    tokens=st.lists(st.tuples(st.integers(0, 7), st.floats(-20.0, 0.0)), max_size=20),
    ratings=st.lists(
        st.tuples(st.integers(0, 7), st.floats(-1.0, 1.0), st.integers(0, 400 * 24)), max_size=15
    ),
    events=st.lists(
        st.tuples(st.integers(0, 7), st.sampled_from(["high", "medium", "low"])), max_size=5
    ),
    as_of_hours=st.integers(0, 48),
)
def test_random_answers_match_the_oracle(tmp_path_factory: pytest.TempPathFactory, rows: list, base: str,
                                         tokens: list, ratings: list, events: list, as_of_hours: int) -> None:  # fmt: skip
    answers = [answer(f"a{i}", text, n, streaming) for i, (text, n, streaming) in enumerate(rows)]
    known = len(answers)
    logprobs = [
        {"answer_id": f"a{i}", "token_index": k, "logprob": lp}
        for k, (i, lp) in enumerate(tokens)
        if i < known
    ]
    feedback = [
        {"answer_id": f"a{i}", "rating": r, "given_at": T0 - dt.timedelta(hours=h)}
        for i, r, h in ratings
        if i < known
    ]
    given_events = [{"answer_id": f"a{i}", "severity": s} for i, s in events if i < known]
    as_of = T0 + dt.timedelta(hours=as_of_hours)
    policy = "answer_v2" if base == "answer_v1" else "answer_v2_en"
    got = run_v2(
        tmp_path_factory.mktemp("r"),
        answers,
        policy,
        as_of.isoformat(),
        logprobs=logprobs,
        feedback=feedback,
        events=given_events,
    )
    expected = reference(
        answers, as_of, base, logprobs=logprobs, feedback=feedback, events=given_events
    )
    for row in expected.values():
        row["answer_policy_version"] = policy
    assert_matches(got, expected)


BAD = [
    (
        "logprobs.csv",
        "answer_id,token_index,logprob\na,0,nan\n",
        "--logprobs",
        r"--logprobs \(.*row 1.*\): column 'logprob' is NaN or infinite",
    ),
    (
        "logprobs.csv",
        "answer_id,token_index,logprob\na,0,-1.5\na,1,-inf\n",
        "--logprobs",
        r"column 'logprob' is NaN or infinite",
    ),
    (
        "logprobs.csv",
        "answer_id,token_index,logprob\na,0,0.5\n",
        "--logprobs",
        r"row 1, answer_id='a', token_index='0', value 0.5\): column 'logprob' is above 0",
    ),
    (
        "logprobs.csv",
        "answer_id,token_index,logprob\na,0,-1\na,0,-2\n",
        "--logprobs",
        r"row 2, answer_id='a', token_index='0'\): duplicate \(answer_id, token_index\)",
    ),
    (
        "logprobs.csv",
        "answer_id,token_index,logprob\nghost,0,-1\n",
        "--logprobs",
        r"answer_id 'ghost' is not in --answers",
    ),
    (
        "feedback.csv",
        "answer_id,rating,given_at\na,1.5,2024-01-01\n",
        "--feedback",
        r"--feedback \(.*row 1, value 1.5\): column 'rating' is above 1",
    ),
    (
        "feedback.csv",
        "answer_id,rating,given_at\na,1,2024-06-01\n",
        "--feedback",
        r"--feedback \(.*feedback.csv, row 1\): given_at '2024-06-01 00:00:00' is after --as-of 2024-05-01 00:00:00",
    ),
    (
        "feedback.csv",
        "answer_id,rating,given_at\nghost,1,2024-01-01\n",
        "--feedback",
        r"answer_id 'ghost' is not in --answers",
    ),
    (
        "answers.csv",
        "answer_id,query_id,answer_text,retrieved_count,streaming\na,q,t,1,maybe\n",
        "--answers",
        r"row 1, answer_id='a', value maybe\): column 'streaming' is not true/false \(or 1/0\)",
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "option", "message"), BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)]
)
def test_bad_input_is_one_line(
    tmp_path: Path, name: str, content: str, option: str, message: str
) -> None:
    files = {
        "answers.csv": "answer_id,query_id,answer_text,retrieved_count,streaming\na,q,t,1,true\n",
        "citations.csv": "answer_id,chunk_id\n", "chunks.csv": "answer_id,chunk_id,rerank_score\n",
        "logprobs.csv": "answer_id,token_index,logprob\n", "feedback.csv": "answer_id,rating,given_at\n",
        name: content,
    }  # fmt: skip
    for file, text in files.items():
        (tmp_path / file).write_text(text, encoding="utf-8")
    args = [
        "-q",
        "answers",
        "--policy",
        "answer_v2",
        "--out",
        str(tmp_path / "out"),
        "--as-of",
        "2024-05-01",
    ]
    for option_name in ("answers", "citations", "chunks", "logprobs", "feedback"):
        args += [f"--{option_name}", str(tmp_path / f"{option_name}.csv")]
    result = CliRunner().invoke(cli, args)
    error = result.stderr.strip()
    assert result.exit_code == 2 and "\n" not in error and re.search(message, error), error
    assert not (tmp_path / "out").exists()


def test_empty_tables_and_the_v1_policy(tmp_path: Path) -> None:
    rows = run_v2(tmp_path / "o", [answer("a")])
    assert rows.loc["a", "feedback_count"] == 0 and rows.loc["a", "logprob_tokens"] == 0
    empty = frame([], TABLES["logprobs"])
    with pytest.raises(
        DuckscoreError,
        match=r"--logprobs needs a policy with parameters.logprob_certainty \(answer_v2\); answer_v1 has none",
    ):
        score_answers(
            frame([answer("a")], ANSWER_COLUMNS),
            frame([], TABLES["citations"]),
            frame([], TABLES["chunks"]),
            tmp_path / "x",
            logprobs=empty,
        )
    with pytest.raises(DuckscoreError, match=r"--as-of 'soon': not a timestamp"):
        run_v2(tmp_path / "y", [answer("a")], as_of="soon")


def test_reference_oracle_is_not_the_policy_file() -> None:
    assert load_params("answer_v2_blocks")["feedback"] == {"weight": 10.0, "half_life_days": 30.0}
