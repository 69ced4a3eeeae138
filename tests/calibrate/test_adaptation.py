"""--adapt prior never writes a degenerate map (issue 51): an EM rate within 0.02 of 0 or 1 is
refused (before, within 0.01), and one inside moves the prior by Saerens et al.'s logit offset,
computed here by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from duckscore.calibrate.adaptation import carry_over
from duckscore.calibrate.settings import CalibrationError
from duckscore.common.defaults import DEFAULT_POLICY
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
