"""--adapt prior never writes a degenerate map (issue 51): an EM rate within 0.02 of 0 or 1 is
refused (before, within 0.01), and one inside moves the prior by Saerens et al.'s logit offset,
computed here by hand. With labels, the label-free maps not carried over are candidates too
(the prior moved to EM's rate, the map moved by quantile), and only a map moved by quantile
moves the thresholds."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from duckscore.calibrate.adaptation import alternatives, carry_over
from duckscore.calibrate.label_choice import choose_by_labels
from duckscore.calibrate.settings import CalibrationError
from duckscore.common.defaults import DEFAULT_POLICY
from duckscore.core.session import Session
from duckscore.scoring.policy_view import load_score_policy


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
        choice = choose_by_labels(session, labelled, block, keep, {name: step}, 5, 0)
    assert choice.chosen.name == name and choice.chosen.block == step
    assert choice.report.cv_brier_by_candidate[name] == 0.0
    assert choice.chosen.moves_thresholds is moves
