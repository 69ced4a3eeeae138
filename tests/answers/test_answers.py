"""`duckscore answers` as a user meets it: the CLI on the bundled seed-001 examples, the contract
schema, `duckscore sql answers` pasted into DuckDB, determinism, bad input and bad policies.

The values of every column are checked against the plain-Python reference in
test_oracle.py; here the expectations are the seed's stated levels and hand arithmetic.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import duckdb
import jsonschema
import pandas as pd
import pytest
from click.testing import CliRunner, Result

from duckscore.answering.pipeline import score_answers
from duckscore.answering.policy import ANSWER_POLICY, conclusion_pattern, lexicon_pattern
from duckscore.cli import cli
from duckscore.core.connection import EngineSettings
from duckscore.core.errors import PolicyError
from duckscore.core.policy import load_policy
from duckscore.core.resources import contract_schema

from ..helpers import FIXTURES

EXAMPLES = FIXTURES / "answers"
INPUTS = {name: EXAMPLES / f"{name}.csv" for name in ("answers", "citations", "chunks", "events")}
SCHEMA = json.loads(contract_schema("answers").read_text())


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args], catch_exceptions=False)


def answers_args(out: Path, **replaced: Path | str) -> list[str]:
    paths = {name: str(replaced.get(name, path)) for name, path in INPUTS.items()}
    args = ["answers", "--out", str(out)]
    for name in ("answers", "citations", "chunks", "events"):
        if paths[name]:
            args += [f"--{name}", paths[name]]
    return args


def contract_lines(out: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in (out / "contract.jsonl").read_text(encoding="utf-8").splitlines()
    ]


def test_cli_scores_the_seed_examples_and_lowers_levels_on_contradictions(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(*answers_args(out))
    assert result.exit_code == 0, result.output
    lines = {line["answer_id"]: line for line in contract_lines(out)}
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for line in lines.values():
        validator.validate(line)
    # seed 001 §示例: HIGH (78%), MEDIUM (58%), LOW (42%); the rules give 78.75, 60.25, 49.0
    assert {a: (line["score_level"], line["percentage"]) for a, line in lines.items()} == {
        "seed_high": ("high", 78.75),
        "seed_medium": ("medium", 60.25),
        "seed_low": ("low", 49.0),
    }
    # events.csv: a medium-severity contradiction lowers high to medium; a low one only warns
    assert lines["seed_high"]["level"] == "medium"
    assert lines["seed_medium"]["level"] == "medium"
    assert any("warning" in reason for reason in lines["seed_medium"]["why"])
    assert any(
        "lowered the level from high to medium" in reason for reason in lines["seed_high"]["why"]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["command"] == "answers"
    assert manifest["policy"]["answer_policy_version"] == "answer_v1"
    assert set(manifest["inputs"]) == {"answers", "citations", "chunks", "events"}
    assert manifest["outputs"] == {"answers.parquet": {"rows": 3}, "contract.jsonl": {"rows": 3}}
    table = pd.read_parquet(out / "answers.parquet")
    assert list(table["answer_id"]) == sorted(table["answer_id"])
    assert table.set_index("answer_id").loc["seed_low", "uncertain_terms"].tolist() == [
        "也许",
        "可能",
        "似乎",
    ]


def test_without_events_the_level_is_the_score_level(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run(*answers_args(out, events="")).exit_code == 0
    table = pd.read_parquet(out / "answers.parquet")
    assert (table["level"] == table["score_level"]).all()
    assert (
        (table[["contradictions_high", "contradictions_medium", "contradictions_low"]] == 0)
        .all()
        .all()
    )
    assert not table["contradiction_warning"].any()


def _load_examples(con: duckdb.DuckDBPyConnection, with_events: bool) -> None:
    for name, path in INPUTS.items():
        if name != "events" or with_events:
            con.execute(f"CREATE VIEW {name} AS FROM read_csv('{path}')")


@pytest.mark.parametrize("stage", ["scored_answers", "contract"])
def test_printed_sql_runs_in_duckdb_and_matches_the_command(tmp_path: Path, stage: str) -> None:
    out = tmp_path / "out"
    assert run(*answers_args(out)).exit_code == 0
    printed = run("sql", "answers", "--events", "--stage", stage)
    assert printed.exit_code == 0
    con = duckdb.connect()
    _load_examples(con, with_events=True)
    by_hand = con.execute(printed.output).df()
    if stage == "contract":
        assert json.loads(by_hand.to_json(orient="records", force_ascii=False)) == contract_lines(
            out
        )
    else:
        pd.testing.assert_frame_equal(
            by_hand, pd.read_parquet(out / "answers.parquet"), check_dtype=False
        )


def test_every_stage_can_be_selected_on_its_own() -> None:
    con = duckdb.connect()
    _load_examples(con, with_events=False)
    for stage in ("answer_rows", "relevance", "lexicon_hits", "factors", "score_levels"):
        printed = run("sql", "answers", "--stage", stage)
        assert printed.exit_code == 0
        assert con.execute(printed.output).fetchall(), stage


def test_same_bytes_whatever_the_row_order_and_threads(tmp_path: Path) -> None:
    frames = {name: pd.read_csv(path) for name, path in INPUTS.items()}
    outputs = []
    for threads, seed in ((1, 0), (2, 1), (2, 2)):
        shuffled = {name: frame.sample(frac=1, random_state=seed) for name, frame in frames.items()}
        out = tmp_path / f"out{threads}_{seed}"
        score_answers(
            shuffled["answers"],
            shuffled["citations"],
            shuffled["chunks"],
            out,
            events=shuffled["events"],
            settings=EngineSettings(threads=threads),
        )
        outputs.append(
            ((out / "contract.jsonl").read_bytes(), pd.read_parquet(out / "answers.parquet"))
        )
    for contract, table in outputs[1:]:
        assert contract == outputs[0][0]
        pd.testing.assert_frame_equal(table, outputs[0][1])


def test_answers_without_citations_or_chunks_are_scored(tmp_path: Path) -> None:
    empty_citations = tmp_path / "citations.csv"
    empty_citations.write_text("answer_id,chunk_id\n")
    empty_chunks = tmp_path / "chunks.csv"
    empty_chunks.write_text("answer_id,chunk_id,rerank_score\n")
    out = tmp_path / "out"
    result = run(*answers_args(out, citations=empty_citations, chunks=empty_chunks, events=""))
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(out / "answers.parquet").set_index("answer_id")
    assert (table["citation_count"] == 0).all() and (table["citation_count_points"] == 0).all()
    assert table["relevance_mean"].isna().all() and (table["citation_relevance"] == 0).all()
    assert (table["citation_rate_points"] == 0.1).all()  # rate 0 -> the lowest band


def test_zero_retrieved_gives_no_rate_and_the_lowest_band(tmp_path: Path) -> None:
    answers = pd.DataFrame(
        {"answer_id": ["a"], "query_id": ["q"], "answer_text": [""], "retrieved_count": [0]}
    )
    citations = pd.DataFrame({"answer_id": ["a"], "chunk_id": ["c"]})
    chunks = pd.DataFrame({"answer_id": ["a"], "chunk_id": ["c"], "rerank_score": [1.0]})
    score_answers(answers, citations, chunks, tmp_path / "out")
    row = pd.read_parquet(tmp_path / "out" / "answers.parquet").iloc[0]
    assert pd.isna(row["citation_rate"]) and row["citation_rate_points"] == 0.1
    assert row["answer_length"] == 0 and row["paragraphs"] == 0 and row["length_points"] == 0.2


def test_english_policy_matches_whole_words_case_insensitively(tmp_path: Path) -> None:
    text = "Maybe the Mayor may know. Perhaps.\n\nIn conclusion, it is CLEARLY uncertain."
    answers = pd.DataFrame(
        {"answer_id": ["a"], "query_id": ["q"], "answer_text": [text], "retrieved_count": [10]}
    )
    none = pd.DataFrame(
        {"answer_id": pd.Series([], dtype=str), "chunk_id": pd.Series([], dtype=str)}
    )
    chunks = none.assign(rerank_score=pd.Series([], dtype=float))
    score_answers(answers, none, chunks, tmp_path / "out", policy="answer_v1_en")
    row = pd.read_parquet(tmp_path / "out" / "answers.parquet").iloc[0]
    assert row["uncertain_terms"].tolist() == ["maybe", "may", "perhaps", "uncertain"]
    assert row["assertive_terms"].tolist() == ["clearly"]
    assert row["has_conclusion"] and row["paragraphs"] == 2


def test_patterns_escape_what_the_policy_says() -> None:
    # regex metacharacters in a term are matched literally; ASCII word ends get \b
    assert (
        lexicon_pattern({"uncertain": ["c++ maybe"], "vague": [], "assertive": ["确实"]})
        == r"(?:\bc\x{2b}\x{2b}\x{20}maybe\b|确实)"
    )
    assert conclusion_pattern(["综合…来看", "In Short"]) == r"(?s)(?:综合.*?来看|\bin\x{20}short\b)"
    assert conclusion_pattern([]) is None


BAD_INPUTS = [
    (
        "answers",
        "answer_id,query_id,answer_text,retrieved_count\na,q,,3\n",
        r"--answers \(.*answers.csv, row 1, answer_id='a'\): column 'answer_text' is null",
    ),
    (
        "answers",
        "answer_id,query_id,answer_text,retrieved_count\na,q,x,3\na,q,y,4\n",
        r"--answers \(.*row 2, answer_id='a'\): duplicate \(answer_id\), first seen at .*row 1",
    ),
    (
        "answers",
        "answer_id,query_id,answer_text,retrieved_count\na,q,x,-1\n",
        r"column 'retrieved_count' is below 0",
    ),
    (
        "citations",
        "answer_id,chunk_id\nseed_high,c1\nnobody,c2\n",
        r"--citations \(.*citations.csv, row 2, answer_id='nobody', chunk_id='c2'\): answer_id 'nobody' is not in --answers",
    ),
    (
        "citations",
        "answer_id,chunk_id\nseed_high,c1\nseed_high,c1\n",
        r"--citations \(.*row 2.*\): duplicate \(answer_id, chunk_id\)",
    ),
    (
        "chunks",
        "answer_id,chunk_id,rerank_score\nseed_high,c1,0.5\nseed_high,c2,1.5\n",
        r"--chunks \(.*row 2, answer_id='seed_high', chunk_id='c2', value 1.5\): column 'rerank_score' is above 1",
    ),
    (
        "chunks",
        "answer_id,chunk_id,rerank_score\nseed_high,c1,nan\n",
        r"column 'rerank_score' is NaN or infinite",
    ),
    (
        "chunks",
        "answer_id,chunk_id,rerank_score\nghost,c1,0.5\n",
        r"--chunks \(.*row 1.*\): answer_id 'ghost' is not in --answers",
    ),
    (
        "events",
        "answer_id,severity\nseed_high,critical\n",
        r"--events \(.*row 1, value critical\): column 'severity' is not one of high, medium, low",
    ),
    ("events", "answer_id,severity\nghost,high\n", r"answer_id 'ghost' is not in --answers"),
]


@pytest.mark.parametrize(
    ("table", "content", "message"),
    BAD_INPUTS,
    ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD_INPUTS)],
)
def test_bad_input_is_one_line_naming_file_row_and_column(
    tmp_path: Path, table: str, content: str, message: str
) -> None:
    bad = tmp_path / f"{table}.csv"
    bad.write_text(content, encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("untouched")
    result = CliRunner().invoke(cli, ["-q", *answers_args(out, **{table: bad})])
    assert result.exit_code == 2
    error = result.stderr.strip()
    assert "\n" not in error and error.startswith("duckscore: error: "), error
    assert re.search(message, error), error
    assert [p.name for p in out.iterdir()] == ["keep.txt"]


def test_rerank_range_is_the_policys(tmp_path: Path) -> None:
    chunks = tmp_path / "chunks.csv"
    chunks.write_text("answer_id,chunk_id,rerank_score\nseed_high,c1,7.5\n")
    out = tmp_path / "out"
    assert (
        run(
            *answers_args(out, chunks=chunks, events=""),
            "--set",
            "citation_relevance.score_range=[0, 10]",
        ).exit_code
        == 0
    )
    row = pd.read_parquet(out / "answers.parquet").set_index("answer_id").loc["seed_high"]
    assert row["citation_relevance"] == 0.5 * 0.75


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("lexicons.assertive=[可能]", r"'可能' is in both uncertain and assertive"),
        (
            "length=[{at_least: 0, points: 0.2}, {at_least: 100, points: 0.6}]",
            r"length: at_least must strictly decrease",
        ),
        (
            "citation_count=[{at_least: 1, points: 0.5}]",
            r"citation_count: the last band must start at 0",
        ),
        ("citation_relevance.max_points=0.6", r"citation quality .* add up to 1\.1"),
        ("citation_relevance.score_range=[1, 1]", r"score_range must be \[lo, hi\] with lo < hi"),
        ("levels.medium_at_least=80", r"medium_at_least must not exceed high_at_least"),
        (
            "contradictions.high=severe",
            r"contradictions.high: 'severe' is not one of low, medium, warn",
        ),
        ("lexicons.conclusion=[…来看]", r"has an empty part"),
    ],
)
def test_bad_policy_is_named(override: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        load_policy(ANSWER_POLICY, "answer_v1", [override])


def test_policies_are_listed_and_shown() -> None:
    listed = run("policy", "list", "answers")
    assert listed.output.split() == ["answer_v1", "answer_v1_en", "answer_v2", "answer_v2_en"]
    shown = json.loads(run("policy", "show", "answer_v1_en", "--capability", "answers").output)
    assert shown["parent_version"] == "answer_v1"
    assert shown["parameters"]["weights"] == {
        "citation_quality": 3.0,
        "answer_quality": 2.5,
        "retrieval": 2.0,
        "certainty": 2.5,
    }


def test_output_folder_is_replaced_only_on_success(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run(*answers_args(out)).exit_code == 0
    before = (out / "contract.jsonl").read_bytes()
    bad = tmp_path / "answers.csv"
    shutil.copy(INPUTS["answers"], bad)
    bad.write_text(bad.read_text(encoding="utf-8") + "x,q,,1\n", encoding="utf-8")
    assert CliRunner().invoke(cli, ["-q", *answers_args(out, answers=bad)]).exit_code == 2
    assert (out / "contract.jsonl").read_bytes() == before


def test_the_contradiction_counts_are_of_one_type_with_events_or_without(tmp_path: Path) -> None:
    """answers.parquet's contradictions_* are BIGINT whether an events table counted them or
    there was none (zeros), so runs with and without --events concatenate."""
    types = {}
    for events in (INPUTS["events"], ""):
        out = tmp_path / ("with" if events else "without")
        assert run(*answers_args(out, events=events)).exit_code == 0
        described = duckdb.sql(f"DESCRIBE FROM read_parquet('{out / 'answers.parquet'}')")
        types[bool(events)] = {
            name: kind
            for name, kind, *_ in described.fetchall()
            if name.startswith("contradictions_")
        }
    assert (
        types[True]
        == types[False]
        == dict.fromkeys(
            ("contradictions_high", "contradictions_medium", "contradictions_low"), "BIGINT"
        )
    )
