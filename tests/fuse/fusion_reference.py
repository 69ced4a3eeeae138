"""Independent plain-Python reference implementation (test oracle) of multi-source fusion.

Contract: ``docs/fusion-semantics.md`` ("Fusion semantics (seed 003)"), steps 1-6; seed
``docs/specs/003-hybrid-fusion.txt`` (§6.2 aligner, §6.3 normaliser, §6.4 fusion);
peer formulas: ``docs/reference/fusion-peers.md`` (b1 ranx, b2 Elasticsearch,
b3 OpenSearch, b4 Weaviate, b6 Qdrant).

Only the standard library is used (``math``, ``statistics``, ``re``): the oracle must not share
numeric code with the SQL implementation, nor with numpy / ranx (which are used by its
self-tests).

Entry point: :func:`fuse_reference` (``rows``, ``recipe``) -> fused rows.

Readings chosen where the contract leaves a point open (ranx's behaviour wins where ranx has the
feature; every point is marked ``READING`` in the code below):

R1  Rank derivation (Input) happens after the distance conversion of step 1 (a distance list is
    ranked by ascending distance) and before ``top_k``. A list whose rows do not all carry a
    rank gets every rank derived (given ranks are then ignored).
R2  Which rows form a list: the rows of one (query, source) left after ``top_k``; a declared
    source without rows for a query is *not* a list of that query (it adds no weight to a
    mean's denominator, no candidate to C). ``discover_sources: false`` drops rows of
    undeclared sources.
R3  Step 2's re-ranking also applies to doc-granularity rows (identity alignment): with target
    doc every list is re-ranked by aligned score desc, best original rank asc, parent id asc.
    This is ranx's behaviour (ranx ranks by score, ignoring any given rank). Aligned scores are
    compared after rounding to 12 decimals (same guard as step 5). Target block: no alignment,
    no re-ranking; the list rank is the log rank (given or derived).
R4  ``p`` (rank and borda normalisers) is ``r - 1`` with ``r`` the list rank, ``n`` the number
    of entries of the list. For every list produced by step 2 (and for block lists whose log
    ranks are 1..n) this is the 0-based position; it only matters for delayed-alignment lists,
    where expanded blocks keep their doc row's rank (so all blocks of one doc get the doc's
    rank-normalised value).
R5  ``l2`` is degenerate only when sqrt(sum s^2) < eps (the l2 bullet; ES and OpenSearch agree);
    a one-item l2 list gives s/|s| = +-1, *not* degenerate_value. Every other normaliser that
    has a degenerate value (minmax, max, sum, zscore, quantile, dbsf) is degenerate on a
    one-item list. ``max`` therefore gives degenerate_value on a constant list where ranx
    gives 1.0 (contract: "zero spread -> degenerate_value").
R6  ``quantile``: the degenerate rule applies when P_hi - P_lo == 0 and s == P_lo (other
    values clamp to 0 or 1 through the eps denominator). Continuous quantile = linear
    interpolation between order statistics at h = (n - 1) p (numpy "linear", DuckDB
    quantile_cont).
R7  ``borda``: a borda list contains every candidate of C for the *score-based* methods (so
    n_d counts it, as in ranx ``fuse(norm="borda", method="mnz")``); rank-based methods
    (rrf, isr) ignore the normaliser and use real list membership. ``contributions`` only list
    real membership.
R8  ``list_min`` for rrf/isr uses the list's largest rank (its last entry). Missing policies
    and the methods: ``zero`` for combanz leaves n_d unchanged (n_d is "always the number of
    lists that contain d"), so combanz/zero == combanz/skip; combmax/combmin/combmed with zero
    include the 0s. geometric/harmonic count only values > 0, so zero == skip for them.
    A fused value with an empty or zero-weight denominator (arithmetic / geometric / harmonic
    mean, or no counted value at all) is NULL (None) and ranks last.
R9  Delayed alignment (after_fusion, target doc): a doc row is expanded to every block row of
    the same parent present in the query's *raw* log (any source, before top_k); a doc row
    whose parent has no block in the log stays as one pseudo-block whose id is the parent id;
    a block already in the same list is not duplicated. NULL fused block scores are ignored
    by the aligner (all NULL -> NULL). ``contributions`` are the block-level ones, each with an
    extra ``block_id`` key, sorted by (source, block_id). For target block the aligner order
    is irrelevant (no alignment, no expansion).
R10 ``granularity`` missing/None: 'block' when parent_id is set and differs from item_id,
    else 'doc'. A doc row's target id is parent_id (item_id when parent_id is None).
R11 ``fused_score`` is returned unrounded; only the ordering uses round(x, 12).
R12 A row without a score (the log has no ``score`` column: ``score`` None) has the score
    ``-rank`` (fuse.md, the input table), which the distance conversion of step 1 leaves as it
    is: a rank is best-first whatever the source's scores are, so a rank-only distance source
    keeps its order.
R13 ``query_analyzer`` (fuse.md, the recipe table): when ``enabled``, each rule whose ``match``
    is found (``re.search``) in the query's ``query_text`` multiplies the weights of the sources
    its ``boost`` names by their factors; several matching rules multiply. A query's rows carry
    one ``query_text``. Disabled, the rules change nothing.

The engines' own rules (docs/fuse.md, "Engines' rules"), each off when its key is left out,
transcribed from the engines' sources (docs/reference/fusion-peers.md b2, b3, b6, b1):

R14 ``normalizer_params.nonpositive_value`` (OpenSearch MIN_SCORE): a ``minmax`` or ``zscore``
    value computed by the formula that is <= 0 becomes it; a degenerate list's value does not.
    ``minmax_degenerate_below`` (Elasticsearch EPSILON): minmax is degenerate when max - min is
    below it. ``l2_degenerate_raw`` (Elasticsearch): a degenerate l2 list keeps its raw scores.
R15 ``zscore_at_mean: raw_max`` (OpenSearch ``ZScoreNormalizationTechnique``): a score equal to
    its list's mean, compared as float32 (OpenSearch compares floats), gets the list's largest
    raw score; a one-item or constant list is at its mean.
R16 A source's ``lower_bound`` / ``upper_bound`` ``{mode, score}`` (OpenSearch min_max bounds,
    ``LowerBound``/``UpperBound``): the effective min (max) of a score, then clip checks (lower
    first: 0, then the nonpositive rule; upper: 1), an effective range of 0 is degenerate, else
    (s - min_eff) / max(max_eff - min_eff, eps). A degenerate list is checked first.
R17 ``borda_points`` (ranx ``bordafuse``): borda's values times |C|: |C| - p ranked,
    (|C| - n + 1) / 2 missing.
R18 ``fusion.rrf_weight: divides_rank`` (Qdrant ``position_score``): 1 / (r / w + k - 1 +
    rank_base), and 0 for w <= 0.
R19 ``fusion.count_empty_sources`` under the ``zero`` policy: each source of the recipe (declared,
    or in the log when discovered) with no list for a query counts, for the score methods, as a
    list every candidate is missing from, with its recipe weight (no analyzer boost: no hit of
    it carries one); a borda source then gives borda's missing value for n = 0. Under ``skip``
    and ``list_min``, and for rrf/isr, it changes nothing.
R20 ``fusion.top_n`` / ``fusion.min_score`` cut each query's ranking after step 5 (or 6): rank
    <= top_n and round(score, 12) >= min_score (a NULL score fails it); ranks are kept.
"""

from __future__ import annotations

import copy
import math
import re
import statistics
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# ---------------------------------------------------------------------------------------------
# Recipe
# ---------------------------------------------------------------------------------------------

SOURCE_KEYS: tuple[str, ...] = ("top_k", "normalize", "weight", "distance")

DEFAULT_RECIPE: dict[str, Any] = {
    "recipe_id": "canonical_rrf",
    "target_granularity": "doc",
    "discover_sources": True,
    "source_defaults": {"top_k": None, "normalize": "none", "weight": 1.0, "distance": False},
    "sources": {
        "sparse": {"top_k": 100, "normalize": "rank", "weight": 1.0, "distance": False},
    },
    "normalizer_params": {
        "eps": 1.0e-9,
        "degenerate_value": 0.0,
        "dbsf_degenerate_value": 0.5,
        "zscore_ddof": 0,
        "dbsf_ddof": 1,
        "softmax_temperature": 1.0,
        "sigmoid_center": 0.0,
        "sigmoid_scale": 1.0,
        "quantile_p_lo": 0.1,
        "quantile_p_hi": 0.9,
        "bounds": None,
        "bounds_clip": True,
    },
    "aligner": {"method": "max", "top_n": 3, "decay": 0.5, "order": "before_fusion"},
    "fusion": {"method": "rrf", "k": 60, "rank_base": 1, "missing": "default", "gamma": 1.0},
}
"""The recipe of ``docs/fusion-semantics.md`` (section "Recipe"), all keys present."""

NORMALIZERS: tuple[str, ...] = (
    "none",
    "rank",
    "minmax",
    "max",
    "sum",
    "zscore",
    "l2",
    "softmax",
    "sigmoid",
    "quantile",
    "dbsf",
    "bounds",
    "borda",
)
FUSION_METHODS: tuple[str, ...] = (
    "rrf",
    "isr",
    "weighted_sum",
    "combsum",
    "combmnz",
    "combanz",
    "combmax",
    "combmin",
    "combmed",
    "arithmetic_mean",
    "geometric_mean",
    "harmonic_mean",
)
ALIGNERS: tuple[str, ...] = ("max", "sum", "mean", "sum_top_n", "max_decay")
MISSING_POLICIES: tuple[str, ...] = ("zero", "skip", "list_min")

DEFAULT_MISSING: dict[str, str] = {
    "rrf": "zero",
    "isr": "zero",
    "weighted_sum": "zero",
    "combsum": "zero",
    "combmnz": "skip",
    "combanz": "skip",
    "combmax": "skip",
    "combmin": "skip",
    "combmed": "skip",
    "arithmetic_mean": "zero",
    "geometric_mean": "skip",
    "harmonic_mean": "skip",
}
"""Contract step 4: the per-method default missing policy (``missing: default``)."""

RANK_METHODS: frozenset[str] = frozenset({"rrf", "isr"})


def _source_settings(recipe: Mapping[str, Any], settings: Mapping[str, Any] | None) -> dict:
    out = dict(recipe.get("source_defaults") or DEFAULT_RECIPE["source_defaults"])
    if settings:
        out.update({k: v for k, v in settings.items() if k != "name"})
    return out


def normalize_recipe(recipe: Mapping[str, Any]) -> dict[str, Any]:
    """Fill every missing key from :data:`DEFAULT_RECIPE`; accept ``sources`` as a list of
    ``{name: ..., ...}`` (contract: "a list with `name:` is accepted")."""
    out = copy.deepcopy(DEFAULT_RECIPE)
    for key, value in recipe.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict) and key != "sources":
            out[key].update(copy.deepcopy(dict(value)))
        else:
            out[key] = copy.deepcopy(value)
    sources = out.get("sources") or {}
    if isinstance(sources, list):
        sources = {s["name"]: s for s in sources}
    out["sources"] = {name: _source_settings(out, s) for name, s in sources.items()}
    return out


def recipe_with(overrides: Mapping[str, Any] | None = None, base: Mapping | None = None) -> dict:
    """A copy of ``base`` (default :data:`DEFAULT_RECIPE`) with dotted-key overrides applied.

    ``{"fusion.k": 2, "sources.dense.weight": 0.7}``; a source named in a key that the recipe
    does not declare is created from ``source_defaults`` first. ``{"sources": {...}}``
    replaces the whole mapping (missing source keys come from ``source_defaults``).
    """
    recipe = normalize_recipe(base if base is not None else DEFAULT_RECIPE)
    for dotted, value in (overrides or {}).items():
        parts = dotted.split(".")
        if parts[0] == "sources" and len(parts) == 1:
            recipe["sources"] = {}
            srcs = value.items() if isinstance(value, Mapping) else ((s["name"], s) for s in value)
            for name, s in srcs:
                recipe["sources"][name] = _source_settings(recipe, s)
            continue
        if parts[0] == "sources" and len(parts) >= 2 and parts[1] not in recipe["sources"]:
            recipe["sources"][parts[1]] = _source_settings(recipe, None)
        node = recipe
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = copy.deepcopy(value)
    return recipe


# ---------------------------------------------------------------------------------------------
# Data model
# ---------------------------------------------------------------------------------------------


@dataclass
class Entry:
    """One item of one list (after step 2): ``key`` is the id fused at this level."""

    key: str
    raw: float  # aligned raw score (after distance conversion)
    rank: int  # rank in the (aligned) list
    parent: str | None = None
    norm: float = 0.0


@dataclass
class SourceList:
    source: str
    weight: float
    normalize: str
    entries: list[Entry] = field(default_factory=list)
    settings: Mapping[str, Any] = field(default_factory=dict)  # the source's recipe entry

    def by_key(self) -> dict[str, Entry]:
        return {e.key: e for e in self.entries}


# ---------------------------------------------------------------------------------------------
# Step 1: source conversion, rank derivation, top_k
# ---------------------------------------------------------------------------------------------


def convert_distance(score: float, distance: bool) -> float:
    """Contract step 1: ``distance: true`` -> ``score = -score`` (min-max of it equals ranx's
    ``min-max-inverted``, fusion-peers b1)."""
    return -score if distance else score


def derive_ranks(rows: Sequence[dict]) -> list[int]:
    """Contract "Input": rank 1-based within (query, source); when absent, score descending,
    ties by item_id ascending (READING R1: all derived when any is missing)."""
    if all(r.get("rank") is not None for r in rows):
        return [int(r["rank"]) for r in rows]
    order = sorted(range(len(rows)), key=lambda i: (-rows[i]["score"], str(rows[i]["item_id"])))
    ranks = [0] * len(rows)
    for pos, i in enumerate(order):
        ranks[i] = pos + 1
    return ranks


def row_granularity(row: Mapping[str, Any]) -> str:
    """READING R10."""
    g = row.get("granularity")
    if g:
        return str(g)
    parent = row.get("parent_id")
    return "block" if parent is not None and str(parent) != str(row["item_id"]) else "doc"


def row_parent(row: Mapping[str, Any]) -> str:
    parent = row.get("parent_id")
    return str(parent) if parent is not None else str(row["item_id"])


# ---------------------------------------------------------------------------------------------
# Step 2: aligners (seed §6.2 / §7.1; Milvus group score max|sum|avg, fusion-peers b8)
# ---------------------------------------------------------------------------------------------


def align_max(scores: Sequence[float]) -> float:
    """``max``: the best block (pyserini MaxP, Milvus group score ``max``)."""
    return max(scores)


def align_sum(scores: Sequence[float]) -> float:
    """``sum`` of all block scores (Milvus ``sum``)."""
    return math.fsum(scores)


def align_mean(scores: Sequence[float]) -> float:
    """``mean`` of all block scores (Milvus ``avg``)."""
    return math.fsum(scores) / len(scores)


def align_sum_top_n(scores: Sequence[float], top_n: int | None) -> float:
    """``sum_top_n``: sum of the n largest (seed §7.1 ``sum(top_n block_score in file)``);
    ``top_n: null`` = all."""
    ordered = sorted(scores, reverse=True)
    return math.fsum(ordered if top_n is None else ordered[: int(top_n)])


def align_max_decay(scores: Sequence[float], top_n: int | None, decay: float) -> float:
    """``max_decay``: sorted descending, s1 + d*s2 + d^2*s3 ... over the top n (seed §6.2
    "Max-Decay", §12.1 ``sum_decay``)."""
    ordered = sorted(scores, reverse=True)
    if top_n is not None:
        ordered = ordered[: int(top_n)]
    return math.fsum(s * decay**i for i, s in enumerate(ordered))


def aggregate(scores: Sequence[float], aligner: Mapping[str, Any]) -> float:
    """Dispatch on ``aligner.method``."""
    method = aligner.get("method", "max")
    if method == "max":
        return align_max(scores)
    if method == "sum":
        return align_sum(scores)
    if method == "mean":
        return align_mean(scores)
    if method == "sum_top_n":
        return align_sum_top_n(scores, aligner.get("top_n"))
    if method == "max_decay":
        return align_max_decay(scores, aligner.get("top_n"), float(aligner.get("decay", 0.5)))
    raise ValueError(f"unknown aligner method {method!r}")


def _r12(x: float) -> float:
    return round(x, 12) + 0.0  # + 0.0 folds -0.0 into 0.0


# ---------------------------------------------------------------------------------------------
# Step 3: normalisers (all per query, per list)
# ---------------------------------------------------------------------------------------------


def _zero_spread(scores: Sequence[float]) -> bool:
    return len(scores) == 0 or max(scores) - min(scores) == 0


def norm_none(scores: Sequence[float]) -> list[float]:
    """``none``: the raw (aligned) score."""
    return [float(s) for s in scores]


def norm_rank(positions: Sequence[int], n: int) -> list[float]:
    """``rank``: 1 - p/n (ranx ``rank_norm``: top -> 1, last -> 1/n). READING R4 for p."""
    return [1.0 - p / n for p in positions]


def norm_minmax(scores: Sequence[float], eps: float, degenerate: float) -> list[float]:
    """``minmax``: (s - min)/max(max - min, eps) (ranx ``min-max``; ES/OpenSearch
    ``minmax``/``min_max`` without their 1.0 / 0.001 special values); zero spread ->
    degenerate_value (ranx gives 0, ES/OpenSearch 1.0, Vespa 0.5)."""
    if _zero_spread(scores):
        return [degenerate] * len(scores)
    lo, hi = min(scores), max(scores)
    return [(s - lo) / max(hi - lo, eps) for s in scores]


def norm_max(scores: Sequence[float], eps: float, degenerate: float) -> list[float]:
    """``max``: s/max(max, eps) (ranx ``max_norm``; all-negative lists explode as in ranx).
    No zero-spread rule, as in ranx: a constant positive list gives s/s = 1 (contract revised)."""
    hi = max(scores)
    return [s / max(hi, eps) for s in scores]


def norm_sum(scores: Sequence[float], eps: float, degenerate: float) -> list[float]:
    """``sum``: (s - min)/max(sum s - n*min, eps) (ranx ``sum_norm``); zero spread ->
    degenerate_value."""
    if _zero_spread(scores):
        return [degenerate] * len(scores)
    lo = min(scores)
    denom = max(math.fsum(scores) - len(scores) * lo, eps)
    return [(s - lo) / denom for s in scores]


def _mean_sd(scores: Sequence[float], ddof: int) -> tuple[float, float | None]:
    """Mean and standard deviation with ``ddof``; None when n - ddof <= 0."""
    n = len(scores)
    mean = math.fsum(scores) / n
    if n - ddof <= 0:
        return mean, None
    var = math.fsum((s - mean) ** 2 for s in scores) / (n - ddof)
    return mean, math.sqrt(var)


def norm_zscore(scores: Sequence[float], eps: float, degenerate: float, ddof: int) -> list[float]:
    """``zscore``: (s - mean)/max(sigma, eps), sigma with ``zscore_ddof`` (ranx ``zmuv``:
    ddof 0; OpenSearch ``z_score``: ddof 1, without its 0.001 clamp); n - ddof <= 0 or
    sigma = 0 -> degenerate_value."""
    if not scores:
        return []
    mean, sd = _mean_sd(scores, ddof)
    if sd is None or sd == 0 or _zero_spread(scores):
        return [degenerate] * len(scores)
    return [(s - mean) / max(sd, eps) for s in scores]


def norm_l2(scores: Sequence[float], eps: float, degenerate: float) -> list[float]:
    """``l2``: s/sqrt(sum s^2) (ES ``l2_norm``, OpenSearch ``l2``); sqrt(sum s^2) < eps ->
    degenerate_value (READING R5: a one-item list is *not* degenerate)."""
    norm = math.sqrt(math.fsum(s * s for s in scores))
    if norm < eps:
        return [degenerate] * len(scores)
    return [s / norm for s in scores]


def norm_softmax(scores: Sequence[float], temperature: float) -> list[float]:
    """``softmax``: exp((s - max)/T) / sum exp((s - max)/T) (seed §6.3 item 4; no peer)."""
    if temperature <= 0:
        raise ValueError("softmax_temperature must be > 0")
    if not scores:
        return []
    hi = max(scores)
    ex = [math.exp((s - hi) / temperature) for s in scores]
    total = math.fsum(ex)
    return [e / total for e in ex]


def norm_sigmoid(scores: Sequence[float], center: float, scale: float) -> list[float]:
    """``sigmoid``: 1/(1 + exp(-(s - center)/scale)) (seed §6.3 item 5; MongoDB
    ``$scoreFusion`` sigmoid). Computed in the overflow-safe branch form."""
    if scale == 0:
        raise ValueError("sigmoid_scale must be non-zero")
    out = []
    for s in scores:
        z = (s - center) / scale
        if z >= 0:
            out.append(1.0 / (1.0 + math.exp(-z)))
        else:
            e = math.exp(z)
            out.append(e / (1.0 + e))
    return out


def quantile_cont(values: Sequence[float], p: float) -> float:
    """Continuous quantile: linear interpolation at h = (n - 1) p between order statistics
    (numpy ``method="linear"``, DuckDB ``quantile_cont``)."""
    xs = sorted(values)
    h = (len(xs) - 1) * p
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


def norm_quantile(
    scores: Sequence[float], p_lo: float, p_hi: float, eps: float, degenerate: float
) -> list[float]:
    """``quantile``: clamp((s - P_lo)/(P_hi - P_lo + eps), 0, 1) (robust P10/P90 scaling; no
    peer has it, fusion-peers "Gaps" 1); READING R6 for the degenerate rule."""
    if not scores:
        return []
    q_lo, q_hi = quantile_cont(scores, p_lo), quantile_cont(scores, p_hi)
    out = []
    for s in scores:
        if q_hi - q_lo == 0 and s == q_lo:
            out.append(degenerate)
        else:
            out.append(min(1.0, max(0.0, (s - q_lo) / (q_hi - q_lo + eps))))
    return out


def norm_dbsf(scores: Sequence[float], ddof: int, degenerate: float) -> list[float]:
    """``dbsf``: (s - (mu - 3 sigma))/(6 sigma), not clipped (Qdrant ``score_fusion.rs``,
    sample variance = ddof 1); n = 1 or sigma = 0 -> dbsf_degenerate_value (Qdrant 0.5)."""
    if not scores:
        return []
    mean, sd = _mean_sd(scores, ddof)
    if len(scores) == 1 or sd is None or sd == 0:
        return [degenerate] * len(scores)
    lo = mean - 3 * sd
    return [(s - lo) / (6 * sd) for s in scores]


def norm_bounds(scores: Sequence[float], bounds: Sequence[float] | None, clip: bool) -> list[float]:
    """``bounds``: (s - lo)/(hi - lo) with fixed [lo, hi], clipped to [0, 1] when bounds_clip
    (OpenSearch ``lower_bounds``/``upper_bounds``, without its 0.001 floor)."""
    if not bounds or len(bounds) != 2:
        raise ValueError("normalize: bounds needs normalizer_params.bounds = [lo, hi]")
    lo, hi = float(bounds[0]), float(bounds[1])
    if hi <= lo:
        raise ValueError("normalizer_params.bounds needs lo < hi")
    out = [(s - lo) / (hi - lo) for s in scores]
    return [min(1.0, max(0.0, v)) for v in out] if clip else out


def norm_borda_ranked(positions: Sequence[int], n_candidates: int) -> list[float]:
    """``borda``, ranked items: 1 - p/|C| (ranx ``borda_norm``)."""
    return [1.0 - p / n_candidates for p in positions]


def norm_borda_missing(n: int, n_candidates: int) -> float:
    """``borda``, an item of C missing from the list: 0.5 - (n - 1)/(2|C|) (ranx
    ``borda_norm``, "unranked points")."""
    return 0.5 - (n - 1) / (2 * n_candidates)


def _at_or_below_zero(value: float, params: Mapping[str, Any]) -> float:
    """READING R14: OpenSearch gives MIN_SCORE (0.001) where a min_max or z_score value is not
    positive, so a hit at its list's minimum is not a missing hit."""
    floor = params.get("nonpositive_value")
    return float(floor) if floor is not None and value <= 0 else value


def norm_minmax_engines(scores: Sequence[float], params: Mapping[str, Any]) -> list[float]:
    """``minmax`` with the engine rules of R14: Elasticsearch ``MinMaxScoreNormalizer`` (a list
    within EPSILON of constant -> 1.0) and OpenSearch ``MinMaxScoreNormalizationTechnique``
    (0 -> MIN_SCORE)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    below = params.get("minmax_degenerate_below")
    if (hi - lo < float(below)) if below is not None else hi - lo == 0:
        return [float(params["degenerate_value"])] * len(scores)
    eps = float(params["eps"])
    return [_at_or_below_zero((s - lo) / max(hi - lo, eps), params) for s in scores]


def _lower_effective(score: float, lo: float, hi: float, bound: Mapping[str, Any]) -> float:
    """OpenSearch ``LowerBound.determineEffectiveScore``."""
    b = float(bound["score"])
    if bound["mode"] == "apply":
        return b if hi > b and score > b else lo
    if bound["mode"] == "clip":
        return lo if hi < b else b
    return lo


def _upper_effective(score: float, lo: float, hi: float, bound: Mapping[str, Any]) -> float:
    """OpenSearch ``UpperBound.determineEffectiveScore``."""
    b = float(bound["score"])
    if bound["mode"] == "apply":
        return b if lo < b and score < b else hi
    if bound["mode"] == "clip":
        return hi if lo > b else b
    return hi


def norm_minmax_bounded(
    scores: Sequence[float], params: Mapping[str, Any], lower: Mapping | None, upper: Mapping | None
) -> list[float]:
    """READING R16: OpenSearch ``normalizeSingleScore`` with a sub-query's lower and upper
    bounds (``degenerate_value`` for its SINGLE_RESULT_SCORE)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    below = params.get("minmax_degenerate_below")
    deg = float(params["degenerate_value"])
    if (hi - lo < float(below)) if below is not None else hi - lo == 0:
        return [deg] * len(scores)
    out = []
    for s in scores:
        eff_lo = _lower_effective(s, lo, hi, lower) if lower else lo
        eff_hi = _upper_effective(s, lo, hi, upper) if upper else hi
        if lower and lower["mode"] == "clip" and s < eff_lo:
            out.append(_at_or_below_zero(0.0, params))
        elif upper and upper["mode"] == "clip" and s > eff_hi:
            out.append(1.0)
        elif eff_hi == eff_lo:
            out.append(deg)
        else:
            value = (s - eff_lo) / max(eff_hi - eff_lo, float(params["eps"]))
            out.append(_at_or_below_zero(value, params))
    return out


def _float32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def norm_zscore_engines(scores: Sequence[float], params: Mapping[str, Any]) -> list[float]:
    """``zscore`` with R14 and R15 (OpenSearch ``ZScoreNormalizationTechnique``: at the mean, the
    list's max; below or at 0 after the formula, MIN_SCORE)."""
    if not scores:
        return []
    mean, sd = _mean_sd(scores, int(params["zscore_ddof"]))
    at_mean = params.get("zscore_at_mean") == "raw_max"
    out = []
    for s in scores:
        if at_mean and _float32(s) == _float32(mean):
            out.append(max(scores))
        elif sd is None or sd == 0 or _zero_spread(scores):
            out.append(float(params["degenerate_value"]))
        else:
            out.append(_at_or_below_zero((s - mean) / max(sd, float(params["eps"])), params))
    return out


def norm_l2_engines(scores: Sequence[float], params: Mapping[str, Any]) -> list[float]:
    """``l2`` with ``l2_degenerate_raw`` (Elasticsearch ``L2ScoreNormalizer``: a norm below
    EPSILON returns the docs unnormalised)."""
    norm = math.sqrt(math.fsum(s * s for s in scores))
    if norm < float(params["eps"]):
        return [float(s) for s in scores]
    return [s / norm for s in scores]


def borda_points_ranked(positions: Sequence[int], n_candidates: int) -> list[float]:
    """READING R17, ranked items: ranx ``_borda_score``, ``max_points - i`` (|C| - p)."""
    return [float(n_candidates - p) for p in positions]


def borda_points_missing(n: int, n_candidates: int) -> float:
    """READING R17, an item of C missing from the list: ranx ``unranked_points``,
    (|C| - n + 1) / 2."""
    return (n_candidates - n + 1) / 2


def borda_missing_value(n: int, n_candidates: int, params: Mapping[str, Any]) -> float:
    if params.get("borda_points"):
        return borda_points_missing(n, n_candidates)
    return norm_borda_missing(n, n_candidates)


def normalize_list(lst: SourceList, params: Mapping[str, Any], n_candidates: int) -> None:
    """Contract step 3: set ``Entry.norm`` for every entry of one list."""
    scores = [e.raw for e in lst.entries]
    positions = [e.rank - 1 for e in lst.entries]  # READING R4
    n = len(lst.entries)
    eps = float(params["eps"])
    deg = float(params["degenerate_value"])
    method = lst.normalize or "none"
    if method == "none":
        vals = norm_none(scores)
    elif method == "rank":
        vals = norm_rank(positions, n)
    elif method == "minmax" and (
        lst.settings.get("lower_bound") or lst.settings.get("upper_bound")
    ):
        vals = norm_minmax_bounded(
            scores, params, lst.settings.get("lower_bound"), lst.settings.get("upper_bound")
        )
    elif method == "minmax" and (
        params.get("nonpositive_value") is not None
        or params.get("minmax_degenerate_below") is not None
    ):
        vals = norm_minmax_engines(scores, params)
    elif method == "minmax":
        vals = norm_minmax(scores, eps, deg)
    elif method == "max":
        vals = norm_max(scores, eps, deg)
    elif method == "sum":
        vals = norm_sum(scores, eps, deg)
    elif method == "zscore" and (
        params.get("nonpositive_value") is not None or params.get("zscore_at_mean") == "raw_max"
    ):
        vals = norm_zscore_engines(scores, params)
    elif method == "zscore":
        vals = norm_zscore(scores, eps, deg, int(params["zscore_ddof"]))
    elif method == "l2" and params.get("l2_degenerate_raw"):
        vals = norm_l2_engines(scores, params)
    elif method == "l2":
        vals = norm_l2(scores, eps, deg)
    elif method == "softmax":
        vals = norm_softmax(scores, float(params["softmax_temperature"]))
    elif method == "sigmoid":
        vals = norm_sigmoid(scores, float(params["sigmoid_center"]), float(params["sigmoid_scale"]))
    elif method == "quantile":
        vals = norm_quantile(
            scores, float(params["quantile_p_lo"]), float(params["quantile_p_hi"]), eps, deg
        )
    elif method == "dbsf":
        vals = norm_dbsf(scores, int(params["dbsf_ddof"]), float(params["dbsf_degenerate_value"]))
    elif method == "bounds":
        vals = norm_bounds(scores, params.get("bounds"), bool(params.get("bounds_clip", True)))
    elif method == "borda" and params.get("borda_points"):
        vals = borda_points_ranked(positions, n_candidates)
    elif method == "borda":
        vals = norm_borda_ranked(positions, n_candidates)
    else:
        raise ValueError(f"unknown normaliser {method!r}")
    for e, v in zip(lst.entries, vals):
        e.norm = v


# ---------------------------------------------------------------------------------------------
# Step 4: fusion methods. ``pairs`` = (weight, value) of the lists that count for the item
# (value = normalised score, or the rank for rrf/isr), after the missing policy.
# ---------------------------------------------------------------------------------------------


def fuse_rrf(pairs: Sequence[tuple[float, float]], k: float, rank_base: int) -> float:
    """``rrf``: sum w_i/(k + r_i - 1 + rank_base). rank_base 1 = ranx/ES/OpenSearch/Milvus
    1/(k + r) (ES weighted RRF: w_i/(k + r)); rank_base 0 = Weaviate 1/(p + 60) and Qdrant
    1/(r + k - 1) (k default 2)."""
    return math.fsum(w / (k + r - 1 + rank_base) for w, r in pairs)


def fuse_rrf_rank_divided(pairs: Sequence[tuple[float, float]], k: float, rank_base: int) -> float:
    """READING R18, Qdrant ``position_score``: ``1 / ((position + 1) / weight + k - 1)``, and 0
    for a weight <= 0 (reciprocal_rank_fusion.rs); rank_base as for ``rrf``."""
    return math.fsum(1 / (r / w + k - 1 + rank_base) if w > 0 else 0.0 for w, r in pairs)


def fuse_isr(pairs: Sequence[tuple[float, float]], n_d: int) -> float:
    """``isr``: (sum w_i/r_i^2) * n_d (ranx ``isr`` = comb_mnz over 1/r^2, weights 1)."""
    return math.fsum(w / (r * r) for w, r in pairs) * n_d


def fuse_weighted_sum(pairs: Sequence[tuple[float, float]]) -> float | None:
    """``weighted_sum``: sum w_i s_i (ranx ``wsum``, ES ``linear``, Weaviate
    ``relativeScoreFusion``, Milvus ``WeightedRanker``)."""
    return math.fsum(w * v for w, v in pairs) if pairs else None


def fuse_combsum(pairs: Sequence[tuple[float, float]]) -> float | None:
    """``combsum``: sum s_i (ranx ``comb_sum``; Qdrant DBSF sums dbsf scores)."""
    return math.fsum(v for _, v in pairs) if pairs else None


def fuse_combmnz(pairs: Sequence[tuple[float, float]], n_d: int) -> float | None:
    """``combmnz``: sum s_i * n_d (ranx ``comb_mnz``)."""
    return math.fsum(v for _, v in pairs) * n_d if pairs else None


def fuse_combanz(pairs: Sequence[tuple[float, float]], n_d: int) -> float | None:
    """``combanz``: sum s_i / n_d (ranx ``comb_anz``)."""
    return math.fsum(v for _, v in pairs) / n_d if pairs and n_d else None


def fuse_combmax(pairs: Sequence[tuple[float, float]]) -> float | None:
    """``combmax``: max s_i (ranx ``comb_max``)."""
    return max(v for _, v in pairs) if pairs else None


def fuse_combmin(pairs: Sequence[tuple[float, float]]) -> float | None:
    """``combmin``: min s_i (ranx ``comb_min``)."""
    return min(v for _, v in pairs) if pairs else None


def fuse_combmed(pairs: Sequence[tuple[float, float]]) -> float | None:
    """``combmed``: continuous median (mean of the two middle values; ranx ``comb_med`` =
    ``np.median``)."""
    return float(statistics.median(v for _, v in pairs)) if pairs else None


def fuse_arithmetic_mean(pairs: Sequence[tuple[float, float]]) -> float | None:
    """``arithmetic_mean``: sum w_i s_i / sum w_i over the counted lists (OpenSearch
    ``arithmetic_mean``: a missing doc counts as 0 with its weight)."""
    wsum = math.fsum(w for w, _ in pairs)
    return math.fsum(w * v for w, v in pairs) / wsum if pairs and wsum != 0 else None


def fuse_geometric_mean(pairs: Sequence[tuple[float, float]]) -> float | None:
    """``geometric_mean``: exp(sum w_i ln s_i / sum w_i) over counted lists with s_i > 0
    (OpenSearch ``GeometricMeanScoreCombinationTechnique``, without its 0.001 min-max floor)."""
    pos = [(w, v) for w, v in pairs if v > 0]
    wsum = math.fsum(w for w, _ in pos)
    if not pos or wsum == 0:
        return None
    return math.exp(math.fsum(w * math.log(v) for w, v in pos) / wsum)


def fuse_harmonic_mean(pairs: Sequence[tuple[float, float]]) -> float | None:
    """``harmonic_mean``: sum w_i / sum (w_i/s_i) over counted lists with s_i > 0 (OpenSearch
    ``HarmonicMeanScoreCombinationTechnique``)."""
    pos = [(w, v) for w, v in pairs if v > 0]
    denom = math.fsum(w / v for w, v in pos)
    if not pos or denom == 0:
        return None
    return math.fsum(w for w, _ in pos) / denom


def combine(
    method: str, pairs: Sequence[tuple[float, float]], n_d: int, fusion: Mapping[str, Any]
) -> float | None:
    """Dispatch on ``fusion.method``."""
    if method == "rrf" and fusion.get("rrf_weight") == "divides_rank":
        return fuse_rrf_rank_divided(
            pairs, float(fusion.get("k", 60)), int(fusion.get("rank_base", 1))
        )
    if method == "rrf":
        return fuse_rrf(pairs, float(fusion.get("k", 60)), int(fusion.get("rank_base", 1)))
    if method == "isr":
        return fuse_isr(pairs, n_d)
    if method == "weighted_sum":
        return fuse_weighted_sum(pairs)
    if method == "combsum":
        return fuse_combsum(pairs)
    if method == "combmnz":
        return fuse_combmnz(pairs, n_d)
    if method == "combanz":
        return fuse_combanz(pairs, n_d)
    if method == "combmax":
        return fuse_combmax(pairs)
    if method == "combmin":
        return fuse_combmin(pairs)
    if method == "combmed":
        return fuse_combmed(pairs)
    if method == "arithmetic_mean":
        return fuse_arithmetic_mean(pairs)
    if method == "geometric_mean":
        return fuse_geometric_mean(pairs)
    if method == "harmonic_mean":
        return fuse_harmonic_mean(pairs)
    raise ValueError(f"unknown fusion method {method!r}")


def missing_policy(fusion: Mapping[str, Any]) -> str:
    method = fusion.get("method", "rrf")
    if method not in DEFAULT_MISSING:
        raise ValueError(f"unknown fusion method {method!r}")
    policy = fusion.get("missing", "default") or "default"
    if policy == "default":
        return DEFAULT_MISSING[method]
    if policy not in MISSING_POLICIES:
        raise ValueError(f"unknown missing policy {policy!r}")
    return policy


def fuse_lists(
    lists: Sequence[SourceList],
    fusion: Mapping[str, Any],
    params: Mapping[str, Any],
    empty: Sequence[SourceList] = (),
) -> dict[str, tuple[float | None, list[dict]]]:
    """Steps 3 and 4 over the lists of one query: {item key: (fused score, contributions)}.
    ``empty``: the recipe's sources without a list for the query (READING R19)."""
    candidates = sorted({e.key for lst in lists for e in lst.entries})
    n_c = len(candidates)
    for lst in lists:
        normalize_list(lst, params, n_c)
    method = fusion.get("method", "rrf")
    policy = missing_policy(fusion)
    rank_based = method in RANK_METHODS
    if fusion.get("count_empty_sources") and policy == "zero" and not rank_based:
        lists = [*lists, *empty]
    index = [(lst, lst.by_key()) for lst in sorted(lists, key=lambda x: x.source)]
    out: dict[str, tuple[float | None, list[dict]]] = {}
    for key in candidates:
        pairs: list[tuple[float, float]] = []
        contributions: list[dict] = []
        n_d = 0
        for lst, by_key in index:
            entry = by_key.get(key)
            w = float(lst.weight)
            if entry is not None:
                contributions.append(
                    {
                        "source": lst.source,
                        "raw_score": entry.raw,
                        "norm_score": entry.norm,
                        "rank": entry.rank,
                        "weight": w,
                    }
                )
                n_d += 1
                pairs.append((w, float(entry.rank) if rank_based else entry.norm))
            elif not rank_based and lst.normalize == "borda":
                # READING R7: borda makes the item present in this list (ranx borda_norm)
                n_d += 1
                pairs.append((w, borda_missing_value(len(lst.entries), n_c, params)))
            elif policy == "zero":
                if not rank_based:
                    pairs.append((w, 0.0))
            elif policy == "list_min":
                if rank_based:
                    pairs.append((w, float(max(e.rank for e in lst.entries))))
                else:
                    pairs.append((w, min(e.norm for e in lst.entries)))
            # skip: nothing
        out[key] = (combine(method, pairs, n_d, fusion), contributions)
    return out


# ---------------------------------------------------------------------------------------------
# Step 5: ranking
# ---------------------------------------------------------------------------------------------


def rank_key(item_id: str, score: float | None) -> tuple:
    """Contract step 5: round to 12 decimals, descending; ties by item id ascending (Python
    ``str`` order = code point order); NULL last."""
    if score is None or (isinstance(score, float) and math.isnan(score)):
        return (1, 0.0, item_id)
    return (0, -_r12(score), item_id)


def rank_items(scored: Mapping[str, float | None]) -> list[tuple[str, float | None, int]]:
    ordered = sorted(scored.items(), key=lambda kv: rank_key(kv[0], kv[1]))
    return [(k, s, i + 1) for i, (k, s) in enumerate(ordered)]


def cut_ranking(
    ranked: Sequence[tuple[str, float | None, int]], fusion: Mapping[str, Any]
) -> list[tuple[str, float | None, int]]:
    """READING R20: the engines' size (``top_n``) and ``min_score`` on the ranked list."""
    top_n, min_score = fusion.get("top_n"), fusion.get("min_score")
    return [
        (item, score, rank)
        for item, score, rank in ranked
        if (top_n is None or rank <= int(top_n))
        and (min_score is None or (score is not None and _r12(score) >= float(min_score)))
    ]


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------


def _prepare_rows(
    rows: Sequence[Mapping[str, Any]], recipe: Mapping[str, Any]
) -> dict[str, dict[str, list[dict]]]:
    """Step 1 (and rank derivation): {query: {source: [row, ...]}} with converted score and
    rank, after ``top_k`` (READING R1, R2)."""
    sources = recipe["sources"]
    grouped: dict[str, dict[str, list[dict]]] = {}
    for row in rows:
        src = str(row["source"])
        if src not in sources and not recipe.get("discover_sources", True):
            continue
        settings = sources.get(src) or _source_settings(recipe, None)
        r = dict(row)
        r["item_id"] = str(r["item_id"])
        r["score"] = (  # R12
            -float(r["rank"])
            if r.get("score") is None
            else convert_distance(float(r["score"]), bool(settings.get("distance")))
        )
        r["_granularity"] = row_granularity(r)
        r["_parent"] = row_parent(r)
        grouped.setdefault(str(r["query_id"]), {}).setdefault(src, []).append(r)
    out: dict[str, dict[str, list[dict]]] = {}
    for q, by_src in grouped.items():
        for src, lst in by_src.items():
            settings = sources.get(src) or _source_settings(recipe, None)
            for r, rank in zip(lst, derive_ranks(lst)):
                r["rank"] = rank
            top_k = settings.get("top_k")
            kept = [r for r in lst if top_k is None or r["rank"] <= int(top_k)]
            if kept:
                out.setdefault(q, {})[src] = kept
    return out


def _settings(recipe: Mapping[str, Any], src: str) -> dict:
    return recipe["sources"].get(src) or _source_settings(recipe, None)


def analyzer_boosts(
    rows: Sequence[Mapping[str, Any]], analyzer: Mapping[str, Any] | None
) -> dict[str, dict[str, float]]:
    """READING R13: {query: {source: the product of the boosts of the rules matching the
    query's text}}; empty when the analyzer is off."""
    if not analyzer or not analyzer.get("enabled"):
        return {}
    texts: dict[str, str] = {}
    for row in rows:
        q, text = str(row["query_id"]), str(row["query_text"])
        if texts.setdefault(q, text) != text:
            raise ValueError(f"query {q!r} has two query_text values")
    boosts: dict[str, dict[str, float]] = {}
    for q, text in texts.items():
        factors = boosts.setdefault(q, {})
        for rule in analyzer.get("rules") or []:
            if re.search(str(rule["match"]), text):
                for src, factor in (rule.get("boost") or {}).items():
                    factors[src] = factors.get(src, 1.0) * float(factor)
    return boosts


def align_list(rows: Sequence[dict], aligner: Mapping[str, Any]) -> list[Entry]:
    """Contract step 2 (before_fusion, target doc): per parent, aggregate the raw scores;
    re-rank by aligned score desc, best original rank asc, parent id asc (READING R3)."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        key = r["_parent"]
        groups.setdefault(key, []).append(r)
    items = []
    for parent, grp in groups.items():
        score = aggregate([r["score"] for r in grp], aligner)
        best = min(r["rank"] for r in grp)
        items.append((parent, score, best))
    items.sort(key=lambda t: (-_r12(t[1]), t[2], t[0]))
    return [Entry(key=p, raw=s, rank=i + 1, parent=p) for i, (p, s, _) in enumerate(items)]


def block_list(rows: Sequence[dict]) -> list[Entry]:
    """Target block: no alignment, the list rank is the log rank (READING R3)."""
    seen: set[str] = set()
    out = []
    for r in sorted(rows, key=lambda r: (r["rank"], -r["score"], r["item_id"])):
        if r["item_id"] in seen:
            raise ValueError(f"item {r['item_id']!r} twice in one list at block level")
        seen.add(r["item_id"])
        out.append(Entry(key=r["item_id"], raw=r["score"], rank=r["rank"], parent=r["_parent"]))
    return out


def expanded_list(rows: Sequence[dict], blocks_of: Mapping[str, Sequence[str]]) -> list[Entry]:
    """Contract step 6: doc rows expanded to every block of the same parent in the query's
    log, keeping the doc row's score and rank (READING R9)."""
    out: dict[str, Entry] = {}
    ordered = sorted(rows, key=lambda r: (r["rank"], -r["score"], r["item_id"]))
    for r in ordered:
        if r["_granularity"] != "doc":
            if r["item_id"] in out:
                raise ValueError(f"item {r['item_id']!r} twice in one list at block level")
            out[r["item_id"]] = Entry(
                key=r["item_id"], raw=r["score"], rank=r["rank"], parent=r["_parent"]
            )
    for r in ordered:
        if r["_granularity"] == "doc":
            parent = r["_parent"]
            for block in blocks_of.get(parent) or [parent]:
                if block not in out:
                    out[block] = Entry(key=block, raw=r["score"], rank=r["rank"], parent=parent)
    return sorted(out.values(), key=lambda e: (e.rank, -e.raw, e.key))


def fuse_reference(rows: Sequence[Mapping[str, Any]], recipe: Mapping[str, Any]) -> list[dict]:
    """Fuse retrieval log rows with a recipe (``docs/fusion-semantics.md`` steps 1-6).

    Returns one dict per fused item, ordered by query_id then rank:
    ``{query_id, item_id, fused_score, rank, contributions}``; ``contributions`` lists, sorted
    by source, ``{source, raw_score, norm_score, rank, weight}`` of the lists containing the
    item (after_fusion: the block-level contributions with an extra ``block_id``).
    """
    recipe = normalize_recipe(recipe)
    target = recipe.get("target_granularity", "doc")
    if target not in ("doc", "block"):
        raise ValueError(f"unknown target_granularity {target!r}")
    aligner = recipe["aligner"]
    order = aligner.get("order", "before_fusion")
    if order not in ("before_fusion", "after_fusion"):
        raise ValueError(f"unknown aligner order {order!r}")
    fusion = recipe["fusion"]
    params = recipe["normalizer_params"]
    missing_policy(fusion)  # validate early

    # blocks per parent in the raw log of each query (READING R9)
    raw_blocks: dict[str, dict[str, set[str]]] = {}
    for row in rows:
        if row_granularity(row) == "block":
            raw_blocks.setdefault(str(row["query_id"]), {}).setdefault(row_parent(row), set()).add(
                str(row["item_id"])
            )

    prepared = _prepare_rows(rows, recipe)
    boosts = analyzer_boosts(rows, recipe.get("query_analyzer"))
    all_sources = set(recipe["sources"])
    if recipe.get("discover_sources", True):
        all_sources |= {str(row["source"]) for row in rows}
    results: list[dict] = []
    for q in sorted(prepared):
        by_src = prepared[q]
        delayed = target == "doc" and order == "after_fusion"
        lists = []
        for src in sorted(by_src):
            st = _settings(recipe, src)
            if target == "block":
                entries = block_list(by_src[src])
            elif delayed:
                blocks = {p: sorted(b) for p, b in raw_blocks.get(q, {}).items()}
                entries = expanded_list(by_src[src], blocks)
            else:
                entries = align_list(by_src[src], aligner)
            lists.append(
                SourceList(
                    source=src,
                    weight=float(st.get("weight", 1.0)) * boosts.get(q, {}).get(src, 1.0),
                    normalize=str(st.get("normalize") or "none"),
                    entries=entries,
                    settings=st,
                )
            )
        empty = [
            SourceList(source=name, weight=float(_settings(recipe, name).get("weight", 1.0)),
                       normalize=str(_settings(recipe, name).get("normalize") or "none"))
            for name in sorted(all_sources - set(by_src))
        ]  # fmt: skip
        fused = fuse_lists(lists, fusion, params, empty)
        if delayed:
            parent_of = {e.key: e.parent for lst in lists for e in lst.entries}
            per_parent: dict[str, list[str]] = {}
            for block in fused:
                per_parent.setdefault(parent_of[block] or block, []).append(block)
            scored: dict[str, float | None] = {}
            contribs: dict[str, list[dict]] = {}
            for parent, blocks in per_parent.items():
                vals = [fused[b][0] for b in blocks if fused[b][0] is not None]
                scored[parent] = aggregate(vals, aligner) if vals else None
                contribs[parent] = sorted(
                    ({**c, "block_id": b} for b in blocks for c in fused[b][1]),
                    key=lambda c: (c["source"], c["block_id"]),
                )
        else:
            scored = {k: v[0] for k, v in fused.items()}
            contribs = {k: v[1] for k, v in fused.items()}
        for item, score, rank in cut_ranking(rank_items(scored), fusion):
            results.append(
                {
                    "query_id": q,
                    "item_id": item,
                    "fused_score": score,
                    "rank": rank,
                    "contributions": contribs[item],
                }
            )
    return results


def scores_by_query(fused: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    """{query_id: {item_id: fused_score}} of a :func:`fuse_reference` result."""
    out: dict[str, dict[str, float | None]] = {}
    for r in fused:
        out.setdefault(r["query_id"], {})[r["item_id"]] = r["fused_score"]
    return out
