"""Issue 32: does a policy calibrated on SciFact hold on another domain, and what does
`duckscore recalibrate` buy there? Measured on the bundled CISI log (library and information
science; 76 judged queries), judged against its relevance judgments.

For each collection: the default policy's best parent against the fused ranking's top-1 (the
share of judged queries whose parent is relevant), its confidence levels and HITL share. On CISI:
p_good of the default as shipped, recalibrated without labels (--adapt quantile; --adapt prior,
which CISI refuses: EM's rate runs to 0, the row says so) and with --labels N of the judged
queries (drawn stratified by label, --splits times), each judged on the judged queries it did
not learn from: ECE (10 equal-width bins), Brier score beside a
constant at the judged queries' own rate of good, AUROC good vs bad, and the ECE a perfectly
calibrated p_good shows on as many queries (outcomes redrawn as Bernoulli(p_good), 1,000 times:
the mean and P95). Figures of the labelled rows are means over the splits.

    python benchmarks/cross_domain.py [--labels 40] [--splits 10] [--json results/cross_domain.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from duckscore.calibrate.recalibrate import recalibrate
from duckscore.calibrate.settings import CalibrationError
from duckscore.common.defaults import DEFAULT_POLICY
from duckscore.core.resources import fixtures_dir
from duckscore.metrics.labels import make_labels
from duckscore.runner.job import Job
from duckscore.runner.pipeline import run

COLLECTIONS = ("scifact", "cisi")
TARGET = "cisi"
BINS = 10
REDRAWS = 1000


def fixture(collection: str, name: str) -> Path:
    return fixtures_dir() / collection / name


def ece(p: np.ndarray, y: np.ndarray) -> float:
    bins = np.minimum((p * BINS).astype(int), BINS - 1)
    return float(
        sum(
            (bins == b).mean() * abs(p[bins == b].mean() - y[bins == b].mean())
            for b in range(BINS)
            if (bins == b).any()
        )
    )


def noise_floor(p: np.ndarray, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = [ece(p, (rng.random(len(p)) < p).astype(float)) for _ in range(REDRAWS)]
    return float(np.mean(draws)), float(np.quantile(draws, 0.95))


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    pos, neg = score[positive], score[~positive]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def decisions(policy: str, collection: str, out: Path) -> pd.DataFrame:
    run(fixture(collection, "retrieval_log.parquet"), out, Job(policy=policy))
    return pd.read_parquet(out / "queries.parquet")


def defaults_row(collection: str, work: Path) -> dict[str, Any]:
    """The default policy and recipe on `collection`: best parent vs fused top-1, levels, HITL."""
    out = work / f"default_{collection}"
    queries = decisions(DEFAULT_POLICY, collection, out)
    qrels = pd.read_parquet(fixture(collection, "qrels.parquet"))
    relevant = set(zip(qrels["query_id"], qrels["parent_id"]))
    judged = queries[queries["query_id"].isin(qrels["query_id"])]
    fused = pd.read_parquet(out / "fused.parquet")
    top1 = dict(
        zip(fused.loc[fused["rank"] == 1, "query_id"], fused.loc[fused["rank"] == 1, "item_id"])
    )
    return {
        "collection": collection,
        "judged": len(judged),
        "best_parent_relevant": float(
            np.mean(
                [(q, p) in relevant for q, p in zip(judged["query_id"], judged["best_parent_id"])]
            )
        ),
        "fused_top1_relevant": float(
            np.mean([(q, top1.get(q)) in relevant for q in judged["query_id"]])
        ),
        "levels": judged["confidence_level"].value_counts().to_dict(),
        "hitl_share": float(queries["need_hitl"].mean()),
    }


def judged_figures(queries: pd.DataFrame, labels: pd.DataFrame) -> dict[str, float]:
    frame = queries.merge(labels, on="query_id")
    p, good = frame["p_good"].to_numpy(), (frame["label"] == "good").to_numpy()
    y = good.astype(float)
    decided = frame["label"] != "ambiguous"
    floor_mean, floor_p95 = noise_floor(p)
    return {
        "n": len(frame),
        "ece": ece(p, y),
        "ece_perfect_mean": floor_mean,
        "ece_perfect_p95": floor_p95,
        "brier": float(np.mean((p - y) ** 2)),
        "brier_constant": float(y.mean() * (1 - y.mean())),
        "auroc_good_vs_bad": auroc(p[decided.to_numpy()], good[decided.to_numpy()]),
        "mean_p_good": float(p.mean()),
        "rate_good": float(y.mean()),
    }


def stratified(labels: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    shuffled = labels.sample(frac=1.0, random_state=seed)
    share = n / len(labels)
    parts = [g.head(round(len(g) * share)) for _, g in shuffled.groupby("label", sort=True)]
    return pd.concat(parts).head(n)


def target_rows(work: Path, n_labels: int, splits: int) -> list[dict[str, Any]]:
    log = fixture(TARGET, "retrieval_log.parquet")
    labels = make_labels(
        fixture(TARGET, "reference_rrf_k60.parquet"), fixture(TARGET, "qrels.parquet")
    )
    rows: list[dict[str, Any]] = []

    def measure(name: str, policy: str, judged: pd.DataFrame, tag: str) -> dict[str, float]:
        return judged_figures(decisions(policy, TARGET, work / tag), judged)

    rows.append({"policy": "as shipped", **measure("shipped", DEFAULT_POLICY, labels, "shipped")})
    for adapt in ("quantile", "prior"):
        path = work / f"free_{adapt}.yaml"
        try:
            recalibrate(DEFAULT_POLICY, log, path, adapt=adapt)
        except CalibrationError as refused:  # --adapt prior: EM runs to 0 on CISI
            rows.append({"policy": f"no labels, --adapt {adapt}", "refused": str(refused)})
            continue
        rows.append(
            {"policy": f"no labels, --adapt {adapt}", **measure(adapt, str(path), labels, adapt)}
        )
    per_split: list[dict[str, float]] = []
    for seed in range(splits):
        learn = stratified(labels, n_labels, seed)
        learn.to_parquet(work / "learn.parquet")
        path = work / f"labelled_{seed}.yaml"
        recalibrate(DEFAULT_POLICY, log, path, labels=work / "learn.parquet", seed=seed)
        judged = labels[~labels["query_id"].isin(learn["query_id"])]
        per_split.append(measure("labelled", str(path), judged, f"labelled_{seed}"))
    mean = pd.DataFrame(per_split).mean().to_dict()
    rows.append({"policy": f"{n_labels} labels (mean of {splits} splits)", **mean,
                 "ece_max": max(r["ece"] for r in per_split)})  # fmt: skip
    return rows


def markdown(defaults: list[dict[str, Any]], target: list[dict[str, Any]]) -> str:
    lines = [
        "| collection | judged | best parent relevant | fused top-1 relevant | levels (high / medium / low) | HITL |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in defaults:
        levels = " / ".join(str(r["levels"].get(k, 0)) for k in ("high", "medium", "low"))
        lines.append(
            f"| {r['collection']} | {r['judged']} | {r['best_parent_relevant']:.3f} | "
            f"{r['fused_top1_relevant']:.3f} | {levels} | {r['hitl_share']:.1%} |"
        )
    lines += [
        "",
        "| p_good on CISI | judged | ECE (perfect map: mean, P95) | Brier (constant) | AUROC good vs bad | mean p_good (rate) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in target:
        if "refused" in r:
            lines.append(f"| {r['policy']} | refused, nothing written | | | | |")
            continue
        lines.append(
            f"| {r['policy']} | {r['n']:.0f} | {r['ece']:.3f} ({r['ece_perfect_mean']:.3f}, "
            f"{r['ece_perfect_p95']:.3f}) | {r['brier']:.3f} ({r['brier_constant']:.3f}) | "
            f"{r['auroc_good_vs_bad']:.3f} | {r['mean_p_good']:.3f} ({r['rate_good']:.3f}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None, echo: Callable[[str], None] = print) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=40)
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        defaults = [defaults_row(c, work) for c in COLLECTIONS]
        target = target_rows(work, args.labels, args.splits)
    echo(markdown(defaults, target))
    results = {"defaults": defaults, "target": target, "labels": args.labels, "splits": args.splits}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
