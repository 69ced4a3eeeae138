"""The shift diagnosis (orchestrator/calibrate/shift.py) against independent oracles: scipy's
Kolmogorov–Smirnov statistic, a hand-computed PSI and mixture CDF, and logs drawn from known
class-conditional Beta densities whose rate or scale was moved."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats  # test oracle only

from duckscore.calibrate.shift import (
    Diagnosis,
    Reference,
    choose,
    diagnose,
    ks_noise,
    psi_noise,
)

GOOD, BAD = stats.beta(5, 2), stats.beta(2, 4)
RATE = 0.54
LEVELS = np.linspace(0.0, 1.0, 101)


def posterior(s: np.ndarray, rate: float = RATE) -> np.ndarray:
    good, bad = rate * GOOD.pdf(s), (1 - rate) * BAD.pdf(s)
    return np.asarray(good / (good + bad))


def mixture_quantiles(rate: float) -> list[float]:
    """The exact quantiles of the mixture (bisection on its CDF), as a calibration of infinite
    size would record them; the ends are the support's."""

    def cdf(s: float) -> float:
        return float(rate * GOOD.cdf(s) + (1 - rate) * BAD.cdf(s))

    out = []
    for level in LEVELS:
        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if cdf(mid) < level else (lo, mid)
        out.append((lo + hi) / 2)
    return out


EXACT = Reference.recorded(mixture_quantiles(RATE), 100_000, posterior)


def draw(n: int, rate: float, seed: int, a: float = 0.0, b: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    good = rng.binomial(n, rate)
    scores = np.concatenate([GOOD.rvs(good, random_state=rng), BAD.rvs(n - good, random_state=rng)])
    return a + b * scores


def test_the_reference_cdf_passes_through_the_recorded_quantiles() -> None:
    q = [0.0, 0.0, 0.2, 0.5, 1.0]  # an atom at 0 holding a quarter, then uniform pieces
    ref = Reference(np.array(q), 4, None)
    weights = ref.weights(None)
    got = ref.cdf(np.array([-0.1, 0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 2.0]), weights)
    expected = [0.0, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.0]
    assert got == pytest.approx(expected)


def test_moving_the_reference_moves_its_cdf() -> None:
    ref = Reference(np.array([0.0, 0.5, 1.0]), 2, None)
    weights = ref.weights(None)
    # s = 0.1 + 2·s0: the median 0.5 goes to 1.1
    assert ref.cdf(np.array([0.1, 1.1, 2.1]), weights, a=0.1, b=2.0) == pytest.approx([0, 0.5, 1])


def test_the_class_shares_are_the_maps_posteriors() -> None:
    ref = Reference(np.array([0.0, 0.5, 1.0]), 2, np.array([0.2, 0.6]))
    assert ref.implied_rate == pytest.approx(0.4)
    # good: 0.5·0.2 / 0.4 and 0.5·0.6 / 0.4; bad: 0.5·0.8 / 0.6 and 0.5·0.4 / 0.6
    assert ref.weights(1.0) == pytest.approx([0.25, 0.75])
    assert ref.weights(0.0) == pytest.approx([2 / 3, 1 / 3])
    assert ref.weights(0.4) == pytest.approx([0.5, 0.5])  # the map's own rate: as recorded


@pytest.mark.parametrize("seed", range(3))
def test_ks_is_scipys_one_sample_statistic(seed: int) -> None:
    scores = draw(400, 0.3, seed)
    weights = EXACT.weights(None)
    expected = stats.kstest(scores, lambda s: EXACT.cdf(np.atleast_1d(s), weights)).statistic
    assert diagnose(EXACT, scores).ks == pytest.approx(expected, abs=1e-9)


def test_the_noise_is_smirnovs_critical_value_plus_the_grid() -> None:
    c = math.sqrt(-0.5 * math.log(0.025))  # 1.358
    assert ks_noise(300, 200) == pytest.approx(c * math.sqrt(500 / 60_000) + 0.01)
    assert psi_noise(300, 200) == pytest.approx(16.918977604620448 * (1 / 300 + 1 / 200))


def test_psi_by_hand() -> None:
    ref = Reference(np.linspace(0.0, 1.0, 101), 100, None)  # uniform on [0, 1]
    # a log with every score in the lowest decile: 1 against 0.1 there, 1e-4 against 0.1 elsewhere
    scores = np.full(50, 0.05)
    expected = (1 - 0.1) * math.log(1 / 0.1) + 9 * (1e-4 - 0.1) * math.log(1e-4 / 0.1)
    assert diagnose(ref, scores).psi == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(5))
def test_an_unmoved_log_shows_no_shift(seed: int) -> None:
    assert diagnose(EXACT, draw(1000, RATE, seed)).shift == "none"


@pytest.mark.parametrize(("rate", "seed"), [(r, s) for r in (0.2, 0.9) for s in range(3)])
def test_a_moved_rate_is_found_with_its_interval(rate: float, seed: int) -> None:
    found = diagnose(EXACT, draw(3000, rate, seed))
    assert found.shift == "rate"
    assert found.rate_estimate == pytest.approx(rate, abs=0.03)
    assert found.rates_scale_held is not None
    lo, hi = found.rates_scale_held
    assert lo <= rate <= hi and hi - lo < 0.2


@pytest.mark.parametrize("seed", range(3))
def test_a_moved_scale_is_found(seed: int) -> None:
    found = diagnose(EXACT, draw(3000, RATE, seed, a=-0.2, b=0.7))
    assert found.shift == "scale"
    assert found.rates_scale_held is None  # no rate alone explains it
    a, b = found.location_scale_at_reference_rate
    assert a == pytest.approx(-0.2, abs=0.03) and b == pytest.approx(0.7, abs=0.05)


def test_small_logs_cannot_separate_a_rate_from_a_scale() -> None:
    found = diagnose(Reference.recorded(mixture_quantiles(RATE), 300, posterior), draw(200, 0.3, 0))
    assert found.shift == "inseparable"
    assert "cannot separate" in found.sentence()


def test_a_query_without_candidates_counts_as_score_zero() -> None:
    with_nan = diagnose(EXACT, np.array([np.nan, 0.5, 0.7]))
    with_zero = diagnose(EXACT, np.array([0.0, 0.5, 0.7]))
    assert with_nan.ks == with_zero.ks


def test_an_empty_log_is_refused() -> None:
    with pytest.raises(ValueError, match="no query"):
        diagnose(EXACT, np.array([]))


def _diagnosis(shift: str, estimate: float | None, held: tuple[float, float] | None) -> Diagnosis:
    return Diagnosis(shift, 500, 300, 0.2, 0.1, 0.3, 0.1, estimate, held, (0.0, 1.0), 0.54, (0, 1))  # type: ignore[arg-type]


def test_a_rate_shift_that_refutes_the_shipped_map_moves_the_prior() -> None:
    assert choose(_diagnosis("rate", 0.3, (0.25, 0.35)), shipped_mean=0.45).adapt == "prior"


def test_a_rate_shift_the_shipped_map_already_fits_keeps_it() -> None:
    # issue 51's case: 73.5 % good, the shipped map's mean p_good already 0.726
    choice = choose(_diagnosis("rate", 0.74, (0.68, 0.80)), shipped_mean=0.726)
    assert choice.adapt == "keep" and "consistent" in choice.reason


@pytest.mark.parametrize("estimate", [0.0, 0.01, 0.99, 1.0])
def test_a_degenerate_rate_is_never_written(estimate: float) -> None:
    choice = choose(_diagnosis("rate", estimate, (0.0, 0.05)), shipped_mean=0.5)
    assert choice.adapt == "keep" and "degenerate" in choice.reason


@pytest.mark.parametrize("shift", ["none", "inseparable", "other"])
def test_what_the_diagnosis_does_not_support_keeps_the_shipped_map(shift: str) -> None:
    choice = choose(_diagnosis(shift, 0.3, (0.25, 0.35)), shipped_mean=0.5)
    assert choice.adapt == "keep"
    assert shift == "none" or "30 labelled queries" in choice.reason


@pytest.mark.parametrize("shipped_mean", [0.002, 0.99])
def test_a_moved_scale_that_leaves_the_shipped_map_degenerate_moves_it_by_quantile(
    shipped_mean: float,
) -> None:
    """Any rate fits a moved scale, the shipped map's too; but a shipped map whose p_good on the
    log averages 0.002 (the default on a two-retriever log) is a degenerate map there."""
    diagnosis = _diagnosis("scale", None, None)
    assert choose(diagnosis, shipped_mean=shipped_mean).adapt == "quantile"
    assert choose(diagnosis, shipped_mean=0.3).adapt == "keep"


def test_the_sentence_gives_the_top2_ratios_ks_when_both_sides_record_it() -> None:
    scores = draw(500, RATE, 0)
    ratios = np.random.default_rng(1).uniform(0.5, 1.0, 500)
    recorded = np.quantile(ratios, LEVELS)  # the same distribution: a small KS
    with_ratio = diagnose(EXACT, scores, (recorded, ratios))
    assert with_ratio.ratio_ks == pytest.approx(
        stats.kstest(ratios, lambda r: np.interp(r, recorded, LEVELS)).statistic, abs=1e-9
    )
    assert f"; the top-2 ratio's KS {with_ratio.ratio_ks:.3f} (noise " in with_ratio.sentence()
    assert "top-2 ratio" not in diagnose(EXACT, scores).sentence()
