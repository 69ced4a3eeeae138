"""--adapt prior never writes a degenerate map (issue 51): an EM rate within 0.02 of 0 or 1 is
refused (before, within 0.01), and one inside moves the prior by Saerens et al.'s logit offset,
computed here by hand. With labels, the label-free maps not carried over are candidates too
(the prior moved to EM's rate, the map moved by quantile), and only a map moved by quantile
moves the thresholds. Where the log is evidence, the rate of the labels and the log together
is the mixture's maximum likelihood (scipy), and the labels only narrow the candidates to those
within one standard error of the lowest Brier score; where it is not, the labels' rate stands
unless a map beats it by 1.96 (hand-built gaps)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from duckscore.calibrate.adaptation import LogEvidence, alternatives, carry_over, log_evidence
from duckscore.calibrate.label_choice import (
    EVIDENCE,
    ONE_STANDARD_ERROR,
    Candidate,
    choose_by_labels,
    nearest_the_log,
    within,
)
from duckscore.calibrate.settings import CalibrationError
from duckscore.common.defaults import DEFAULT_POLICY
from duckscore.core.session import Session
from duckscore.scoring.policy_view import load_score_policy

from .rate_oracle import likelihood_rate


def _inputs() -> tuple[dict, dict, pd.DataFrame, list[float]]:
    policy = load_score_policy(DEFAULT_POLICY)
    assert policy.probability is not None
    recorded = policy.policy.metadata["score_distribution"]
    quantiles = recorded["best_score_quantiles"]
    decisions = pd.DataFrame(
        {"best_overall_score": quantiles, "top2_ratio": 0.5, "p_good": np.linspace(0.1, 0.9, 101)}
    )
    return policy.probability.block.thawed(), recorded, decisions, quantiles


@pytest.mark.parametrize("rate", [0.0, 0.015, 0.985, 1.0])
def test_explicit_prior_refuses_a_degenerate_rate(rate: float) -> None:
    block, recorded, decisions, quantiles = _inputs()
    with pytest.raises(CalibrationError, match=f"ran to {rate:.3f} .*within 0.02 of 0 or 1"):
        carry_over("prior", block, recorded, decisions, quantiles, rate)


def test_explicit_prior_moves_the_prior_by_saerens_offset() -> None:
    block, recorded, decisions, quantiles = _inputs()
    moved = carry_over("prior", block, recorded, decisions, quantiles, 0.03)
    fitted = recorded["base_rate"]
    offset = math.log(0.03 / 0.97) - math.log(fitted / (1 - fitted))
    assert moved.adapt == "prior" and not moved.moves_thresholds
    assert moved.prior_shift == pytest.approx(offset, abs=1e-12)
    assert moved.block["beta"]["intercept"] == pytest.approx(
        block["beta"]["intercept"] + offset, abs=1e-12
    )
    assert moved.chosen.reason.startswith("--adapt prior, as asked; --adapt auto would ")


def test_the_alternatives_labels_may_choose() -> None:
    block, recorded, decisions, quantiles = _inputs()
    kept = carry_over("quantile", block, recorded, decisions, quantiles, 0.3)
    assert set(alternatives(kept, block, recorded, quantiles, 0.3)) == {"prior"}
    kept = carry_over("prior", block, recorded, decisions, quantiles, 0.3)
    others = alternatives(kept, block, recorded, quantiles, 0.3)
    assert set(others) == {"quantile"}
    assert (
        others["quantile"]
        == carry_over("quantile", block, recorded, decisions, quantiles, 0.3).block
    )
    keep = dataclasses.replace(kept, block=block, adapt="keep")
    others = alternatives(keep, block, recorded, quantiles, 0.3)
    fitted = recorded["base_rate"]
    offset = math.log(0.3 / 0.7) - math.log(fitted / (1 - fitted))
    assert others["prior"]["beta"]["intercept"] == pytest.approx(
        block["beta"]["intercept"] + offset, abs=1e-12
    )
    assert set(alternatives(keep, block, recorded, quantiles, 0.01)) == {"quantile"}  # degenerate
    platt = {"method": "platt", "platt": {"intercept": 0.0, "best_overall_score": 1.0,
                                          "top2_ratio": -1.0}}  # fmt: skip
    assert set(alternatives(keep, platt, recorded, quantiles, 0.3)) == {"prior"}


@pytest.mark.parametrize(("name", "moves"), [("quantile", True), ("prior", False)])
def test_a_chosen_alternative_says_whether_the_thresholds_move(name: str, moves: bool) -> None:
    # outcomes a step at score 0.5; the alternative is that step, the shipped map far from it
    block, recorded, decisions, quantiles = _inputs()
    scores = np.linspace(0.0, 1.0, 40)
    labelled = pd.DataFrame({"query_id": [f"q{i:02d}" for i in range(40)],
                             "best_overall_score": scores, "top2_ratio": 0.5,
                             "outcome": (scores > 0.5).astype(float)})  # fmt: skip
    step = {"method": "isotonic", "isotonic": {"x": [0.49, 0.51], "y": [0.0, 1.0]}}
    keep = dataclasses.replace(
        carry_over("prior", block, recorded, decisions, quantiles, 0.3), block=block, adapt="keep"
    )
    with Session() as session:
        choice = choose_by_labels(session, labelled, block, keep, {name: step}, None, 5, 0)
    assert choice.chosen.name == name and choice.chosen.block == step
    assert choice.report.cv_brier_by_candidate[name] == 0.0
    assert choice.chosen.moves_thresholds is moves


def _labelled_half(decisions: pd.DataFrame) -> pd.DataFrame:
    """Every other query of the log labelled, good where p_good > 0.6."""
    labelled = decisions.iloc[::2]
    return labelled.assign(outcome=(labelled["p_good"] > 0.6).astype(float))


def test_the_log_is_evidence_where_a_rate_fits_it() -> None:
    block, recorded, decisions, quantiles = _inputs()
    decisions = decisions.assign(query_id=[f"q{i:03d}" for i in range(len(decisions))])
    labelled = _labelled_half(decisions)
    kept = carry_over("prior", block, recorded, decisions, quantiles, 0.3)
    assert kept.diagnosis is not None
    for shift in ("none", "rate", "inseparable"):
        fits = dataclasses.replace(kept, diagnosis=dataclasses.replace(kept.diagnosis, shift=shift))
        evidence = log_evidence(fits, decisions, labelled, recorded, 0.3)
        assert evidence is not None and list(evidence.fitted) == ["prior_labels"]
        unlabelled = decisions.iloc[1::2]["p_good"].to_numpy()
        expected = likelihood_rate(
            unlabelled, labelled["outcome"].to_numpy(), recorded["base_rate"]
        )
        assert evidence.rate == pytest.approx(expected, abs=1e-6)
    for shift in ("scale", "other"):  # the shipped posteriors fit the log at no rate
        moved = dataclasses.replace(
            kept, diagnosis=dataclasses.replace(kept.diagnosis, shift=shift)
        )
        assert log_evidence(moved, decisions, labelled, recorded, 0.3) is None
    assert log_evidence(kept, decisions, labelled, recorded, 0.015) is None  # EM degenerate


def _constant(p: float) -> dict:
    return {"method": "isotonic", "isotonic": {"x": [0.0, 1.0], "y": [p, p]}}


def test_the_labels_narrow_and_the_log_chooses() -> None:
    """40 labels, the best candidate's p_good 0.7 on the 20 good, 0.3 on the rest (squared
    error 0.09 each). `near`: 0.3 on one good (gap +0.4), 1.0 on two (−0.09 each) — mean gap
    0.0055, its standard error 0.0106: the labels cannot tell it from the best. `nearest`: 0.3
    on ten good (+0.4 each) — mean 0.1, standard error 0.0277: they can. The log's rate 0.25
    picks `near` (mean p_good 0.375 on the log) over the best (0.5); `nearest` (0.25) is out."""
    y = np.repeat([1.0, 0.0], 20)
    best = np.where(y == 1, 0.7, 0.3)
    near, nearest = best.copy(), best.copy()
    near[0], near[[1, 2]] = 0.3, 1.0
    nearest[:10] = 0.3
    candidates = [
        Candidate("shipped", _constant(0.5), best, False),
        Candidate("near", _constant(0.375), near, False),
        Candidate("nearest", _constant(0.25), nearest, False),
    ]
    log = LogEvidence(pd.DataFrame({"best_overall_score": np.linspace(0, 1, 9),
                                    "top2_ratio": 0.5}), 0.25, {})  # fmt: skip
    assert nearest_the_log(candidates, candidates[0], y, log).name == "near"
    tied = [*candidates, Candidate("twin", _constant(0.125), near, False)]  # as near as `near`
    assert nearest_the_log(tied, candidates[0], y, log).name == "near"  # the earlier kept
    far = LogEvidence(log.decisions, 0.9, {})
    assert nearest_the_log(candidates, candidates[0], y, far).name == "shipped"


def test_the_rate_stands_unless_beaten_at_the_95_percent_level() -> None:
    """40 labels, the best's p_good 0.7 on the 20 good, 0.3 on the rest; the rate's candidate
    0.3 on two good (gap +0.4 each): mean gap 0.02, its standard error 0.4·√(2·38/(40·39))/√40
    = 0.01396, so 1.43 standard errors — told from the best at one standard error (what
    nearest_the_log narrows by), not at 1.96 (what the rate must be beaten by)."""
    y = np.repeat([1.0, 0.0], 20)
    best = np.where(y == 1, 0.7, 0.3)
    rate = best.copy()
    rate[:2] = 0.3
    lowest, by_rate = Candidate("refit", {}, best, False), Candidate("rate", {}, rate, False)
    assert (ONE_STANDARD_ERROR, EVIDENCE) == (1.0, 1.96)
    assert not within(by_rate, lowest, y, ONE_STANDARD_ERROR)
    assert within(by_rate, lowest, y, EVIDENCE)
    assert not within(by_rate, lowest, y, 1.43) and within(by_rate, lowest, y, 1.44)
