"""Which shift a new log shows against a policy's calibration, before anything is adapted
(issue 51).

Without labels a moved score scale and a moved rate of good answers cannot both be identified,
so the diagnosis tests each explanation against the log's best scores and says which the data
support:

- the reference is the calibration's best-score distribution as recorded
  (metadata.score_distribution: the best score at the quantiles 0, 0.01, …, 1, so each of the
  100 intervals holds 1 % of its queries, an interval of zero width an atom), split into a good
  and a bad class by the policy's own p_good at each interval's midpoint — the class-conditional
  shapes the map implies;
- `none`: the log's best scores fit the reference (two-sample Kolmogorov–Smirnov distance
  within its 5 % critical value at both sizes, plus the grid's 1 %): the shipped map holds;
- `rate`: a mixture of the reference's classes at another rate fits the log, and no
  location-scale move of the reference at its own rate does — only the rate moved;
- `scale`: a location-scale move of the reference at its rate fits the log (s = a + b·s₀),
  and no rate alone does — only the scale moved;
- `inseparable`: both fit — the label-free modes cannot tell a rate change from a scale move;
- `other`: neither fits.

The rates consistent with the log are the KS-inversion sets: every rate whose mixture (scale held)
or whose best location-scale move of the mixture passes the same test. PSI over the reference's
deciles is reported beside, with its 95 % noise at both sizes (χ² with 9 degrees of freedom).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

KS_ALPHA = 0.05
GRID_TOLERANCE = 0.01  # the recorded quantiles are 1 % apart: the reference's CDF is known to this
RATE_GRID = np.round(np.linspace(0.0, 1.0, 201), 3)  # rates tried, 0.005 apart
FIT_LEVELS = np.linspace(0.05, 0.95, 19)  # the quantiles a location-scale move is fitted on
EVALUATION_POINTS = 1001  # a larger log is compared at its quantiles 0, 0.001, …, 1
LOG_LEVELS = np.linspace(0.0, 1.0, EVALUATION_POINTS)
PSI_BINS = 10
CHI2_95_9 = 16.918977604620448  # the χ² distribution's 95 % point at PSI_BINS − 1 = 9 degrees
PSI_FLOOR = 1e-4  # an empty bin's share, so that PSI stays finite
DEGENERATE = 0.02  # a rate within this of 0 or 1 is not written as a map

Shift = Literal["none", "rate", "scale", "inseparable", "other"]


@dataclass(frozen=True)
class Reference:
    """The calibration's best-score distribution: `quantiles` at 0, 0.01, …, 1 over `queries`
    queries, and the map's p_good at each interval's midpoint (None: the map reads more than
    the best score, and no class split is implied)."""

    quantiles: np.ndarray
    queries: int
    p_good: np.ndarray | None

    @classmethod
    def recorded(
        cls,
        quantiles: list[float],
        queries: int,
        p_good_of: Callable[[np.ndarray], np.ndarray] | None,
    ) -> Reference:
        q = np.asarray(quantiles, dtype=float)
        if len(q) < 2 or np.any(np.diff(q) < 0) or not np.all(np.isfinite(q)):
            raise ValueError("the recorded best-score quantiles must be finite and non-decreasing")
        midpoints = (q[:-1] + q[1:]) / 2
        p = None if p_good_of is None else np.clip(p_good_of(midpoints), 0.0, 1.0)
        return cls(q, queries, p)

    @property
    def implied_rate(self) -> float | None:
        """The rate of good answers the map implies on the calibration (its mean p_good)."""
        return None if self.p_good is None else float(self.p_good.mean())

    def weights(self, rate: float | None) -> np.ndarray:
        """Each interval's share of a mixture of the classes at `rate` (None: as recorded)."""
        uniform = np.full(len(self.quantiles) - 1, 1.0 / (len(self.quantiles) - 1))
        implied = self.implied_rate
        if rate is None or self.p_good is None or implied is None or not 0 < implied < 1:
            return uniform
        good = uniform * self.p_good / implied
        bad = uniform * (1.0 - self.p_good) / (1.0 - implied)
        return np.asarray(rate * good + (1.0 - rate) * bad)

    def cdf(self, s: np.ndarray, weights: np.ndarray, a: float = 0.0, b: float = 1.0) -> np.ndarray:
        """The CDF at `s` of the reference moved to a + b·s₀ with interval shares `weights`:
        uniform within an interval, an atom where it has no width (right-continuous)."""
        knots = a + b * self.quantiles
        cumulative = np.concatenate([[0.0], np.cumsum(weights)])
        x = np.asarray(s, dtype=float)
        # the last knot at or below x: every interval before it is complete, atoms included
        j = np.searchsorted(knots, x, side="right") - 1
        inside = (j >= 0) & (j < len(knots) - 1)
        k = np.clip(j, 0, len(knots) - 2)
        width = knots[k + 1] - knots[k]
        partial = weights[k] * (x - knots[k]) / np.where(width > 0, width, 1.0)
        done = cumulative[np.clip(j, 0, len(knots) - 1)]
        return np.asarray(np.where(j < 0, 0.0, done + np.where(inside, partial, 0.0)))


@dataclass(frozen=True)
class Diagnosis:
    shift: Shift
    log_queries: int
    reference_queries: int
    ks: float  # the log's best scores against the reference
    ks_noise: float  # the 5 % critical value at both sizes, plus the grid's 1 %
    psi: float
    psi_noise: float
    rate_estimate: float | None  # the rate whose mixture (scale held) is closest to the log
    rates_scale_held: tuple[float, float] | None  # the rates consistent with the log, scale held
    rates_location_scale: tuple[float, float] | None  # … with a location-scale move allowed
    reference_rate: float | None  # the map's implied rate on the calibration
    location_scale_at_reference_rate: tuple[float, float]  # (a, b) of the best move at it
    ratio_ks: float | None = None  # the top-2 ratio's KS, when both sides record it
    ratio_ks_noise: float | None = None

    @property
    def degenerate_rate(self) -> bool:
        r = self.rate_estimate
        return r is None or not DEGENERATE <= r <= 1.0 - DEGENERATE

    def as_record(self) -> dict[str, Any]:
        record = asdict(self)
        for key in ("rates_scale_held", "rates_location_scale", "location_scale_at_reference_rate"):
            if record[key] is not None:
                record[key] = list(record[key])
        return record

    def sentence(self) -> str:
        """What the log shows, in one line."""
        found = (
            f"KS {self.ks:.3f} against the calibration's best scores (noise {self.ks_noise:.3f} at "
            f"{self.log_queries} and {self.reference_queries} queries), PSI {self.psi:.3f} "
            f"(noise {self.psi_noise:.3f})"
        )
        return f"{SHIFT_MEANING[self.shift]}: {found}{self._ratio()}{self._rates()}"

    def _ratio(self) -> str:
        if self.ratio_ks is None or self.ratio_ks_noise is None:
            return ""
        return f"; the top-2 ratio's KS {self.ratio_ks:.3f} (noise {self.ratio_ks_noise:.3f})"

    def _rates(self) -> str:
        parts = []
        if self.rates_scale_held is not None:
            lo, hi = self.rates_scale_held
            parts.append(f"rates consistent with the log, scale held: {lo:.2f}–{hi:.2f}")
        if self.rates_location_scale is not None:
            lo, hi = self.rates_location_scale
            parts.append(f"with its scale moved: {lo:.2f}–{hi:.2f}")
        return "; " + ", ".join(parts) if parts else ""


SHIFT_MEANING: dict[Shift, str] = {
    "none": "no shift (the log's best scores are the calibration's)",
    "rate": "a rate shift (the calibration's classes at another rate fit the log; a scale move does not)",
    "scale": "a scale shift (the calibration's scores moved fit the log; another rate alone does not)",
    "inseparable": "a shift the label-free modes cannot separate from a rate change (a rate "
    "change and a scale move both fit the log)",
    "other": "a shift neither a rate change nor a location-scale move explains",
}


def ks_noise(n_log: int, n_reference: int) -> float:
    """The two-sample KS critical value at KS_ALPHA (Smirnov's asymptotic), plus the grid's."""
    c = math.sqrt(-0.5 * math.log(KS_ALPHA / 2))
    return c * math.sqrt((n_log + n_reference) / (n_log * n_reference)) + GRID_TOLERANCE


def psi_noise(n_log: int, n_reference: int) -> float:
    """PSI's 95 % point under no shift: χ²(bins − 1) · (1/n + 1/m)."""
    return CHI2_95_9 * (1 / n_log + 1 / n_reference)


def evaluation_points(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points t, the log's empirical CDF at t and just below t: every distinct score, or a
    large log's quantiles."""
    s = np.sort(scores)
    t = np.unique(s) if len(s) <= EVALUATION_POINTS else np.unique(np.quantile(s, LOG_LEVELS))
    at = np.searchsorted(s, t, side="right") / len(s)
    below = np.searchsorted(s, t, side="left") / len(s)
    return t, at, below


class LogCurve:
    """The log's empirical CDF, and its distances to a model CDF."""

    def __init__(self, scores: np.ndarray) -> None:
        self.n = len(scores)
        self.t, self.at, self.below = evaluation_points(scores)
        # just below each point (the model's left limit there), well within float resolution
        self.t_below = self.t - 1e-12 * np.maximum(1.0, np.abs(self.t))

    def ks(self, model: Callable[[np.ndarray], np.ndarray]) -> float:
        return float(
            max(
                np.max(np.abs(self.at - model(self.t))),
                np.max(np.abs(self.below - model(self.t_below))),
            )
        )


def diagnose(
    reference: Reference,
    best_scores: np.ndarray,
    ratios: tuple[np.ndarray, np.ndarray] | None = None,
) -> Diagnosis:
    """The shift the log's best scores show against `reference` (a query without candidates
    counts as score 0, as in the calibration). `ratios`: the calibration's recorded top-2 ratio
    quantiles and the log's ratios, compared the same way when given."""
    scores = _as_scores(best_scores)
    if len(scores) == 0:
        raise ValueError("no query in the log to compare with the calibration")
    curve = LogCurve(scores)
    noise = ks_noise(curve.n, reference.queries)
    ks = curve.ks(_mixture(reference, None))
    rate_fit = _rate_scale_held(reference, curve, noise)
    location_scale = _rates_location_scale(reference, curve, noise)
    shift = _shift(ks <= noise, rate_fit, location_scale, reference.implied_rate)
    ratio_ks = None if ratios is None else _ks_to_quantiles(*ratios)
    return Diagnosis(
        shift=shift,
        log_queries=curve.n,
        reference_queries=reference.queries,
        ks=ks,
        ks_noise=noise,
        psi=_psi(reference, scores),
        psi_noise=psi_noise(curve.n, reference.queries),
        rate_estimate=rate_fit.estimate,
        rates_scale_held=rate_fit.consistent,
        rates_location_scale=location_scale.consistent,
        reference_rate=reference.implied_rate,
        location_scale_at_reference_rate=location_scale.at_reference_rate,
        ratio_ks=ratio_ks,
        ratio_ks_noise=None if ratios is None else ks_noise(len(ratios[1]), reference.queries),
    )


@dataclass(frozen=True)
class RateFit:
    estimate: float | None
    consistent: tuple[float, float] | None


def _rate_scale_held(reference: Reference, curve: LogCurve, noise: float) -> RateFit:
    """The mixture rate closest to the log (least squares on its CDF, linear in the rate) and
    the rates whose mixture passes the KS test."""
    if reference.p_good is None:
        return RateFit(None, None)
    good = reference.cdf(curve.t, reference.weights(1.0))
    bad = reference.cdf(curve.t, reference.weights(0.0))
    spread = float(np.sum((good - bad) ** 2))
    estimate = (
        None
        if spread <= 0
        else float(np.clip(np.sum((curve.at - bad) * (good - bad)) / spread, 0.0, 1.0))
    )
    passing = [float(r) for r in RATE_GRID if curve.ks(_mixture(reference, float(r))) <= noise]
    return RateFit(estimate, _span(passing))


def _mixture(
    reference: Reference, rate: float | None, a: float = 0.0, b: float = 1.0
) -> Callable[[np.ndarray], np.ndarray]:
    """The CDF of the reference's classes mixed at `rate` (None: as recorded), moved to a + b·s₀."""
    weights = reference.weights(rate)
    return lambda s: reference.cdf(s, weights, a, b)


def _span(rates: list[float]) -> tuple[float, float] | None:
    return (min(rates), max(rates)) if rates else None


@dataclass(frozen=True)
class LocationScaleFit:
    consistent: tuple[float, float] | None
    at_reference_rate: tuple[float, float]
    fits_at_reference_rate: bool


def _rates_location_scale(reference: Reference, curve: LogCurve, noise: float) -> LocationScaleFit:
    """For each rate (and the map's own), the location-scale move of the mixture closest to the
    log (on its quantiles), and whether it passes the KS test."""
    own = reference.implied_rate
    rates = [] if reference.p_good is None else [float(r) for r in RATE_GRID]
    passing = [r for r in rates if _moved_fit(reference, curve, r)[1] <= noise]
    (a, b), own_ks = _moved_fit(reference, curve, own)
    return LocationScaleFit(_span(passing), (a, b), own_ks <= noise)


def _moved_fit(
    reference: Reference, curve: LogCurve, rate: float | None
) -> tuple[tuple[float, float], float]:
    """The location-scale move of the mixture at `rate` closest to the log — the least-squares
    line through the log's quantiles against the mixture's at the levels 0.05, 0.10, …, 0.95 —
    and its KS distance to the log."""
    weights = reference.weights(rate)
    cumulative = np.concatenate([[0.0], np.cumsum(weights)])
    mixture = np.interp(FIT_LEVELS, cumulative, reference.quantiles)
    log = np.interp(FIT_LEVELS, curve.at, curve.t)
    spread = float(np.sum((mixture - mixture.mean()) ** 2))
    b = float(np.sum((mixture - mixture.mean()) * (log - log.mean())) / spread) if spread else 0.0
    if b <= 0:  # a constant reference, or a log that reverses it: no move fits
        return (0.0, 1.0), 1.0
    a = float(log.mean() - b * mixture.mean())
    return (a, b), curve.ks(_mixture(reference, rate, a, b))


def _shift(
    unmoved: bool, rate: RateFit, location_scale: LocationScaleFit, own_rate: float | None
) -> Shift:
    if unmoved:
        return "none"
    rate_fits = rate.consistent is not None
    scale_fits = location_scale.fits_at_reference_rate and own_rate is not None
    if rate_fits and scale_fits:
        return "inseparable"
    if rate_fits:
        return "rate"
    if scale_fits:
        return "scale"
    return "other"


def _psi(reference: Reference, scores: np.ndarray) -> float:
    """PSI over the reference's deciles: Σ (a − e)·ln(a / e)."""
    edges = reference.quantiles[:: (len(reference.quantiles) - 1) // PSI_BINS]
    inner = edges[1:-1]
    expected = np.diff(np.concatenate([[0.0], _mixture(reference, None)(inner), [1.0]]))
    actual = np.diff(
        np.concatenate(
            [[0.0], np.searchsorted(np.sort(scores), inner, "right") / len(scores), [1.0]]
        )
    )
    e, a = np.maximum(expected, PSI_FLOOR), np.maximum(actual, PSI_FLOOR)
    return float(np.sum((a - e) * np.log(a / e)))


def _ks_to_quantiles(recorded: np.ndarray, values: np.ndarray) -> float:
    """KS of `values` against a distribution recorded at quantiles 0, 0.01, …, 1."""
    reference = Reference.recorded(list(recorded), 1, None)
    return LogCurve(_as_scores(values)).ks(_mixture(reference, None))


def _as_scores(values: np.ndarray) -> np.ndarray:
    """A query without candidates (NaN) counts as 0, as in the calibration."""
    return np.asarray(np.nan_to_num(np.asarray(values, dtype=float), nan=0.0))


Adaptation = Literal["keep", "prior", "quantile"]


@dataclass(frozen=True)
class Choice:
    """What a label-free recalibration does with the diagnosis, and why (one line)."""

    adapt: Adaptation
    reason: str


def choose(diagnosis: Diagnosis, shipped_mean: float) -> Choice:
    """Adapt only what the diagnosis supports, and only when it refutes the shipped map: the
    shipped map's mean p_good on the log (its rate there) outside every rate consistent with the
    log under the explanation found. Otherwise the shipped map stays — moving it could only
    replace one unchecked assumption with another."""
    held, moved = diagnosis.rates_scale_held, diagnosis.rates_location_scale
    if diagnosis.shift == "rate" and held is not None and not _within(shipped_mean, held):
        if diagnosis.degenerate_rate:
            return Choice(
                "keep",
                f"{_settle(diagnosis)}; the rate estimate "
                f"{diagnosis.rate_estimate} is degenerate, so no map is written from it",
            )
        return Choice(
            "prior",
            f"the rate moved to {diagnosis.rate_estimate:.3f}; the shipped "
            f"map's {shipped_mean:.3f} is outside {held[0]:.2f}–{held[1]:.2f}",
        )
    if diagnosis.shift == "scale" and moved is not None and not _within(shipped_mean, moved):
        return Choice(
            "quantile",
            f"the scale moved; the shipped map's rate on the log, "
            f"{shipped_mean:.3f}, is outside {moved[0]:.2f}–{moved[1]:.2f}",
        )
    if diagnosis.shift == "scale" and not DEGENERATE <= shipped_mean <= 1.0 - DEGENERATE:
        # a moved scale lets any rate fit, the shipped map's too; but kept, it would be a
        # degenerate map on this log (every query p_good ≈ 0 or 1)
        return Choice(
            "quantile",
            f"the scale moved, and on it the shipped map's rate, {shipped_mean:.3f}, is degenerate",
        )
    if diagnosis.shift == "none":
        return Choice("keep", "no shift: the shipped map holds")
    if diagnosis.shift in ("rate", "scale"):
        return Choice(
            "keep",
            f"{diagnosis.shift} shift, but the shipped map's rate on the log, "
            f"{shipped_mean:.3f}, is consistent with it: kept",
        )
    return Choice("keep", _settle(diagnosis))


def _within(value: float, interval: tuple[float, float]) -> bool:
    return interval[0] <= value <= interval[1]


def _settle(diagnosis: Diagnosis) -> str:
    return (
        f"{SHIFT_MEANING[diagnosis.shift]}: the shipped map is kept; "
        "30 labelled queries (--labels) would settle it"
    )
