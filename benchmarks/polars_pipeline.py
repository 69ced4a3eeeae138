"""`duckscore run` of the seeds' recipe and policy, as a user would otherwise write it: lazy Polars.

The benchmark's config (h). The same pipeline as `duckscore run --recipe hybrid_v1 --policy
overall_v1 --top-n 5`, in lazy Polars queries (scan_parquet, expressions, windows with
`.over(..., order_by=...)`, group_by/agg, joins; no Python loop over hits), written from the
seeds' formulas rather than translated from the SQL or from the pandas peer (config c), whose
constants it shares:

  fuse      per (query, source, parent): the max-decay aligner s1 + 0.5 s2 + 0.25 s3 ... over the
            parent's hit scores; per (query, source): the parent's list rank by that score (then
            best hit rank, then parent_id); per (query, parent): RRF Σ 1 / (60 + list_rank) and
            the number of sources; the fused rank by the score rounded to 12 digits, then id
  features  seed 000 §3 (rrf_sum, max_score min-max-normalised per list, coverage, total_chunks,
            coverage_ratio) and the evidence overall_v2 reads (parent_rrf, source_agreement,
            score_lead)
  score     seed 000 §4–§8: per-query P10/P90 normalisation (linear quantiles), sub-scores,
            weighted geometric mean, rank, risk flags, top-2 ratio, confidence level, HITL and
            web fallback, and a contract line per query with its top 5 parents

Three collects: the fusion and the features together (`pl.collect_all`: one scan of the log and
one pass per parent in each list for both), then the scores from the features, then the contract
from the scores. One `collect_all` of all four recomputed the features for the scores and again
for the contract (Polars 2.1; 1.8 times slower on a 1M-row log). The outputs have the names and
columns of `pandas_pipeline.run_pandas`'s, so its `compare` checks them against a `duckscore run`
folder, table by table.

    python benchmarks/polars_pipeline.py LOG.parquet OUT_DIR [--check DUCKSCORE_RUN_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/polars_pipeline.py` from any folder
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.peer_policy import (  # noqa: E402 - after the sys.path line above
    ALPHA,
    BETA,
    DECAY,
    EPS,
    LOG_COLUMNS,
    NORMALISED,
    P_HI,
    P_LO,
    R_HITL,
    RISK_FLAGS,
    RRF_K,
    STABILITY_BASE,
    STABILITY_SIZE_WEIGHT,
    SUBSCORE_FLOOR,
    T_HIGH,
    T_LOW,
    TOP_N,
    WEIGHTS,
)

POLICY_VERSION = "overall_v1"
LIST = ["query_id", "source"]  # one source's ranked list for one query
LIST_PARENT = ["query_id", "source", "parent_id"]
QUERY_PARENT = ["query_id", "parent_id"]
FEATURE_COLUMNS = (
    "query_id",
    "parent_id",
    "rrf_sum",
    "max_score",
    "coverage",
    "total_chunks",
    "coverage_ratio",
    "parent_rrf",
    "source_agreement",
    "score_lead",
)


def position(within: str | list[str], *order: pl.Expr | str, nulls_last: bool = False) -> pl.Expr:
    """1, 2, 3 ... within each `within` group, in `order` (ascending: negate to descend)."""
    return pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over(
        within, order_by=list(order), nulls_last=nulls_last
    )


def descending(column: str) -> pl.Expr:
    return -pl.col(column)


# --- reading ------------------------------------------------------------------------------------


def scan_hits(log: Path) -> pl.LazyFrame:
    """The log's hits with every column the pipeline reads: a missing rank comes from the score
    (then item_id) within its list, a missing granularity from whether the hit is its parent,
    a missing block type is `unknown`, a missing total_chunks null."""
    scan = pl.scan_parquet(log)
    present = set(scan.collect_schema().names())
    hits = scan.select([name for name in LOG_COLUMNS if name in present])
    if "rank" not in present:
        hits = hits.with_columns(rank=position(LIST, descending("score"), "item_id"))
    absent = {
        "granularity": pl.lit(None, dtype=pl.String),
        "block_type": pl.lit(None, dtype=pl.String),
        "total_chunks": pl.lit(None, dtype=pl.Int64),
    }
    hits = hits.with_columns(**{name: e for name, e in absent.items() if name not in present})
    itself = pl.col("item_id") == pl.col("parent_id")
    return hits.with_columns(
        pl.col("granularity").fill_null(
            pl.when(itself).then(pl.lit("doc")).otherwise(pl.lit("block"))
        ),
        pl.col("block_type").fill_null("unknown"),
    )


# --- per parent in each list -------------------------------------------------------------------


def parents_in_lists(hits: pl.LazyFrame) -> pl.LazyFrame:
    """One row per parent in each source's list, what both the fusion and the features read: the
    max-decay aligner over its hit scores (best + DECAY * second + DECAY² * third ...), its best
    hit rank, best and worst hit scores, and the RRF terms of its hits."""
    below_best = pl.col("score").rank("ordinal", descending=True).over(LIST_PARENT) - 1
    return (
        hits.with_columns(decayed=pl.col("score") * pl.lit(DECAY) ** below_best)
        .group_by(LIST_PARENT)
        .agg(
            raw_score=pl.col("decayed").sum(),
            best_rank=pl.col("rank").min(),
            best_score=pl.col("score").max(),
            worst_score=pl.col("score").min(),
            rrf_part=(1.0 / (pl.col("rank") + RRF_K)).sum(),
        )
    )


# --- fuse -------------------------------------------------------------------------------------


def fuse(in_lists: pl.LazyFrame) -> pl.LazyFrame:
    lists = in_lists.with_columns(
        list_rank=position(LIST, descending("raw_score"), "best_rank", "parent_id")
    )
    return (
        lists.group_by("query_id", pl.col("parent_id").alias("item_id"))
        .agg(fused_score=(1.0 / (pl.col("list_rank") + RRF_K)).sum(), n_sources=pl.len())
        .with_columns(
            rank=position("query_id", -pl.col("fused_score").round(12), "item_id"),
            n_sources=pl.col("n_sources").cast(pl.Int64),
        )
        .select("query_id", "item_id", "fused_score", "rank", "n_sources")
        .sort("query_id", "rank")
    )


# --- parent features --------------------------------------------------------------------------


def per_source_evidence(in_lists: pl.LazyFrame) -> pl.LazyFrame:
    """Each parent in each source's list: its rank there, its best hit score min-max normalised
    over the list, and its relative lead over the next parent when it is first."""
    in_list_order = ("best_rank", "parent_id")
    low = pl.col("worst_score").min().over(LIST)
    spread = pl.col("best_score").max().over(LIST) - low
    best = pl.col("best_score")
    next_score = best.shift(-1).over(LIST, order_by=in_list_order)
    relative_lead = pl.when(best != 0).then(((best - next_score) / best.abs()).clip(0.0, 1.0))
    return in_lists.with_columns(
        parent_rank=position(LIST, *in_list_order),
        hit_score=pl.when(spread != 0).then((best - low) / spread).otherwise(1.0),
        lead=relative_lead,
        sources_in_query=pl.col("source").n_unique().over("query_id"),
    ).with_columns(
        lead=pl.when(pl.col("parent_rank") == 1).then("lead").otherwise(0.0).fill_null(0.0)
    )


def evidence_per_parent(per_source: pl.LazyFrame) -> pl.LazyFrame:
    sources = pl.col("sources_in_query").first()
    return per_source.group_by(QUERY_PARENT).agg(
        rrf_sum=pl.col("rrf_part").sum(),
        max_score=pl.col("hit_score").max(),
        parent_rrf=(1.0 / (pl.col("parent_rank") + RRF_K)).sum(),
        source_agreement=(1.0 / pl.col("parent_rank")).sum() / sources,
        score_lead=pl.col("lead").sum() / sources,
    )


def coverage_per_parent(hits: pl.LazyFrame) -> pl.LazyFrame:
    """Block types hit, the document's size, and the share of its chunks hit (distinct block
    hits, item and block type, over total_chunks; 0 without a positive total_chunks)."""
    hit_chunks = (
        hits.filter(pl.col("granularity") == "block")
        .unique([*QUERY_PARENT, "item_id", "block_type"])
        .group_by(QUERY_PARENT)
        .agg(hit_chunks=pl.len())
    )
    total = pl.col("total_chunks")
    return (
        hits.group_by(QUERY_PARENT)
        .agg(
            coverage=pl.col("block_type").n_unique().cast(pl.Int64),
            total_chunks=total.max().cast(pl.Int64),
        )
        .join(hit_chunks, on=QUERY_PARENT, how="left")
        .with_columns(
            coverage_ratio=pl.when(total > 0)
            .then(pl.min_horizontal(1.0, pl.col("hit_chunks").fill_null(0) / total))
            .otherwise(0.0),
            total_chunks=total.fill_null(0),
        )
    )


def parent_features(hits: pl.LazyFrame, in_lists: pl.LazyFrame) -> pl.LazyFrame:
    evidence = evidence_per_parent(per_source_evidence(in_lists))
    return (
        evidence.join(coverage_per_parent(hits), on=QUERY_PARENT)
        .select(FEATURE_COLUMNS)
        .sort(QUERY_PARENT)
    )


# --- score ------------------------------------------------------------------------------------


def quantile_normalised(name: str) -> pl.Expr:
    """`name` placed between its query's P10 and P90, clipped to [0, 1]; 0 when they are equal
    and the value sits on them."""
    x = pl.col(name)
    lo = x.quantile(P_LO, interpolation="linear").over("query_id")
    hi = x.quantile(P_HI, interpolation="linear").over("query_id")
    scaled = ((x - lo) / ((hi - lo) + EPS)).clip(0.0, 1.0)
    return pl.when((hi - lo == 0) & (x == lo)).then(0.0).otherwise(scaled).alias(f"{name}_norm")


def sub_scores() -> list[pl.Expr]:
    norm = {name: pl.col(f"{name}_norm") for name in NORMALISED}
    ratio = pl.col("coverage_ratio")
    return [
        (ALPHA * norm["rrf_sum"] + (1 - ALPHA) * norm["max_score"]).alias("s_strength"),
        (BETA * norm["coverage"] + (1 - BETA) * ratio).alias("s_coverage"),
        (ratio * (STABILITY_BASE + STABILITY_SIZE_WEIGHT * norm["log_chunks"]))
        .clip(0.0, 1.0)
        .alias("s_stability"),
    ]


def weighted_geomean() -> pl.Expr:
    """exp(Σ w ln max(s, floor) / Σ w) over the sub-scores: 0 when one is ≤ 0, null when one is
    null."""
    terms = [pl.col(name) for name in WEIGHTS]
    logs = sum(
        (w * pl.col(name).clip(lower_bound=SUBSCORE_FLOOR).log() for name, w in WEIGHTS.items()),
        start=pl.lit(0.0),
    )
    geomean = (logs / sum(WEIGHTS.values())).exp()
    return (
        pl.when(pl.any_horizontal(term.is_null() for term in terms))
        .then(None)
        .when(pl.any_horizontal(term <= 0 for term in terms))
        .then(0.0)
        .otherwise(geomean)
    )


def score_at_rank(rank: int) -> pl.Expr:
    return pl.col("overall_score").filter(pl.col("rank") == rank).max().over("query_id")


def risk_flags(parents: pl.LazyFrame) -> pl.LazyFrame:
    norm, ratio = pl.col("max_score_norm"), pl.col("coverage_ratio")
    conditions = {
        "low_coverage": (pl.col("s_strength") >= 0.7) & (pl.col("s_coverage") < 0.3),
        "single_spike": (norm >= 0.8) & (pl.col("rrf_sum_norm") < 0.3),
        "sparse_evidence": ratio < 0.1,
        "huge_doc_sparse": (pl.col("total_chunks") >= 50) & (ratio < 0.2),
        "ambiguous_candidate": (pl.col("rank") == 2) & (pl.col("top2_ratio") >= R_HITL),
    }
    return parents.with_columns(
        conditions[name].fill_null(False).alias(f"flag_{name}") for name in RISK_FLAGS
    )


def score_parents(features: pl.LazyFrame) -> pl.LazyFrame:
    top1, top2 = score_at_rank(1), score_at_rank(2)
    scored = (
        features.with_columns(
            log_chunks=(pl.col("total_chunks") + 1.0).log(),
            n_candidates=pl.len().over("query_id").cast(pl.Int64),
        )
        .with_columns(quantile_normalised(name) for name in NORMALISED)
        .with_columns(sub_scores())
        .with_columns(overall_score=weighted_geomean())
        .with_columns(
            rank=position("query_id", descending("overall_score"), "parent_id", nulls_last=True)
        )
        .with_columns(top2_ratio=pl.when(top1 != 0).then(top2 / top1))
    )
    return risk_flags(scored).sort("query_id", "rank")


# --- contract ---------------------------------------------------------------------------------


def confidence_level(score: pl.Expr) -> pl.Expr:
    return (
        pl.when(score.is_null() | (score < T_LOW))
        .then(pl.lit("low"))
        .when(score < T_HIGH)
        .then(pl.lit("medium"))
        .otherwise(pl.lit("high"))
    )


def top_parents(parents: pl.LazyFrame) -> pl.LazyFrame:
    """Per query, its first TOP_N parents in rank order, each with its sub-scores and the names
    of its raised risk flags."""
    raised = pl.concat_list(
        pl.when(pl.col(f"flag_{name}")).then(pl.lit(name)) for name in RISK_FLAGS
    ).list.drop_nulls()
    entry = pl.struct(
        "parent_id",
        "overall_score",
        strength="s_strength",
        coverage="s_coverage",
        stability="s_stability",
        risk_flags=raised,
    )
    return (
        parents.filter(pl.col("rank") <= TOP_N)
        .group_by("query_id")
        .agg(top_parents=entry.sort_by("rank"))
    )


def query_contract(parents: pl.LazyFrame) -> pl.LazyFrame:
    need_hitl = (pl.col("top2_ratio") >= R_HITL).fill_null(False)
    thresholds = pl.struct(T_low=pl.lit(T_LOW), T_high=pl.lit(T_HIGH), R_hitl=pl.lit(R_HITL))
    return (
        parents.filter(pl.col("rank") == 1)
        .select(
            score_policy_version=pl.lit(POLICY_VERSION),
            query_id="query_id",
            best_parent_id="parent_id",
            best_overall_score="overall_score",
            top2_ratio="top2_ratio",
            confidence_level=confidence_level(pl.col("overall_score")),
            need_hitl=need_hitl,
        )
        .with_columns(web_fallback=(pl.col("confidence_level") == "low") & ~pl.col("need_hitl"))
        .join(top_parents(parents), on="query_id", how="left")
        .with_columns(thresholds_used=thresholds)
        .sort("query_id")
    )


# --- run ----------------------------------------------------------------------------------------


def run_polars(log: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Fuse, derive parent features, score and write the contract for `log` into `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    hits = scan_hits(Path(log))
    in_lists = parents_in_lists(hits)
    fused, features = pl.collect_all([fuse(in_lists), parent_features(hits, in_lists)])
    parents = score_parents(features.lazy()).collect()
    contract = query_contract(parents.lazy()).collect()
    fused.write_parquet(out / "fused.parquet")
    features.write_parquet(out / "parent_features.parquet")
    parents.write_parquet(out / "parents.parquet")
    contract.write_ndjson(out / "contract.jsonl")
    return {
        "fused.parquet": fused.height,
        "parent_features.parquet": features.height,
        "parents.parquet": parents.height,
        "contract.jsonl": contract.height,
    }


def main(argv: list[str] | None = None) -> int:
    from benchmarks.pandas_pipeline import peer_main  # pandas: only on the command line

    return peer_main(__doc__, run_polars, argv)


if __name__ == "__main__":
    sys.exit(main())
