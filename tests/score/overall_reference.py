"""Independent plain-Python reference implementation (test oracle) of the ``overall_v1`` policy.

Specification: ``docs/specs/000-overall-score.txt`` (GitCook-Agent 决策规范), sections 4-8:

* §4   per-query P10/P90 normalisation (``norm``), ``log_chunks = ln(total_chunks + 1)``;
* §5   the three sub-scores S_strength, S_coverage, S_stability;
* §6   the weighted geometric mean OverallScore, the zero rule and the 0.01 floor;
* §7   confidence level and risk flags;
* §8   need_hitl (relative confidence) and web_fallback (absolute confidence / empty result).

Points the seed leaves open were fixed by the project brief and are implemented literally here
(quantile method, zero-spread rule, tie-breaking, flag thresholds, empty-result queries...).
The comments of every function say which.

``overall_v2`` (issue 4) adds, beyond the seed, written from the issue and the feature docs:
``strength_evidence`` (§5.1's multi-evidence term read from ``parent_rrf`` instead of ``rrf_sum``),
and two sub-scores joining the geometric mean only when their weight is non-zero:
``S_agreement = source_agreement`` and ``S_separation = b + (1 - b) * score_lead``.

Issue 50 adds two optional blocks, absent from ``OVERALL_V1_PARAMS``: ``diagnostics`` (§13: each
flag of the query → recommended actions, and whether it asks a human) and ``coverage_smoothing``
(§4.4: the ratio the sub-scores read, shrunk towards a prior by pseudo-chunks).

This module deliberately uses only the standard library (``math``): it must not share numeric
code with the production (SQL) implementation, nor with numpy.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FEATURES: tuple[str, ...] = ("rrf_sum", "max_score", "coverage", "log_chunks")
"""Features that are normalised (§4.3, §5.3), in the order used for ``zero_spread:<f>`` flags."""

SUBSCORES: tuple[str, ...] = ("strength", "coverage", "stability")
"""Sub-score names (§3), in the order used for ``zero_subscore:`` / ``floored:`` flags."""

RISK_FLAGS: tuple[str, ...] = (
    "low_coverage",
    "single_spike",
    "sparse_evidence",
    "huge_doc_sparse",
    "ambiguous_candidate",
)
"""Risk flag names in the order of the §7.3 table (and of the ``risk_flags`` list)."""

INPUT_KEYS: tuple[str, ...] = (
    "query_id",
    "parent_id",
    "rrf_sum",
    "max_score",
    "coverage",
    "total_chunks",
    "coverage_ratio",
)
"""Keys every input row must carry (§1.2 plus the two identifiers)."""

OVERALL_V1_PARAMS: dict[str, Any] = {
    # §5.1, §5.2 defaults
    "alpha": 0.6,
    "beta": 0.5,
    # §6.1 defaults
    "w1": 0.5,
    "w2": 0.3,
    "w3": 0.2,
    "strength_evidence": "rrf_sum",
    "w_agreement": 0.0,
    "w_separation": 0.0,
    "separation_base": 0.5,
    # §10 example thresholds_used
    "T_low": 0.35,
    "T_high": 0.68,
    # §8.1 default
    "R_hitl": 0.92,
    # §6.2 optional smoothing max(S, 0.01)
    "subscore_floor": 0.01,
    "normalization": {
        "mode": "per_query",  # §4.2 (or "reference": fixed bounds per feature)
        "p_lo": 0.1,  # P10
        "p_hi": 0.9,  # P90
        "eps": 1e-9,
        "zero_spread_value": 0.0,
        "coverage": "quantile",  # §4.3 (or "divide_by_max": "直接除以最大可取值")
        "coverage_max": None,
        "reference": None,
    },
    "risk_flags": {
        "low_coverage": {"strength_at_least": 0.7, "coverage_below": 0.3},
        "single_spike": {"max_score_norm_at_least": 0.8, "rrf_sum_norm_below": 0.3},
        "sparse_evidence": {"coverage_ratio_below": 0.1},
        "huge_doc_sparse": {"total_chunks_at_least": 50, "coverage_ratio_below": 0.2},
        "ambiguous_candidate": {"ratio_at_least": 0.92},
    },
}
"""Default policy parameters (``score_policy_version = overall_v1``, §9.4)."""

OPTIONAL_BLOCKS: tuple[str, ...] = ("diagnostics", "coverage_smoothing")
"""Top-level parameter blocks a policy may add (issue 50); absent, they change nothing."""


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------


def default_params() -> dict[str, Any]:
    """Return a deep copy of :data:`OVERALL_V1_PARAMS` that the caller may modify."""
    return copy.deepcopy(OVERALL_V1_PARAMS)


def with_overrides(
    params: Mapping[str, Any], overrides: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Return a deep copy of ``params`` with dotted-key overrides applied.

    ``{"normalization.mode": "reference", "T_low": 0.5}`` sets ``params["normalization"]["mode"]``
    and ``params["T_low"]``.  Every path must already exist (typos fail loudly); the value of
    the last component may be replaced by anything, including a whole mapping.
    """
    result = copy.deepcopy(dict(params))
    for dotted, value in (overrides or {}).items():
        parts = dotted.split(".")
        node: Any = result
        for part in parts[:-1]:
            if not isinstance(node, dict) or part not in node:
                raise KeyError(f"unknown parameter path {dotted!r}")
            node = node[part]
        optional = len(parts) == 1 and parts[0] in OPTIONAL_BLOCKS
        if not isinstance(node, dict) or (parts[-1] not in node and not optional):
            raise KeyError(f"unknown parameter path {dotted!r}")
        node[parts[-1]] = copy.deepcopy(value)
    return result


# --------------------------------------------------------------------------------------------
# §4 Normalisation
# --------------------------------------------------------------------------------------------


def clamp(x: float, lo: float = 0.0, hi: float = 1.0) -> float:
    """``clamp(x, lo, hi)`` as used in §4.2 and §5.3."""
    return min(max(x, lo), hi)


def quantile_linear(values: Sequence[float], p: float) -> float:
    """Continuous quantile with linear interpolation (numpy's default ``method='linear'``).

    §4.2 names P10/P90 "the 10/90 percentiles of this round's candidate set" without fixing the
    estimator; the brief fixes it: sort the values, take the position ``h = (n - 1) * p`` and
    interpolate linearly between the sorted values at ``floor(h)`` and ``ceil(h)``.
    """
    if not values:
        raise ValueError("quantile of an empty sequence")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"quantile probability out of [0, 1]: {p!r}")
    ordered = sorted(float(v) for v in values)
    h = (len(ordered) - 1) * p
    i_lo = math.floor(h)
    i_hi = math.ceil(h)
    a = ordered[i_lo]
    b = ordered[i_hi]
    if i_lo == i_hi or a == b:
        return a
    return a + (h - i_lo) * (b - a)


def log_chunks_of(total_chunks: float) -> float:
    """§4.4 / §5.3: ``log_chunks = log(total_chunks + 1)``, natural logarithm."""
    return math.log(total_chunks + 1)


def norm(x: float, lo: float, hi: float, eps: float, zero_spread_value: float) -> float:
    """§4.2: ``norm(x) = clamp((x - P10) / (P90 - P10 + eps), 0, 1)``.

    Brief: when the spread ``hi - lo`` is exactly 0 *and* ``x == lo`` the result is
    ``zero_spread_value`` (otherwise 0/eps would give 0 for every candidate); a value off a
    zero-width range still follows the formula (and so clamps to 0 or 1).
    """
    if hi - lo == 0 and x == lo:
        return zero_spread_value
    return clamp((x - lo) / (hi - lo + eps), 0.0, 1.0)


def coverage_norm_divide_by_max(coverage: float, coverage_max: float) -> float:
    """§4.3 alternative: "若 coverage 本身是小整数，也可直接除以最大可取值" — ``clamp(c / c_max)``."""
    return clamp(coverage / coverage_max, 0.0, 1.0)


def coverage_uses_quantiles(norm_params: Mapping[str, Any]) -> bool:
    """True unless coverage is normalised by ``divide_by_max`` (§4.3)."""
    mode = norm_params["coverage"]
    if mode not in ("quantile", "divide_by_max"):
        raise ValueError(f"unknown normalization.coverage {mode!r}")
    return mode == "quantile"


def feature_bounds(
    feature: str, values: Sequence[float], norm_params: Mapping[str, Any]
) -> tuple[float, float]:
    """The ``(lo, hi)`` used by :func:`norm` for one feature of one query.

    ``per_query`` (§4.2): lo = P``p_lo``, hi = P``p_hi`` of the query's candidate values.
    ``reference`` (brief): fixed bounds ``normalization.reference[feature]``.
    """
    mode = norm_params["mode"]
    if mode == "per_query":
        return (
            quantile_linear(values, norm_params["p_lo"]),
            quantile_linear(values, norm_params["p_hi"]),
        )
    if mode == "reference":
        reference = norm_params["reference"]
        if not reference or feature not in reference:
            raise ValueError(f"normalization.reference has no bounds for {feature!r}")
        lo, hi = reference[feature]
        return float(lo), float(hi)
    raise ValueError(f"unknown normalization.mode {mode!r}")


# --------------------------------------------------------------------------------------------
# §5 Sub-scores and §6 OverallScore
# --------------------------------------------------------------------------------------------


def s_strength(rrf_sum_norm: float, max_score_norm: float, alpha: float) -> float:
    """§5.1: ``S_strength = α * rrf_sum_norm + (1 - α) * max_score_norm``."""
    return alpha * rrf_sum_norm + (1 - alpha) * max_score_norm


def s_coverage(coverage_norm: float, coverage_ratio: float, beta: float) -> float:
    """§5.2: ``S_coverage = β * coverage_norm + (1 - β) * coverage_ratio``."""
    return beta * coverage_norm + (1 - beta) * coverage_ratio


def s_stability(coverage_ratio: float, log_chunks_norm: float) -> float:
    """§5.3: ``S_stability = clamp(coverage_ratio * (0.5 + 0.5 * log_chunks_norm), 0, 1)``."""
    return clamp(coverage_ratio * (0.5 + 0.5 * log_chunks_norm), 0.0, 1.0)


def overall_score(
    subscores: Sequence[float], weights: Sequence[float], subscore_floor: float
) -> float:
    """§6.1/§6.2: weighted geometric mean of the sub-scores.

    * §6.2 "若任一分项为 0，则 OverallScore 为 0": any sub-score exactly 0 gives 0.0.
    * §6.2 "S_* = max(S_*, 0.01)": otherwise every sub-score is floored at ``subscore_floor``.
    * §6.1 ``S1^w1 * S2^w2 * S3^w3``; the brief normalises by the weight sum, computed in log space:
      ``exp((w1 ln S1' + w2 ln S2' + w3 ln S3') / (w1 + w2 + w3))`` (identical when Σw = 1).
    """
    if any(s == 0 for s in subscores):
        return 0.0
    total_weight = sum(weights)
    log_sum = 0.0
    for s, w in zip(subscores, weights, strict=True):
        log_sum += w * math.log(max(s, subscore_floor))
    return math.exp(log_sum / total_weight)


# --------------------------------------------------------------------------------------------
# §7 Confidence and risk flags, §8 HITL / web fallback
# --------------------------------------------------------------------------------------------


def confidence_level(best_overall_score: float | None, t_low: float, t_high: float) -> str:
    """§7.2: ``< T_low`` → low; ``T_low ≤ s < T_high`` → medium; ``≥ T_high`` → high.

    An empty-result query (no best score) is ``low`` (brief).
    """
    if best_overall_score is None or best_overall_score < t_low:
        return "low"
    if best_overall_score < t_high:
        return "medium"
    return "high"


def top2_ratio(ranked_scores: Sequence[float]) -> float | None:
    """§8.1: ``ratio_p = score2 / score1`` over the scores in rank order.

    ``None`` with fewer than two candidates or when ``score1 == 0`` (brief).
    """
    if len(ranked_scores) < 2 or ranked_scores[0] == 0:
        return None
    return ranked_scores[1] / ranked_scores[0]


def need_hitl(ratio: float | None, r_hitl: float) -> bool:
    """§8.1: ``ratio_p ≥ R_hitl`` (top1 ≠ top2 always holds: parent ids are unique per query)."""
    return ratio is not None and ratio >= r_hitl


def web_fallback(has_candidates: bool, level: str, hitl: bool) -> bool:
    """§8.2: empty result, or ``confidence_level = low`` that clarification (HITL) cannot fix."""
    return (not has_candidates) or (level == "low" and not hitl)


def coverage_ratio_smoothed(
    coverage_ratio: float, total_chunks: float, pseudo_chunks: float, prior: float
) -> float:
    """§4.4 "可选做平滑", read as additive smoothing of a proportion: the hit chunks
    (``coverage_ratio * total_chunks``) plus ``pseudo_chunks`` imaginary chunks hit at the rate
    ``prior``, over ``total_chunks + pseudo_chunks``. ``pseudo_chunks = 2, prior = 0.5`` is
    Laplace's rule of succession (hits + 1) / (chunks + 2)."""
    hits = coverage_ratio * total_chunks
    return (hits + pseudo_chunks * prior) / (total_chunks + pseudo_chunks)


def query_flags(ranked: Sequence[Mapping[str, Any]]) -> list[str]:
    """The flags a query's diagnostics read: those of its best parent, and ambiguous_candidate,
    which §7.3 sets on the runner-up (it says that the top two are close, a property of the
    query)."""
    flags = list(ranked[0]["risk_flags"])
    if len(ranked) > 1 and "ambiguous_candidate" in ranked[1]["risk_flags"]:
        flags.append("ambiguous_candidate")
    return flags


def diagnosed(
    flags: Sequence[str], rules: Mapping[str, Mapping[str, Any]]
) -> tuple[list[str], bool]:
    """§13: the recommended actions of the flags that have a rule (each once, alphabetical), and
    whether one of those rules asks a human."""
    acting = [rules[flag] for flag in flags if flag in rules]
    actions = sorted({action for rule in acting for action in rule["actions"]})
    return actions, any(rule["need_hitl"] for rule in acting)


def risk_flags_of(
    row: Mapping[str, Any], ratio: float | None, thresholds: Mapping[str, Mapping[str, float]]
) -> dict[str, bool]:
    """§7.3 risk-flag table, with the brief's thresholds ("高" → ≥, "低/极低" → strict <).

    1. low_coverage: S_strength ≥ strength_at_least and S_coverage < coverage_below
    2. single_spike: max_score_norm ≥ max_score_norm_at_least and rrf_sum_norm < rrf_sum_norm_below
    3. sparse_evidence: coverage_ratio < coverage_ratio_below
    4. huge_doc_sparse: total_chunks ≥ total_chunks_at_least and coverage_ratio < its own threshold
    5. ambiguous_candidate: the rank-2 parent when top2_ratio ≥ ratio_at_least
    """
    lc = thresholds["low_coverage"]
    ss = thresholds["single_spike"]
    se = thresholds["sparse_evidence"]
    hd = thresholds["huge_doc_sparse"]
    ac = thresholds["ambiguous_candidate"]
    return {
        "low_coverage": row["s_strength"] >= lc["strength_at_least"]
        and row["s_coverage"] < lc["coverage_below"],
        "single_spike": row["max_score_norm"] >= ss["max_score_norm_at_least"]
        and row["evidence_norm"] < ss["rrf_sum_norm_below"],
        "sparse_evidence": row["coverage_ratio"] < se["coverage_ratio_below"],
        "huge_doc_sparse": row["total_chunks"] >= hd["total_chunks_at_least"]
        and row["coverage_ratio"] < hd["coverage_ratio_below"],
        "ambiguous_candidate": row["rank"] == 2
        and ratio is not None
        and ratio >= ac["ratio_at_least"],
    }


def row_flags_of(
    n_candidates: int,
    zero_spread_features: Sequence[str],
    subscores: Mapping[str, float],
    subscore_floor: float,
    names: Sequence[str] = SUBSCORES,
) -> list[str]:
    """Diagnostic flags (brief): ``single_candidate``, ``zero_spread:<f>``, ``zero_subscore:<s>``,
    ``floored:<s>`` — in that order, features and sub-scores in their canonical order."""
    flags: list[str] = []
    if n_candidates == 1:
        flags.append("single_candidate")
    flags.extend(f"zero_spread:{f}" for f in zero_spread_features)
    flags.extend(f"zero_subscore:{name}" for name in names if subscores[name] == 0)
    flags.extend(f"floored:{name}" for name in names if 0 < subscores[name] < subscore_floor)
    return flags


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------


def _group_by_query(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Group input rows by query id, checking keys and (query_id, parent_id) uniqueness."""
    groups: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    for row in rows:
        missing = [k for k in INPUT_KEYS if k not in row]
        if missing:
            raise KeyError(f"input row lacks {missing}: {row!r}")
        key = (row["query_id"], row["parent_id"])
        if key in seen:
            raise ValueError(f"duplicate (query_id, parent_id) {key!r}")
        seen.add(key)
        groups.setdefault(row["query_id"], []).append(dict(row))
    return groups


def _score_query(
    candidates: list[dict[str, Any]], params: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Score the candidate parents of one query; return (parent rows by rank, query row)."""
    norm_params = params["normalization"]
    eps = norm_params["eps"]
    zsv = norm_params["zero_spread_value"]
    coverage_quantile = coverage_uses_quantiles(norm_params)
    per_query = norm_params["mode"] == "per_query"
    n = len(candidates)

    for row in candidates:
        row["log_chunks"] = log_chunks_of(row["total_chunks"])

    # §4: bounds per feature over this query's candidates (or the reference bounds).
    evidence = params["strength_evidence"]
    features = (evidence,) + FEATURES[1:]
    bounds: dict[str, tuple[float, float]] = {}
    for feature in features:
        if feature == "coverage" and not coverage_quantile:
            continue
        bounds[feature] = feature_bounds(feature, [r[feature] for r in candidates], norm_params)
    zero_spread = [f for f, (lo, hi) in bounds.items() if per_query and hi - lo == 0]

    weight_of = {
        "strength": params["w1"],
        "coverage": params["w2"],
        "stability": params["w3"],
        "agreement": params["w_agreement"],
        "separation": params["w_separation"],
    }
    names = [
        n
        for n in ("strength", "coverage", "stability", "agreement", "separation")
        if n in SUBSCORES or weight_of[n] != 0
    ]
    floor = params["subscore_floor"]
    for row in candidates:
        for feature, (lo, hi) in bounds.items():
            row[f"{feature}_norm"] = norm(row[feature], lo, hi, eps, zsv)
        if not coverage_quantile:
            coverage_max = norm_params["coverage_max"]
            if coverage_max is None or coverage_max <= 0:
                raise ValueError("normalization.coverage_max must be > 0 with divide_by_max")
            row["coverage_norm"] = coverage_norm_divide_by_max(row["coverage"], coverage_max)
        row["evidence_norm"] = row[f"{evidence}_norm"]
        row["s_strength"] = s_strength(row["evidence_norm"], row["max_score_norm"], params["alpha"])
        ratio_read = row["coverage_ratio"]
        smoothing = params.get("coverage_smoothing")
        if smoothing is not None:
            ratio_read = coverage_ratio_smoothed(
                row["coverage_ratio"],
                row["total_chunks"],
                smoothing["pseudo_chunks"],
                smoothing["prior"],
            )
            row["coverage_ratio_smoothed"] = ratio_read
        row["s_coverage"] = s_coverage(row["coverage_norm"], ratio_read, params["beta"])
        row["s_stability"] = s_stability(ratio_read, row["log_chunks_norm"])
        if "agreement" in names:
            row["s_agreement"] = row["source_agreement"]
        if "separation" in names:
            base = params["separation_base"]
            row["s_separation"] = base + (1 - base) * row["score_lead"]
        kept = [n for n in names if weight_of[n] != 0]  # s^0 = 1: a zero weight leaves it out
        row["overall_score"] = overall_score(
            [row[f"s_{n}"] for n in kept], [weight_of[n] for n in kept], floor
        )

    # Rank: overall_score descending, ties by parent_id ascending (code-point order).
    ranked = sorted(candidates, key=lambda r: (-r["overall_score"], r["parent_id"]))
    ratio = top2_ratio([r["overall_score"] for r in ranked])
    for rank, row in enumerate(ranked, start=1):
        row["rank"] = rank
        row["n_candidates"] = n
        flags = risk_flags_of(row, ratio, params["risk_flags"])
        for name in RISK_FLAGS:
            row[f"flag_{name}"] = flags[name]
        row["risk_flags"] = [name for name in RISK_FLAGS if flags[name]]
        subs_by_name = {name: row[f"s_{name}"] for name in names}
        row["row_flags"] = row_flags_of(n, zero_spread, subs_by_name, floor, names)
        del row["evidence_norm"]

    best = ranked[0]
    level = confidence_level(best["overall_score"], params["T_low"], params["T_high"])
    hitl = need_hitl(ratio, params["R_hitl"])
    rules = params.get("diagnostics")
    actions: list[str] = []
    if rules is not None:
        actions, asks_human = diagnosed(query_flags(ranked), rules)
        hitl = hitl or asks_human
    query_row = {
        "query_id": best["query_id"],
        "best_parent_id": best["parent_id"],
        "best_overall_score": best["overall_score"],
        "confidence_level": level,
        "top2_ratio": ratio,
        "need_hitl": hitl,
        "web_fallback": web_fallback(True, level, hitl),
    }
    if rules is not None:
        query_row["actions"] = actions
    return ranked, query_row


def _empty_query_row(query_id: str, diagnostics: bool) -> dict[str, Any]:
    """§8.2 "或者检索结果为空": a listed query without candidates falls back to the web; it has
    no flags, so no diagnostic acts on it."""
    row: dict[str, Any] = {
        "query_id": query_id,
        "best_parent_id": None,
        "best_overall_score": None,
        "confidence_level": "low",
        "top2_ratio": None,
        "need_hitl": False,
        "web_fallback": True,
    }
    if diagnostics:
        row["actions"] = []
    return row


def score_reference(
    rows: list[dict[str, Any]],
    params: dict[str, Any],
    queries: list[str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Score candidate parents and queries under the ``overall_v1`` policy (§4-§8).

    ``rows``: one dict per (query_id, parent_id) with the keys of :data:`INPUT_KEYS`.
    ``params``: a full parameter dict shaped like :data:`OVERALL_V1_PARAMS`.
    ``queries``: optional list of all query ids; one with no rows is an empty-result query.
    Query ids that only occur in ``rows`` are scored as well (union).

    Returns ``(parent_rows, query_rows)``: parent rows (inputs plus every derived column)
    ordered by (query_id, rank), and one query row per query ordered by query_id.
    Inputs are not modified.
    """
    groups = _group_by_query(rows)
    parent_rows: list[dict[str, Any]] = []
    query_rows: list[dict[str, Any]] = []
    all_ids = set(groups) | set(queries or ())
    for query_id in sorted(all_ids):
        candidates = groups.get(query_id)
        if not candidates:
            query_rows.append(_empty_query_row(query_id, "diagnostics" in params))
            continue
        ranked, query_row = _score_query(candidates, params)
        parent_rows.extend(ranked)
        query_rows.append(query_row)
    return parent_rows, query_rows
