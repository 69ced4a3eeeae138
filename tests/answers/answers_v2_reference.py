"""Independent plain-Python reference (test oracle) of ``answer_v2``: answer_v1's columns from
``answers_reference.score_answer``, then seed 001 §未来改进 1 and 2 and the streaming start, from
the rules in ``docs/answers.md`` (section "answer_v2"), written without reading the SQL:

* certainty = (1 − w)·lexicon + w·exp(mean logprob) for an answer with tokens, clamped to [0, 1];
  the mean is a plain sum in token order divided by the count;
* r̄ = Σ rating·0.5^(age/h) / Σ 0.5^(age/h), age = (as_of − given_at) in days, literally so (no
  shift of the ages): the SQL counts ages from the newest rating, the same ratio;
* percentage' = clamp(percentage + weight·r̄, 0, 100), the level recomputed from it;
* a streaming answer: total and percentages None, score_level = the start level, then lowered
  by its events as in answer_v1.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from typing import Any

from .answers_reference import OUTPUT_COLUMNS, SEVERITIES, clamp, load_params, lower_level

V2_COLUMNS: tuple[str, ...] = (
    *OUTPUT_COLUMNS[: OUTPUT_COLUMNS.index("certainty")],
    "lexicon_certainty",
    "logprob_tokens",
    "mean_logprob",
    "token_probability",
    "certainty",
    "streaming",
    "total",
    "factor_percentage",
    "feedback_count",
    "feedback_rating",
    "feedback_points",
    *OUTPUT_COLUMNS[OUTPUT_COLUMNS.index("percentage") :],
)
"""The columns of answer_v2's ``answers.parquet``, in order."""


def load_v2_params(base: str = "answer_v1") -> dict[str, Any]:
    """answer_v2's parameters (``answer_v1``) or answer_v2_en's (``answer_v1_en``), frozen."""
    params = dict(load_params(base))
    params.update(load_params("answer_v2_blocks"))
    return params


def level_of(percentage: float, levels: Mapping[str, Any]) -> str:
    rounded = round(percentage, 6)
    if rounded >= float(levels["high_at_least"]):
        return "high"
    if rounded >= float(levels["medium_at_least"]):
        return "medium"
    return "low"


def decayed_mean(
    ratings: Sequence[tuple[float, dt.datetime]], as_of: dt.datetime, half_life: float
) -> float | None:
    """r̄ of one answer's (rating, given_at) ratings; None without ratings."""
    if not ratings:
        return None
    top = 0.0
    bottom = 0.0
    for rating, given_at in ratings:
        age_days = (as_of - given_at).total_seconds() / 86400.0
        weight = 0.5 ** (age_days / half_life)
        top += rating * weight
        bottom += weight
    return top / bottom


def score_v2(
    row: Mapping[str, Any],
    logprobs: Sequence[tuple[int, float]],
    ratings: Sequence[tuple[float, dt.datetime]],
    as_of: dt.datetime | None,
    streaming: bool,
    events: Sequence[str],
    params: Mapping[str, Any],
) -> dict[str, Any]:
    """answer_v2's row from answer_v1's ``row`` (the reference's, for the same answer and events)."""
    out = dict(row)
    lexicon = row["certainty"]
    out["lexicon_certainty"] = lexicon
    out["logprob_tokens"] = len(logprobs)
    if logprobs:
        total_lp = 0.0
        for _, lp in sorted(logprobs):
            total_lp += lp
        mean = total_lp / len(logprobs)
        p = math.exp(mean)
        w = float(params["logprob_certainty"]["weight"])
        out.update(
            mean_logprob=mean, token_probability=p, certainty=clamp((1 - w) * lexicon + w * p)
        )
    else:
        out.update(mean_logprob=None, token_probability=None, certainty=lexicon)
    weights = params["weights"]
    factors = ("citation_quality", "answer_quality", "retrieval", "certainty")
    total = 0.0
    for f in factors:
        total += float(weights[f]) * out[f]
    max_total = sum(float(weights[f]) for f in factors)
    fb = params["feedback"]
    r = None if as_of is None else decayed_mean(ratings, as_of, float(fb["half_life_days"]))
    points = float(fb["weight"]) * (r or 0.0)
    out.update(
        streaming=streaming, feedback_count=len(ratings), feedback_rating=r, feedback_points=points
    )
    if streaming:
        out.update(total=None, factor_percentage=None, percentage=None)
        score_level = str(params["streaming"]["start_level"])
    else:
        factor_percentage = 100.0 * total / max_total
        percentage = clamp(factor_percentage + points, 0.0, 100.0)
        out.update(total=total, factor_percentage=factor_percentage, percentage=percentage)
        score_level = level_of(percentage, params["levels"])
    level = score_level
    for severity in SEVERITIES:
        target = str(params["contradictions"][severity])
        if severity in events and target != "warn":
            level = lower_level(level, target)
    out.update(score_level=score_level, level=level)
    return {column: out[column] for column in V2_COLUMNS}
