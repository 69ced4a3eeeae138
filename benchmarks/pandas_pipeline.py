"""`duckscore run` of the seeds' recipe and policy, written the way a user would otherwise write it: pandas.

The benchmark's config (c). The same pipeline as `duckscore run --recipe hybrid_v1 --policy
overall_v1 --top-n 5`, in idiomatic vectorised pandas (sort, groupby, cumcount, transform; no
Python loop over hits), written from the seeds' formulas rather than translated from the SQL:

  fuse      per (query, source, parent): the max-decay aligner s1 + 0.5 s2 + 0.25 s3 ... over the
            parent's hit scores; per (query, source): the parent's list rank by that score (then
            best hit rank, then parent_id); per (query, parent): RRF Σ 1 / (60 + list_rank) and
            the number of sources; the fused rank by the score rounded to 12 digits, then id
  features  seed 000 §3 (rrf_sum, max_score min-max-normalised per list, coverage, total_chunks,
            coverage_ratio) and the evidence overall_v2 reads (parent_rrf, source_agreement,
            score_lead)
  score     seed 000 §4–§8: per-query P10/P90 normalisation, sub-scores, weighted geometric
            mean, rank, risk flags, top-2 ratio, confidence level, HITL and web fallback, and a
            contract line per query with its top 5 parents

`compare` checks the outputs against a `duckscore run` folder, table by table.

    python benchmarks/pandas_pipeline.py LOG.parquet OUT_DIR [--check DUCKSCORE_RUN_DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/pandas_pipeline.py` from any folder
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
    QUERY_FIELDS,
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


def read_hits(log: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    present = [c for c in LOG_COLUMNS if c in pq.read_schema(log).names]
    hits = pd.read_parquet(log, columns=present)
    if "rank" not in hits:
        hits = hits.sort_values(
            ["query_id", "source", "score", "item_id"], ascending=[True, True, False, True]
        )
        hits["rank"] = hits.groupby(["query_id", "source"], sort=False).cumcount() + 1
    if "granularity" not in hits:
        hits["granularity"] = None
    if "block_type" not in hits:
        hits["block_type"] = None
    if "total_chunks" not in hits:
        hits["total_chunks"] = np.nan
    hits["granularity"] = hits["granularity"].fillna(
        pd.Series(np.where(hits["item_id"] == hits["parent_id"], "doc", "block"), index=hits.index)
    )
    hits["block_type"] = hits["block_type"].fillna("unknown")
    return hits


def fuse(hits: pd.DataFrame) -> pd.DataFrame:
    keys = ["query_id", "source", "parent_id"]
    by_score = hits.sort_values(keys + ["score"], ascending=[True, True, True, False])
    by_score["decayed"] = by_score["score"] * DECAY ** by_score.groupby(keys, sort=False).cumcount()
    lists = (
        by_score.groupby(keys, sort=False)
        .agg(raw_score=("decayed", "sum"), best_rank=("rank", "min"))
        .reset_index()
        .sort_values(
            ["query_id", "source", "raw_score", "best_rank", "parent_id"],
            ascending=[True, True, False, True, True],
        )
    )
    lists["list_rank"] = lists.groupby(["query_id", "source"], sort=False).cumcount() + 1
    lists["contribution"] = 1.0 / (lists["list_rank"] + RRF_K)
    fused = (
        lists.groupby(["query_id", "parent_id"])
        .agg(fused_score=("contribution", "sum"), n_sources=("source", "size"))
        .reset_index()
        .rename(columns={"parent_id": "item_id"})
    )
    fused["rounded"] = fused["fused_score"].round(12)
    fused = fused.sort_values(["query_id", "rounded", "item_id"], ascending=[True, False, True])
    fused["rank"] = fused.groupby("query_id", sort=False).cumcount() + 1
    return fused[["query_id", "item_id", "fused_score", "rank", "n_sources"]].reset_index(drop=True)


def parent_features(hits: pd.DataFrame) -> pd.DataFrame:
    per_source = (
        hits.assign(rrf_part=1.0 / (hits["rank"] + RRF_K))
        .groupby(["query_id", "source", "parent_id"])
        .agg(
            best_rank=("rank", "min"),
            best_score=("score", "max"),
            worst_score=("score", "min"),
            rrf_part=("rrf_part", "sum"),
        )
        .reset_index()
        .sort_values(["query_id", "source", "best_rank", "parent_id"])
    )
    in_list = per_source.groupby(["query_id", "source"], sort=False)
    per_source["parent_rank"] = in_list.cumcount() + 1
    next_score = in_list["best_score"].shift(-1)
    low = in_list["worst_score"].transform("min")
    spread = in_list["best_score"].transform("max") - low
    per_source["hit_score"] = ((per_source["best_score"] - low) / spread.where(spread != 0)).fillna(
        1.0
    )
    relative_lead = (
        (per_source["best_score"] - next_score)
        / per_source["best_score"].abs().where(per_source["best_score"] != 0)
    ).clip(0.0, 1.0)
    per_source["lead"] = relative_lead.where(per_source["parent_rank"] == 1, 0.0).fillna(0.0)
    per_source["parent_rrf"] = 1.0 / (per_source["parent_rank"] + RRF_K)
    per_source["agreement"] = 1.0 / per_source["parent_rank"]
    sources_per_query = per_source.groupby("query_id")["source"].nunique()

    features = (
        per_source.groupby(["query_id", "parent_id"])
        .agg(
            rrf_sum=("rrf_part", "sum"),
            max_score=("hit_score", "max"),
            parent_rrf=("parent_rrf", "sum"),
            agreement=("agreement", "sum"),
            lead=("lead", "sum"),
        )
        .reset_index()
    )
    n_sources = features["query_id"].map(sources_per_query)
    features["source_agreement"] = features.pop("agreement") / n_sources
    features["score_lead"] = features.pop("lead") / n_sources

    per_parent = hits.groupby(["query_id", "parent_id"])
    coverage = per_parent.agg(
        coverage=("block_type", "nunique"), total_chunks=("total_chunks", "max")
    )
    hit_chunks = (
        hits[hits["granularity"] == "block"]
        .drop_duplicates(["query_id", "parent_id", "item_id", "block_type"])
        .groupby(["query_id", "parent_id"])
        .size()
        .rename("hit_chunks")
    )
    coverage = coverage.join(hit_chunks).reset_index()
    total = coverage["total_chunks"]
    coverage["coverage_ratio"] = np.where(
        total > 0, np.minimum(1.0, coverage["hit_chunks"].fillna(0) / total.where(total > 0)), 0.0
    )
    coverage["total_chunks"] = total.fillna(0).astype("int64")
    features = features.merge(coverage.drop(columns="hit_chunks"), on=["query_id", "parent_id"])
    return features[
        [
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
        ]
    ]


def quantile_norm(x: pd.Series, lo: pd.Series, hi: pd.Series) -> pd.Series:
    scaled = ((x - lo) / ((hi - lo) + EPS)).clip(0.0, 1.0)
    return scaled.mask((hi - lo == 0) & (x == lo), 0.0)


def weighted_geomean(parents: pd.DataFrame) -> pd.Series:
    terms = parents[list(WEIGHTS)]
    logs = sum(
        weight * np.log(terms[name].clip(lower=SUBSCORE_FLOOR)) for name, weight in WEIGHTS.items()
    )
    overall = np.exp(logs / sum(WEIGHTS.values()))
    return overall.mask((terms <= 0).any(axis=1), 0.0).mask(terms.isna().any(axis=1))


def score_parents(features: pd.DataFrame) -> pd.DataFrame:
    parents = features.copy()
    parents["log_chunks"] = np.log(parents["total_chunks"] + 1.0)
    per_query = parents.groupby("query_id")
    parents["n_candidates"] = per_query["parent_id"].transform("size")
    bounds = per_query[list(NORMALISED)].quantile([P_LO, P_HI]).unstack()
    for name in NORMALISED:
        lo = parents["query_id"].map(bounds[(name, P_LO)])
        hi = parents["query_id"].map(bounds[(name, P_HI)])
        parents[f"{name}_norm"] = quantile_norm(parents[name], lo, hi)

    parents["s_strength"] = (
        ALPHA * parents["rrf_sum_norm"] + (1 - ALPHA) * parents["max_score_norm"]
    )
    parents["s_coverage"] = BETA * parents["coverage_norm"] + (1 - BETA) * parents["coverage_ratio"]
    parents["s_stability"] = (
        parents["coverage_ratio"]
        * (STABILITY_BASE + STABILITY_SIZE_WEIGHT * parents["log_chunks_norm"])
    ).clip(0.0, 1.0)
    parents["overall_score"] = weighted_geomean(parents)

    parents = parents.sort_values(
        ["query_id", "overall_score", "parent_id"],
        ascending=[True, False, True],
        na_position="last",
    )
    parents["rank"] = parents.groupby("query_id", sort=False).cumcount() + 1
    top1 = (
        parents["overall_score"]
        .where(parents["rank"] == 1)
        .groupby(parents["query_id"])
        .transform("max")
    )
    top2 = (
        parents["overall_score"]
        .where(parents["rank"] == 2)
        .groupby(parents["query_id"])
        .transform("max")
    )
    parents["top2_ratio"] = top2 / top1.where(top1 != 0)

    parents["flag_low_coverage"] = (parents["s_strength"] >= 0.7) & (parents["s_coverage"] < 0.3)
    parents["flag_single_spike"] = (parents["max_score_norm"] >= 0.8) & (
        parents["rrf_sum_norm"] < 0.3
    )
    parents["flag_sparse_evidence"] = parents["coverage_ratio"] < 0.1
    parents["flag_huge_doc_sparse"] = (parents["total_chunks"] >= 50) & (
        parents["coverage_ratio"] < 0.2
    )
    parents["flag_ambiguous_candidate"] = (parents["rank"] == 2) & (parents["top2_ratio"] >= 0.92)
    return parents.reset_index(drop=True)


def confidence_level(score: pd.Series) -> pd.Series:
    level = np.select([score.isna() | (score < T_LOW), score < T_HIGH], ["low", "medium"], "high")
    return pd.Series(level, index=score.index)


def query_contract(parents: pd.DataFrame) -> pd.DataFrame:
    best = parents[parents["rank"] == 1].set_index("query_id")
    queries = pd.DataFrame(
        {
            "best_parent_id": best["parent_id"],
            "best_overall_score": best["overall_score"],
            "top2_ratio": best["top2_ratio"],
        }
    ).reset_index()
    queries["confidence_level"] = confidence_level(queries["best_overall_score"])
    queries["need_hitl"] = (queries["top2_ratio"] >= R_HITL).fillna(False)
    queries["web_fallback"] = (queries["confidence_level"] == "low") & ~queries["need_hitl"]

    top = parents[parents["rank"] <= TOP_N].copy()
    flags = top[[f"flag_{name}" for name in RISK_FLAGS]].to_numpy()
    top["risk_flags"] = [[name for name, on in zip(RISK_FLAGS, row) if on] for row in flags]
    entries = (
        top[["parent_id", "overall_score", "s_strength", "s_coverage", "s_stability", "risk_flags"]]
        .rename(
            columns={"s_strength": "strength", "s_coverage": "coverage", "s_stability": "stability"}
        )
        .to_dict("records")
    )
    top_parents = pd.Series(entries, index=top.index).groupby(top["query_id"]).agg(list)
    queries["top_parents"] = queries["query_id"].map(top_parents)
    queries.insert(0, "score_policy_version", "overall_v1")
    queries["thresholds_used"] = [{"T_low": T_LOW, "T_high": T_HIGH, "R_hitl": R_HITL}] * len(
        queries
    )
    return queries.sort_values("query_id").reset_index(drop=True)


def run_pandas(log: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Fuse, derive parent features, score and write the contract for `log` into `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    hits = read_hits(Path(log))
    fused = fuse(hits)
    features = parent_features(hits)
    del hits
    parents = score_parents(features)
    contract = query_contract(parents)
    fused.to_parquet(out / "fused.parquet", index=False)
    features.to_parquet(out / "parent_features.parquet", index=False)
    parents.to_parquet(out / "parents.parquet", index=False)
    contract.to_json(out / "contract.jsonl", orient="records", lines=True, double_precision=15)
    return {
        "fused.parquet": len(fused),
        "parent_features.parquet": len(features),
        "parents.parquet": len(parents),
        "contract.jsonl": len(contract),
    }


# --- checking against duckscore ------------------------------------------------------------------

TABLES = {  # file: its key columns
    "fused.parquet": ["query_id", "item_id"],
    "parent_features.parquet": ["query_id", "parent_id"],
    "parents.parquet": ["query_id", "parent_id"],
    "contract.jsonl": ["query_id"],
}


def read_table(path: Path) -> pd.DataFrame:
    if path.suffix == ".jsonl":
        table = pd.read_json(path, lines=True, dtype=False)
        top = table.pop("top_parents")
        table["top_parent_ids"] = [
            " ".join(entry["parent_id"] for entry in entries) for entries in top
        ]
        return table[list(QUERY_FIELDS) + ["top_parent_ids"]]
    return pd.read_parquet(path)


def plain(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value


def column_differences(
    name: str, merged: pd.DataFrame, keys: list[str], column: str, rel_tol: float
) -> str | None:
    ours, theirs = merged[f"{column}_d"], merged[f"{column}_p"]
    both_missing = ours.isna() & theirs.isna()
    if pd.api.types.is_float_dtype(ours) or pd.api.types.is_float_dtype(theirs):
        a, b = ours.astype("float64").to_numpy(), theirs.astype("float64").to_numpy()
        with np.errstate(invalid="ignore"):
            same = np.isclose(a, b, rtol=rel_tol, atol=1e-15) | both_missing.to_numpy()
    else:
        same = ((ours == theirs).fillna(False) | both_missing).to_numpy()
    if same.all():
        return None
    first = merged[~same].iloc[0]
    where = ", ".join(f"{k}={plain(first[k])!r}" for k in keys)
    return (
        f"{name}: {column} differs on {int((~same).sum())} rows, e.g. {where}: "
        f"duckscore {plain(first[f'{column}_d'])!r}, pandas {plain(first[f'{column}_p'])!r}"
    )


def compare(duckscore_dir: str | Path, pandas_dir: str | Path, rel_tol: float = 1e-9) -> list[str]:
    """The differences between a `duckscore run` folder and `run_pandas`'s: [] when they agree."""
    problems = []
    for name, keys in TABLES.items():
        ours, theirs = read_table(Path(duckscore_dir) / name), read_table(Path(pandas_dir) / name)
        merged = ours.merge(theirs, on=keys, how="outer", suffixes=("_d", "_p"), indicator=True)
        unmatched = merged["_merge"] != "both"
        if unmatched.any():
            problems.append(
                f"{name}: {int((merged['_merge'] == 'left_only').sum())} keys only in duckscore, "
                f"{int((merged['_merge'] == 'right_only').sum())} only in pandas"
            )
        merged = merged[~unmatched]
        for column in sorted(set(ours.columns) & set(theirs.columns) - set(keys)):
            difference = column_differences(name, merged, keys, column, rel_tol)
            if difference:
                problems.append(difference)
    return problems


def peer_main(doc: str, run: Callable[[Path, Path], dict[str, int]], argv: list[str] | None) -> int:
    """The command line of a peer pipeline: `LOG OUT [--check DUCKSCORE_RUN_DIR]`."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument(
        "--check",
        type=Path,
        metavar="DUCKSCORE_RUN_DIR",
        help="compare the outputs with a `duckscore run` folder; exit 1 on a difference",
    )
    args = parser.parse_args(argv)
    for name, rows in run(args.log, args.out).items():
        print(f"{name}: {rows:,} rows")
    if args.check:
        problems = compare(args.check, args.out)
        print("\n".join(problems) if problems else f"same as {args.check}")
        return 1 if problems else 0
    return 0


def main(argv: list[str] | None = None) -> int:
    return peer_main(__doc__, run_pandas, argv)


if __name__ == "__main__":
    sys.exit(main())
