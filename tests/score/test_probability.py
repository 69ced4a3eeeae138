"""A score policy's probability map (issue 24): p_good computed by the score SQL equals the map
written out in plain Python (math.exp and math.log, a hand-written interpolation), levels follow
p_good when asked, the contract carries it, and a policy without a map writes what it always
wrote."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import jsonschema
import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.errors import PolicyError
from duckscore.core.policy import load_policy
from duckscore.core.resources import contract_schema
from duckscore.scoring.pipeline import score
from duckscore.scoring.policy import SCORE_POLICY
from duckscore.scoring.policy_view import score_policy_from_parameters
from duckscore.scoring.stages import render_queries

SCHEMA = json.loads(contract_schema("score").read_text())
PLATT = {
    "method": "platt",
    "platt": {"intercept": -3.0, "best_overall_score": 5.0, "top2_ratio": 0.5},
    "levels_by": "score",
    "p_low": 0.3,
    "p_high": 0.8,
}
BETA = {
    "method": "beta",
    "beta": {"intercept": 0.5, "ln_score": 2.0, "ln_one_minus_score": -0.7},
    "levels_by": "score",
    "p_low": 0.3,
    "p_high": 0.8,
}
ISOTONIC = {
    "method": "isotonic",
    "isotonic": {"x": [0.2, 0.5, 0.9], "y": [0.1, 0.4, 0.95]},
    "levels_by": "score",
    "p_low": 0.3,
    "p_high": 0.8,
}


def _features() -> pd.DataFrame:
    """Five queries: one candidate, two tied, three spread, one all-zero, one with NULL scores."""
    rows = []
    shapes = {
        "single": [(0.03, 0.9, 2, 4)],
        "tied": [(0.02, 0.5, 1, 3), (0.02, 0.5, 1, 3)],
        "spread": [(0.05, 1.0, 3, 5), (0.03, 0.7, 2, 5), (0.01, 0.2, 1, 9)],
        "zeros": [(0.0, 0.0, 1, 2), (0.0, 0.0, 1, 2)],
        "ünïcode": [(0.04, 0.8, 2, 2), (0.01, 0.3, 1, 60)],
    }
    for query_id, parents in shapes.items():
        for j, (rrf, top, coverage, chunks) in enumerate(parents):
            rows.append(
                {
                    "query_id": query_id,
                    "parent_id": f"p{j}",
                    "rrf_sum": rrf,
                    "max_score": top,
                    "coverage": coverage,
                    "total_chunks": chunks,
                    "coverage_ratio": coverage / chunks,
                }
            )
    return pd.DataFrame(rows)


def _policy(folder: Path, probability: dict | None, name: str = "mapped") -> Path:
    document: dict = {"score_policy_version": name, "extends": "overall_v1", "parameters": {}}
    if probability is not None:
        document["parameters"]["probability"] = probability
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _scored(tmp_path: Path, probability: dict | None) -> tuple[pd.DataFrame, list[dict]]:
    out = tmp_path / "out"
    queries = pd.DataFrame({"query_id": [*_features().query_id.unique(), "no-candidates"]})
    score(_features(), out, str(_policy(tmp_path, probability)), queries=queries)
    contract = [json.loads(line) for line in (out / "contract.jsonl").read_text().splitlines()]
    return pd.read_parquet(out / "queries.parquet"), contract


def _platt_by_hand(best: float | None, ratio: float | None, c: dict) -> float:
    logit = c["intercept"] + c["best_overall_score"] * (best or 0.0)
    logit += c["top2_ratio"] * (ratio or 0.0)
    return 1.0 / (1.0 + math.exp(-logit))


def _beta_by_hand(best: float | None, c: dict) -> float:
    s = min(max(best or 0.0, 1e-6), 1 - 1e-6)  # the clip the map is defined with
    logit = c["intercept"] + c["ln_score"] * math.log(s)
    logit += c["ln_one_minus_score"] * math.log(1 - s)
    odds = math.exp(-abs(logit))  # e^-|logit|: never overflows
    return 1.0 / (1.0 + odds) if logit >= 0 else odds / (1.0 + odds)


def _interpolate_by_hand(x: float, xs: list[float], ys: list[float]) -> float:
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = max(k for k in range(len(xs)) if xs[k] <= x)
    return ys[i] + (ys[i + 1] - ys[i]) * (x - xs[i]) / (xs[i + 1] - xs[i])


def test_platt_map_equals_the_logistic_by_hand(tmp_path: Path) -> None:
    queries, contract = _scored(tmp_path, PLATT)
    assert list(queries.columns) == [
        "query_id",
        "best_parent_id",
        "best_overall_score",
        "p_good",
        "confidence_level",
        "top2_ratio",
        "need_hitl",
        "web_fallback",
    ]
    for row in queries.itertuples():
        best = None if pd.isna(row.best_overall_score) else row.best_overall_score
        ratio = None if pd.isna(row.top2_ratio) else row.top2_ratio
        assert math.isclose(row.p_good, _platt_by_hand(best, ratio, PLATT["platt"]), rel_tol=1e-12)
    empty = queries.set_index("query_id").loc["no-candidates"]
    assert math.isclose(empty.p_good, 1 / (1 + math.exp(3.0)), rel_tol=1e-12)
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for line in contract:
        validator.validate(line)
        assert list(line)[3:5] == ["best_overall_score", "p_good"]
        assert "p_low" not in line["thresholds_used"]  # levels by score: p thresholds unused


def test_isotonic_map_equals_a_hand_written_interpolation(tmp_path: Path) -> None:
    queries, _ = _scored(tmp_path, ISOTONIC)
    xs, ys = ISOTONIC["isotonic"]["x"], ISOTONIC["isotonic"]["y"]
    for row in queries.itertuples():
        x = 0.0 if pd.isna(row.best_overall_score) else row.best_overall_score
        assert math.isclose(row.p_good, _interpolate_by_hand(x, xs, ys), rel_tol=1e-12)
    assert queries.set_index("query_id").loc["no-candidates"].p_good == 0.1  # x = 0: the first y


def test_beta_map_equals_the_formula_by_hand(tmp_path: Path) -> None:
    queries, contract = _scored(tmp_path, BETA)
    assert "p_good" in queries.columns
    for row in queries.itertuples():
        best = None if pd.isna(row.best_overall_score) else row.best_overall_score
        assert math.isclose(row.p_good, _beta_by_hand(best, BETA["beta"]), rel_tol=1e-12)
    empty = queries.set_index("query_id").loc["no-candidates"]
    assert math.isclose(empty.p_good, _beta_by_hand(0.0, BETA["beta"]), rel_tol=1e-12)
    assert 0 < empty.p_good < 1e-10  # ln(1e-6)·2: the clip keeps ln finite
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for line in contract:
        validator.validate(line)
        assert list(line)[3:5] == ["best_overall_score", "p_good"]


def _stage_p_good(probability: dict, x: float) -> float:
    """The stage on its own over one query whose best score is x."""
    policy = load_policy(SCORE_POLICY, "overall_v1")
    parameters = {**policy.parameters, "probability": probability}
    mapped = score_policy_from_parameters("t", parameters, "test")
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE scored_parents AS SELECT 'q' AS query_id, 'p' AS parent_id, 1 AS rank, "
        f"CAST({x!r} AS DOUBLE) AS overall_score, 0.5 AS s_strength, 0.5 AS s_coverage, "
        "0.5 AS s_stability, CAST([] AS VARCHAR[]) AS risk_flags, "
        "CAST(NULL AS DOUBLE) AS top2_ratio"
    )
    sql = render_queries(mapped, 5, standalone=False, with_query_ids=False, final="probabilities")
    [(p_good,)] = con.execute(f"SELECT p_good FROM ({sql.text})").fetchall()
    return float(p_good)


@pytest.mark.parametrize("x", [-1.0, 0.2, 0.35, 0.5, 0.7, 0.9, 0.95, 2.0])
def test_isotonic_sql_at_and_between_the_breakpoints(x: float) -> None:
    """A breakpoint, between two, or beyond the ends."""
    xs, ys = ISOTONIC["isotonic"]["x"], ISOTONIC["isotonic"]["y"]
    assert math.isclose(_stage_p_good(ISOTONIC, x), _interpolate_by_hand(x, xs, ys), rel_tol=1e-12)


@pytest.mark.parametrize(
    "x", [0.0, 1e-9, 1e-6, 2e-6, 0.01, 0.3, 0.5, 0.77, 0.99, 1 - 2e-6, 1 - 1e-6, 1 - 1e-9, 1.0]
)
@pytest.mark.parametrize(
    "coefficients",
    [
        BETA["beta"],
        {"intercept": -1.0, "ln_score": 0.0, "ln_one_minus_score": -3.0},
        {"intercept": 40.0, "ln_score": 60.0, "ln_one_minus_score": 0.0},  # logits of ±800
    ],
)
def test_beta_sql_at_the_ends_and_between(x: float, coefficients: dict) -> None:
    """0 and 1, within the clip of either, at it, just inside it, and between."""
    p_good = _stage_p_good({**BETA, "beta": coefficients}, x)
    assert 0.0 <= p_good <= 1.0
    expected = _beta_by_hand(x, coefficients)
    assert math.isclose(p_good, expected, rel_tol=1e-12, abs_tol=1e-300)


def test_extreme_logits_do_not_overflow(tmp_path: Path) -> None:
    steep = {**PLATT, "platt": {"intercept": -800.0, "best_overall_score": 3000.0, "top2_ratio": 0}}
    queries, _ = _scored(tmp_path, steep)
    assert queries.p_good.between(0, 1).all()
    by_id = queries.set_index("query_id")
    assert by_id.loc["no-candidates"].p_good == 0.0  # e^-800 underflows to 0, no error
    logit = -800.0 + 3000.0 * by_id.loc["spread"].best_overall_score
    assert logit > 710  # e^logit is beyond a double: only the form with e^-logit is finite
    assert by_id.loc["spread"].p_good == 1.0


def _level_by_hand(p_good: float, empty: bool, p_low: float, p_high: float) -> str:
    """docs/score.md: an empty result is low; else p_good below p_low, below p_high, or not."""
    return "low" if empty or p_good < p_low else "medium" if p_good < p_high else "high"


@pytest.mark.parametrize("intercept", [-3.0, 3.0], ids=["empty_p_low", "empty_p_high"])
def test_levels_by_probability_follow_p_good(tmp_path: Path, intercept: float) -> None:
    """With intercept 3 an empty result's p_good (the logistic of 3) is high: still `low`."""
    platt = {**PLATT["platt"], "intercept": intercept}
    by_probability = {**PLATT, "platt": platt, "levels_by": "probability", "p_high": 0.75}
    queries, contract = _scored(tmp_path, by_probability)
    expected = pd.Series(
        [
            _level_by_hand(row.p_good, pd.isna(row.best_parent_id), 0.3, 0.75)
            for row in queries.itertuples()
        ]
    )
    assert queries.confidence_level.tolist() == expected.tolist()
    if intercept < 0:
        assert set(expected) == {"low", "medium", "high"}  # the case covers every level
    empty = queries.set_index("query_id").loc["no-candidates"]
    assert empty.confidence_level == "low" and (empty.p_good >= 0.75) == (intercept > 0)
    fallback = queries.best_parent_id.isna() | ((expected == "low") & ~queries.need_hitl)
    assert queries.web_fallback.tolist() == fallback.tolist()
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for line in contract:
        validator.validate(line)
        assert line["thresholds_used"] == {
            "T_low": 0.35,
            "T_high": 0.68,
            "p_low": 0.3,
            "p_high": 0.75,
            "R_hitl": 0.92,
        }


def test_without_a_map_nothing_changes(tmp_path: Path) -> None:
    """overall_v1 and the same policy with a map: every other column equal, and no p_good."""
    (tmp_path / "plain").mkdir()
    plain, plain_contract = _scored(tmp_path / "plain", None)
    mapped, mapped_contract = _scored(tmp_path, PLATT)
    assert "p_good" not in plain.columns
    assert plain.equals(mapped.drop(columns="p_good"))
    for before, after in zip(plain_contract, mapped_contract, strict=True):
        assert "p_good" not in before
        del after["p_good"]
        assert before == after | {"score_policy_version": before["score_policy_version"]}
    stage = ["sql", "score", "--stage", "probabilities", "--policy", "overall_v1"]
    result = CliRunner().invoke(cli, stage)
    assert result.exit_code != 0
    assert "policy overall_v1 has no probability map" in result.output


@pytest.mark.parametrize(
    ("probability", "message"),
    [
        ({**PLATT, "platt": None} | {"method": "isotonic"}, "probability.isotonic is required"),
        ({**PLATT, "method": "isotonic"}, "probability.isotonic is required by method: isotonic"),
        (
            {**ISOTONIC, "platt": PLATT["platt"]},
            "probability.platt is not used by method: isotonic",
        ),
        ({**ISOTONIC, "isotonic": {"x": [0.1, 0.1], "y": [0.2, 0.3]}}, r"x\[1\]: 0.1 after 0.1"),
        ({**ISOTONIC, "isotonic": {"x": [0.1, 0.2], "y": [0.3, 0.2]}}, "must be non-decreasing"),
        ({**ISOTONIC, "isotonic": {"x": [0.1, 0.2], "y": [0.3, 1.2]}}, r"within \[0, 1\]"),
        (
            {**ISOTONIC, "isotonic": {"x": [0.1, 0.2, 0.3], "y": [0.3, 0.4]}},
            "x has 3 points and y 2",
        ),
        ({**ISOTONIC, "isotonic": {"x": [0.1], "y": [0.3]}}, "at least two numbers"),
        ({**PLATT, "p_low": 0.9}, r"p_low \(0.9\) must not exceed p_high \(0.8\)"),
        ({**PLATT, "levels_by": "odds"}, "'odds' is not one of score, probability"),
        ({**PLATT, "platt": {"intercept": 1.0, "best_overall_score": 2.0}}, "missing key"),
        ({**PLATT, "platt": {**PLATT["platt"], "slope": 1.0}}, "unknown key"),
        ({**BETA, "beta": {"intercept": 0.5, "ln_score": 2.0}}, "missing key"),
        ({**BETA, "beta": {**BETA["beta"], "top2_ratio": 1.0}}, "unknown key"),
        ({**BETA, "beta": {**BETA["beta"], "ln_score": "steep"}}, "beta.ln_score"),
        ({**PLATT, "beta": BETA["beta"]}, "probability.beta is not used by method: platt"),
        ({**PLATT, "method": "beta"}, "probability.beta is required by method: beta"),
        ({**BETA, "method": "logistic"}, "'logistic' is not one of platt, beta, isotonic"),
    ],
)
def test_a_malformed_map_is_refused_naming_the_key(
    tmp_path: Path, probability: dict, message: str
) -> None:
    probability = {k: v for k, v in probability.items() if v is not None}
    with pytest.raises(PolicyError, match=message):
        load_policy(SCORE_POLICY, str(_policy(tmp_path, probability)))


def test_a_map_can_be_set_on_the_command_line(tmp_path: Path) -> None:
    policy = load_policy(
        SCORE_POLICY,
        str(_policy(tmp_path, PLATT)),
        ["probability.levels_by=probability", "probability.platt.intercept=-2"],
    )
    assert policy.parameters["probability"]["levels_by"] == "probability"
    assert policy.parameters["probability"]["platt"]["intercept"] == -2.0
    assert policy.version.startswith("mapped+")
