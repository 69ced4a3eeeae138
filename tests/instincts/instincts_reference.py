"""Independent plain-Python reference implementation (test oracle) of the ``instinct_v1`` policy.

Specification: the seed ``docs/specs/004-instinct-confidence.txt`` (复合置信度评分系统,
AgentMind), whose TypeScript functions are the authority, and ``docs/instincts.md``; the
parameters are the seed's numbers, copied by hand into ``tests/instincts/seed_parameters.yaml``
and frozen there (never read from the packaged policy, so a wrong number in the policy makes the
code and this oracle disagree). Each function below is a literal transcription of one TypeScript
function:

* ``frequency_score``     = ``calculateFrequencyScore(observations, contradictions)``;
* ``effectiveness_score`` = ``calculateEffectivenessScore(records)`` (Wilson lower bound, z 1.96),
  with the records given as counts ``positive`` / ``negative`` / ``neutral``;
* ``human_score``         = ``calculateHumanScore(approvals, rejections, reflectApproved)``, the
  learning-rate loop exactly as written (approvals first, then rejections);
* ``composite_confidence``= ``calculateCompositeConfidence(f, e, h)``: ``composite * 0.7`` when a
  dimension is below 0.2 (NOT clamped, as the seed), else ``clamp(composite, 0, 1)``;
* ``tier_of``             = the ``POLICIES`` table (``confidenceRange`` ``[lo, hi)``, highest
  first);
* ``replay``              = ``UPDATE_RULES`` deltas applied event after event, each score clamped
  to [0, 1] after every event, in ``decimal.Decimal`` (exact: the store keeps DECIMAL(4,3)).

The float functions use Python floats, which are IEEE-754 doubles like JavaScript's ``number``,
with the operations in the seed's order, so they return the very double the TypeScript returns.
One consequence, kept on purpose: ``0.3 - 1 * 0.1`` is ``0.19999999999999998`` in doubles, so a
frequency of "0.2" reached through a contradiction is *below* 0.2 and triggers the x0.7 penalty.

This module uses only the standard library (``math``, ``decimal``) and PyYAML to read its
parameters; it shares no code and no parameters with the production (SQL) implementation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

SEED_PARAMETERS = Path(__file__).resolve().parent / "seed_parameters.yaml"

DIMENSIONS: tuple[str, ...] = ("frequency", "effectiveness", "human")
"""The three dimensions, in the order of the UPDATE_RULES deltas and of the weights."""

Scores = tuple[Decimal, Decimal, Decimal]
"""(freq_score, eff_score, human_score) as stored (DECIMAL(4,3))."""


class _DecimalLoader(yaml.SafeLoader):
    """A YAML loader reading every float as the ``Decimal`` of its literal text ("0.05", not the
    double nearest to it), so that the update rules are exact; the float formulas convert back
    with ``float()``, which is correctly rounded and gives the same double as the literal."""


def _decimal_float(loader: yaml.SafeLoader, node: yaml.Node) -> Decimal:
    text = str(loader.construct_scalar(node)).replace("_", "")  # type: ignore[arg-type]
    return Decimal(text)


_DecimalLoader.add_constructor("tag:yaml.org,2002:float", _decimal_float)


def load_parameters() -> dict[str, Any]:
    """The seed's parameters (``seed_parameters.yaml``), every non-integer number a ``Decimal``."""
    with open(SEED_PARAMETERS, encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_DecimalLoader)


def _f(x: Any) -> float:
    return float(x)


# --------------------------------------------------------------------------------------------
# 维度一：频率分 calculateFrequencyScore
# --------------------------------------------------------------------------------------------


def frequency_score(observations: int, contradictions: int, params: Mapping[str, Any]) -> float:
    """``calculateFrequencyScore``: the first bin whose ``observations <= at_most`` gives the base
    (0.3 / 0.5 / 0.7 / 0.85), else 0.95; ``Math.max(0, base - contradictions * 0.1)``."""
    freq = params["frequency"]
    base = _f(freq["above"])
    for b in freq["bins"]:  # the ternary chain, in the seed's order
        if observations <= b["at_most"]:
            base = _f(b["base"])
            break
    contradiction_penalty = contradictions * _f(freq["contradiction_penalty"])
    return max(0.0, base - contradiction_penalty)


# --------------------------------------------------------------------------------------------
# 维度二：效果分 calculateEffectivenessScore
# --------------------------------------------------------------------------------------------


def effectiveness_score(
    positive: int, negative: int, neutral: int, params: Mapping[str, Any]
) -> float:
    """``calculateEffectivenessScore`` of ``positive + negative + neutral`` records: 0.5 when there
    are none, else the Wilson lower bound of ``positive / total`` (neutral records count in the
    total; ``negativeCount`` is computed by the seed but not used), clamped to [0, 1]."""
    eff = params["effectiveness"]
    total = positive + negative + neutral  # records.length
    if total == 0:
        return _f(eff["no_applications"])
    positive_count = positive
    z = _f(eff["z"])
    p = positive_count / total
    denominator = 1 + z * z / total
    center = (p + z * z / (2 * total)) / denominator
    margin = z * math.sqrt((p * (1 - p) + z * z / (4 * total)) / total) / denominator
    return max(0.0, min(1.0, center - margin))


# --------------------------------------------------------------------------------------------
# 维度三：人工分 calculateHumanScore
# --------------------------------------------------------------------------------------------


def human_score(
    approvals: int, rejections: int, reflect_approved: bool, params: Mapping[str, Any]
) -> float:
    """``calculateHumanScore``: 0.95 when approved by /reflect; 0.5 without reviews; else from the
    prior 0.5, ``score += 0.15 * (1 - score)`` per approval, then ``score -= 0.15 * score`` per
    rejection (the loops as written, not a closed form)."""
    human = params["human"]
    if reflect_approved:
        return _f(human["reflect_approved"])
    if approvals + rejections == 0:
        return 0.5
    score = _f(human["prior"])
    learning_rate = _f(human["learning_rate"])
    for _ in range(approvals):
        score = score + learning_rate * (1 - score)
    for _ in range(rejections):
        score = score - learning_rate * score
    return score


# --------------------------------------------------------------------------------------------
# 复合评分 calculateCompositeConfidence, 应用阈值策略 POLICIES
# --------------------------------------------------------------------------------------------


def composite_confidence(
    frequency: float, effectiveness: float, human: float, params: Mapping[str, Any]
) -> float:
    """``calculateCompositeConfidence``: ``f*0.35 + e*0.40 + h*0.25`` (left to right); if
    ``Math.min(f, e, h) < 0.2`` return ``composite * 0.7`` (not clamped), else clamp to [0, 1]."""
    w = params["weights"]
    composite = (
        frequency * _f(w["frequency"])
        + effectiveness * _f(w["effectiveness"])
        + human * _f(w["human"])
    )
    min_score = min(frequency, effectiveness, human)
    c = params["composite"]
    if min_score < _f(c["low_dimension_below"]):
        return composite * _f(c["low_dimension_factor"])
    return max(0.0, min(1.0, composite))


def tier_of(composite: float, params: Mapping[str, Any]) -> tuple[str, str]:
    """(tier, injection_method) of a composite: the first tier, highest first, whose lower edge
    ``at_least <= composite`` (a value on an edge belongs to the upper tier); below every edge
    (only a negative composite) the last tier."""
    tiers = params["tiers"]
    for t in tiers:
        if composite >= _f(t["at_least"]):
            return t["tier"], t["injection_method"]
    return tiers[-1]["tier"], tiers[-1]["injection_method"]


def score_row(row: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """One ``score_counts`` input row (instinct_id, observation_count, contradiction_count,
    positive_count, application_count, approvals, rejections, reflect_approved) scored: the
    output row of the brief. ``application_count`` counts every application, so the
    non-positive ones are ``application_count - positive_count`` (negative or neutral: the
    Wilson bound does not tell them apart)."""
    f = frequency_score(int(row["observation_count"]), int(row["contradiction_count"]), params)
    pos = int(row["positive_count"])
    e = effectiveness_score(pos, int(row["application_count"]) - pos, 0, params)
    h = human_score(
        int(row["approvals"]), int(row["rejections"]), bool(row["reflect_approved"]), params
    )
    c = composite_confidence(f, e, h, params)
    tier, method = tier_of(c, params)
    return {
        "instinct_id": row["instinct_id"],
        "frequency_score": f,
        "effectiveness_score": e,
        "human_score": h,
        "composite": c,
        "tier": tier,
        "injection_method": method,
    }


# --------------------------------------------------------------------------------------------
# 置信度变化规则 UPDATE_RULES
# --------------------------------------------------------------------------------------------


def initial_scores(params: Mapping[str, Any]) -> Scores:
    """New instincts: (0.30, 0.50, 0.50) (the schema's defaults, the policy's ``initial``)."""
    init = params["initial"]
    return tuple(Decimal(init[d]) for d in DIMENSIONS)  # type: ignore[return-value]


def _clamp01(x: Decimal) -> Decimal:
    return max(Decimal(0), min(Decimal(1), x))


def apply_event(scores: Scores, event_type: str, params: Mapping[str, Any]) -> Scores:
    """The trigger's (frequencyDelta, effectivenessDelta, humanDelta) added, each result clamped
    to [0, 1]. An unknown trigger raises ``KeyError``."""
    deltas = params["update_rules"][event_type]
    return tuple(_clamp01(s + Decimal(d)) for s, d in zip(scores, deltas, strict=True))  # type: ignore[return-value]


def replay(start: Scores, event_types: Sequence[str], rules: Mapping[str, Any]) -> list[Scores]:
    """The scores after each event of ``event_types`` (already in event order), from ``start``.
    ``rules`` is the policy's parameters (or any mapping with an ``update_rules`` key)."""
    scores: Scores = tuple(Decimal(s) for s in start)  # type: ignore[assignment]
    out: list[Scores] = []
    for event_type in event_types:
        scores = apply_event(scores, event_type, rules)
        out.append(scores)
    return out


def replay_rows(
    events: Iterable[Mapping[str, Any]],
    params: Mapping[str, Any],
    start: Mapping[str, Scores] | None = None,
) -> list[dict[str, Any]]:
    """``replay_events`` in plain Python: events (instinct_id, event_id, event_type, occurred_at)
    sorted by (instinct_id, occurred_at, event_id), each instinct replayed from its ``start``
    (default the policy's initial scores); one row per event with the scores after it."""
    ordered = sorted(events, key=lambda e: (e["instinct_id"], e["occurred_at"], e["event_id"]))
    start = start or {}
    current: dict[str, Scores] = {}
    out: list[dict[str, Any]] = []
    for ev in ordered:
        iid = ev["instinct_id"]
        if iid not in current:
            current[iid] = start.get(iid, initial_scores(params))
        [current[iid]] = replay(current[iid], [ev["event_type"]], params)
        f, e, h = current[iid]
        out.append(
            {
                "instinct_id": iid,
                "event_id": ev["event_id"],
                "event_type": ev["event_type"],
                "freq_score": f,
                "eff_score": e,
                "human_score": h,
            }
        )
    return out
