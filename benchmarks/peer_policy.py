"""The recipe and policy both of the benchmark's peers (the pandas and the Polars pipeline)
compute — `duckscore run --recipe hybrid_v1 --policy overall_v1 --top-n 5` — as constants, in a
module that imports nothing: the Polars worker's peak memory holds no pandas."""

from __future__ import annotations

# hybrid_v1 (seed 003 §12.1): every source weight 1, no top_k, similarities
RRF_K = 60
DECAY = 0.5
# overall_v1 (seed 000)
P_LO, P_HI, EPS = 0.1, 0.9, 1e-9
ALPHA, BETA = 0.6, 0.5
STABILITY_BASE, STABILITY_SIZE_WEIGHT = 0.5, 0.5
WEIGHTS = {"s_strength": 0.5, "s_coverage": 0.3, "s_stability": 0.2}
SUBSCORE_FLOOR = 0.01
T_LOW, T_HIGH, R_HITL = 0.35, 0.68, 0.92
TOP_N = 5
NORMALISED = ("rrf_sum", "max_score", "coverage", "log_chunks")
RISK_FLAGS = (
    "low_coverage",
    "single_spike",
    "sparse_evidence",
    "huge_doc_sparse",
    "ambiguous_candidate",
)
LOG_COLUMNS = (
    "query_id",
    "source",
    "item_id",
    "parent_id",
    "score",
    "rank",
    "granularity",
    "block_type",
    "total_chunks",
)
QUERY_FIELDS = (
    "query_id",
    "best_parent_id",
    "best_overall_score",
    "confidence_level",
    "top2_ratio",
    "need_hitl",
    "web_fallback",
)
