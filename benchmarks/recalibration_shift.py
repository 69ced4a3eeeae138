"""Issue 51: does `duckscore recalibrate` keep p_good calibrated when a domain's rate of good
answers moves, and does it never make the shipped map worse without labels?

Each bundled collection with judgments (SciFact: its 300 queries; CISI: its 76 judged ones) is
labelled as `duckscore labels` labels its reference RRF run (good against ambiguous or bad) and
subsampled to a rate of good answers of 0.3, 0.5 and 0.8 — good or bad queries dropped at
random, --seeds times — a subsample being the retrieval log filtered to its query ids. On each:
the default policy (overall_v3, calibrated on SciFact) as shipped, recalibrated without labels
by each --adapt mode (a refusal keeps the shipped map: counted, and its ECE is the shipped
map's), and with 20 and 40 labels drawn at random from the subsample (refused: the shipped map
kept, counted). Each p_good is judged on every query of the subsample (the labelled ones too)
by the project's ECE (calibrate/calibration_metrics.py: 10 equal-width bins) and by the Brier
score (ECE is not a proper score: a constant map at the rate scores ~0), beside the ECE a
perfectly calibrated map shows at that size (outcomes redrawn as Bernoulli of the shipped
p_good, 1,000 times, sql/calibrate/ece_consistency.sql: mean and P95), with the shift
`duckscore drift` diagnoses on the subsample and the mode it chooses.

    python benchmarks/recalibration_shift.py [--seeds 10] [--rates 0.3,0.5,0.8] \
        [--collections scifact,cisi] [--workers 2] [--json results/recalibration_shift.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from duckscore.api.functions import run
from duckscore.calibrate.calibration_metrics import frame_metrics
from duckscore.calibrate.probability import brier
from duckscore.calibrate.probability_report import ece_consistency
from duckscore.calibrate.recalibrate import ADAPT_METHODS, recalibrate
from duckscore.calibrate.settings import CalibrationError
from duckscore.common.defaults import DEFAULT_POLICY
from duckscore.core.connection import EngineSettings
from duckscore.core.resources import fixtures_dir
from duckscore.core.session import Session
from duckscore.metrics.labels import make_labels

COLLECTIONS = ("scifact", "cisi")
RATES = (0.3, 0.5, 0.8)
LABEL_COUNTS = (20, 40)
LABEL_FREE = tuple(m for m in ("quantile", "prior", "auto") if m in ADAPT_METHODS)
ECE_BAR_WITH_LABELS = 0.10
ONE_THREAD = EngineSettings(threads=1)  # a worker each core


@dataclass(frozen=True)
class Collection:
    name: str
    log: pd.DataFrame
    labels: pd.DataFrame  # query_id, label: the judged queries
    outcome: pd.Series  # query_id -> 1.0 good, 0.0 ambiguous or bad
    shipped: pd.DataFrame  # the default policy's decisions on the whole log, by query_id


def load(name: str) -> Collection:
    folder = fixtures_dir() / name
    log = pd.read_parquet(folder / "retrieval_log.parquet")
    labels = make_labels(folder / "reference_rrf_k60.parquet", folder / "qrels.parquet")
    outcome = (labels.set_index("query_id")["label"] == "good").astype(float)
    # the score of a query reads its own parents only (reference bounds): a subsample's decisions
    # are the whole log's, restricted (tests/benchmarks/test_recalibration_shift.py checks it)
    shipped = run(log, policy=DEFAULT_POLICY, explain=False).queries.df().set_index("query_id")
    return Collection(name, log, labels[["query_id", "label"]], outcome, shipped)


def subsample(outcome: pd.Series, rate: float, seed: int) -> list[str]:
    """Query ids whose rate of good answers is `rate`: every query of the side that is short,
    and of the other as many as that rate needs, drawn at random."""
    good = sorted(outcome.index[outcome == 1.0])
    bad = sorted(outcome.index[outcome == 0.0])
    rng = np.random.default_rng([seed, round(1000 * rate)])
    if rate >= len(good) / len(outcome):
        kept = rng.choice(bad, round(len(good) * (1 - rate) / rate), replace=False)
        return sorted([*good, *kept])
    kept = rng.choice(good, round(len(bad) * rate / (1 - rate)), replace=False)
    return sorted([*kept, *bad])


class Measure:
    """One worker's metrics session and scratch folder, and the collections it loaded."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.session = Session(ONE_THREAD)
        self.collections: dict[str, Collection] = {}

    def collection(self, name: str) -> Collection:
        if name not in self.collections:
            self.collections[name] = load(name)
        return self.collections[name]

    def ece(self, ids: list[str], p_good: np.ndarray, y: np.ndarray) -> float:
        frame = pd.DataFrame({"query_id": ids, "score": p_good, "outcome": y})
        return float(frame_metrics(self.session, frame)["ece"])

    def subsample(self, name: str, rate: float, seed: int) -> dict[str, Any]:
        """Every figure of one subsample."""
        c = self.collection(name)
        ids = subsample(c.outcome, rate, seed)
        log = c.log[c.log["query_id"].isin(ids)]
        y = c.outcome.loc[ids].to_numpy()
        shipped = c.shipped.loc[ids].reset_index()
        p_shipped = shipped["p_good"].to_numpy(dtype=float)
        noise = ece_consistency(self.session, shipped[["query_id", "p_good"]], seed)
        row: dict[str, Any] = {
            "collection": name, "rate": rate, "seed": seed, "n": len(ids), "good": int(y.sum()),
            "noise_mean": noise["ece_mean"], "noise_p95": noise["ece_p95"],
            "shipped": self.ece(ids, p_shipped, y), "shipped_p_good_mean": float(p_shipped.mean()),
            "shipped_brier": brier(p_shipped, y),
        }  # fmt: skip
        for mode in LABEL_FREE:
            p, facts = self.recalibrated(log, ids, p_shipped, adapt=mode)
            row |= {mode: self.ece(ids, p, y), f"{mode}_brier": brier(p, y)}
            row |= {f"{mode}_{k}": v for k, v in facts.items()}
        # the same diagnosis in every mode: the one of the first that ran
        row["shift"] = next((row[f"{m}_shift"] for m in LABEL_FREE if row[f"{m}_shift"]), None)
        for count in LABEL_COUNTS:
            drawn = np.random.default_rng([seed, count]).choice(ids, count, replace=False)
            labels = c.labels[c.labels["query_id"].isin(drawn)]
            p, facts = self.recalibrated(log, ids, p_shipped, labels=labels, seed=seed)
            rest = ~np.isin(ids, drawn)  # the queries the labels did not see
            held_out = self.ece(list(np.asarray(ids)[rest]), p[rest], y[rest])
            name = f"labels_{count}"
            row |= {name: self.ece(ids, p, y), f"{name}_held_out": held_out}
            row |= {f"{name}_brier": brier(p, y)}
            row |= {f"{name}_{k}": v for k, v in facts.items()}
        return row

    def recalibrated(
        self, log: pd.DataFrame, ids: list[str], shipped: np.ndarray, **options: Any
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """p_good of the subsample's queries under the recalibrated policy (the shipped map's
        when refused), whether it was refused, what it chose (without labels: keep, prior,
        quantile; with: the map the labels chose) and the shift it diagnosed."""
        try:
            done = recalibrate(
                DEFAULT_POLICY, log, self.work / "recalibrated.yaml", engine=ONE_THREAD, **options
            )
        except CalibrationError:
            return shipped, {"refused": True, "chosen": "refused", "shift": None}
        report = done.report
        p = done.decisions.set_index("query_id").loc[ids, "p_good"].to_numpy(dtype=float)
        return p, {
            "refused": False,
            "chosen": report.chosen["adapt"] if report.labels is None else report.labels.chosen,
            "shift": None if report.diagnosis is None else report.diagnosis.shift,
        }


_MEASURES: dict[str, Measure] = {}  # a worker's, by the run's scratch folder


def _task(task: tuple[str, float, int, str]) -> dict[str, Any]:
    name, rate, seed, work = task
    if work not in _MEASURES:
        logging.getLogger("duckscore").setLevel(logging.ERROR)  # the scale warnings: expected
        _MEASURES[work] = Measure(Path(tempfile.mkdtemp(dir=work)))
    started = time.perf_counter()
    row = _MEASURES[work].subsample(name, rate, seed)
    return row | {"seconds": time.perf_counter() - started}


def measure_all(
    collections: list[str], rates: list[float], seeds: int, workers: int
) -> list[dict[str, Any]]:
    tasks = [(c, r, s) for c in collections for r in rates for s in range(seeds)]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as work, ExitStack() as stack:
        jobs = [(c, r, s, work) for c, r, s in tasks]
        done: Iterator[dict[str, Any]] = map(_task, jobs)
        if workers > 1:
            context = multiprocessing.get_context("spawn")  # DuckDB is not fork-safe
            done = stack.enter_context(context.Pool(workers)).imap_unordered(_task, jobs)
        for row in done:
            rows.append(row)
            print(
                f"[{len(rows)}/{len(tasks)}] {row['collection']} rate {row['rate']} seed "
                f"{row['seed']}: {row['n']} queries, {row['shift']}, {row['seconds']:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    return sorted(rows, key=lambda r: (collections.index(r["collection"]), r["rate"], r["seed"]))


def methods() -> list[str]:
    return [*LABEL_FREE, *(f"labels_{n}" for n in LABEL_COUNTS)]


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per collection and rate: each method's mean and max ECE, its refusals, the noise; the
    diagnoses and choices; and issue 51's bars — a label-free ECE above the shipped map's by
    more than the noise (P95) on no subsample, 40 labels at ECE ≤ 0.10 on every one."""
    frame = pd.DataFrame(rows)
    out = []
    for (name, rate), group in frame.groupby(["collection", "rate"], sort=False):
        excess = {m: group[m] - group["shipped"] for m in LABEL_FREE}
        summary: dict[str, Any] = {
            "collection": name, "rate": rate, "subsamples": len(group),
            "n": float(group["n"].mean()), "good": float(group["good"].mean()),
            "noise_mean": float(group["noise_mean"].mean()),
            "noise_p95": float(group["noise_p95"].mean()),
            "shifts": dict(Counter(group["shift"])),
            "chosen": {m: dict(Counter(group[f"{m}_chosen"])) for m in methods()},
            "shipped_p_good_mean": float(group["shipped_p_good_mean"].mean()),
        }  # fmt: skip
        for m in ["shipped", *methods()]:
            summary[m] = {"mean": float(group[m].mean()), "max": float(group[m].max())}
            summary[m]["brier"] = float(group[f"{m}_brier"].mean())
            if m != "shipped":
                summary[m]["refused"] = int(group[f"{m}_refused"].sum())
            if m.startswith("labels_"):
                summary[m]["held_out"] = float(group[f"{m}_held_out"].mean())
        for m in LABEL_FREE:
            summary[m]["worst_excess"] = float(excess[m].max())
            summary[m]["within_noise"] = int((excess[m] <= group["noise_p95"]).sum())
        last = f"labels_{LABEL_COUNTS[-1]}"
        summary[last]["at_most_bar"] = int((group[last] <= ECE_BAR_WITH_LABELS).sum())
        out.append(summary)
    return out


def markdown(summary: list[dict[str, Any]]) -> str:
    names = {"shipped": "shipped", **{m: f"--adapt {m}" for m in LABEL_FREE}}
    names |= {f"labels_{n}": f"{n} labels" for n in LABEL_COUNTS}
    head = ["collection", "rate", "queries", *names.values(), "perfect map (mean, P95)"]
    lines = ["| " + " | ".join(head) + " |", "|---|---:|---:|" + "---:|" * (len(head) - 3)]
    for s in summary:
        cells = [s["collection"], f"{s['rate']:.1f}", f"{s['n']:.0f}"]
        for m in names:
            refused = s[m].get("refused", 0)
            held_out = f"; rest {s[m]['held_out']:.3f}" if "held_out" in s[m] else ""
            cells.append(
                f"{s[m]['mean']:.3f} ({s[m]['max']:.3f}){held_out}"
                + (f", {refused} refused" if refused else "")
            )
        cells.append(f"{s['noise_mean']:.3f}, {s['noise_p95']:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    last = f"labels_{LABEL_COUNTS[-1]}"
    free = ", ".join(LABEL_FREE)
    lines += [
        "",
        f"| collection | rate | diagnosis | auto chose | the labels chose ({', '.join(map(str, LABEL_COUNTS))}) "
        f"| label-free within the noise ({free}; the worst excess) "
        f"| {LABEL_COUNTS[-1]} labels at ECE ≤ {ECE_BAR_WITH_LABELS:.2f} |",
        "|---|---:|---|---|---|---|---:|",
    ]
    for s in summary:
        within = "; ".join(
            f"{s[m]['within_noise']}/{s['subsamples']} ({s[m]['worst_excess']:+.3f})"
            for m in LABEL_FREE
        )
        labelled = "; ".join(_counts(s["chosen"][f"labels_{n}"]) for n in LABEL_COUNTS)
        auto = _counts(s["chosen"]["auto"]) if "auto" in LABEL_FREE else "-"
        lines.append(
            f"| {s['collection']} | {s['rate']:.1f} | {_counts(s['shifts'])} | {auto} | "
            f"{labelled} | {within} | {s[last]['at_most_bar']}/{s['subsamples']} "
            f"(worst {s[last]['max']:.3f}) |"
        )
    lines += ["", "| collection | rate | Brier score, mean: " + ", ".join(names.values()) + " |",
              "|---|---:|---|"]  # fmt: skip
    for s in summary:
        briers = ", ".join(f"{s[m]['brier']:.3f}" for m in names)
        lines.append(f"| {s['collection']} | {s['rate']:.1f} | {briers} |")
    return "\n".join(lines)


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def main(argv: list[str] | None = None, echo: Callable[[str], None] = print) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rates", default=",".join(str(r) for r in RATES))
    parser.add_argument("--collections", default=",".join(COLLECTIONS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows = measure_all(
        args.collections.split(","),
        [float(r) for r in args.rates.split(",")],
        args.seeds,
        args.workers,
    )
    summary = summarise(rows)
    echo(markdown(summary))
    results = {"summary": summary, "subsamples": rows, "seconds": time.perf_counter() - started}
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
