"""Answers benchmark: `duckscore answers` and the same rules in pandas, side by side.

A synthetic set of logged answers (`synthetic_answers.py`: answers, citations, chunks and
events Parquet files, deterministic from --seed, cached in --data-dir) is scored by each config
once, in a fresh worker process that reports its wall seconds and peak RSS:

  b duckscore  `duckscore -q answers ... --threads N` end to end as a child process of the
               worker: its wall time (interpreter start and imports included) and its peak RSS
  c pandas     `benchmarks.answers_pandas.run_pandas`, the same rules in idiomatic pandas
               (imports before the clock; the Arrow thread pool gets --threads)

Peak RSS is the duckscore child's ru_maxrss (b) or the worker's VmHWM (c). Prints a Markdown
table (answers/s, peak RSS, the ratios c/b of time and of peak RSS) and writes it, with the
machine's facts and the data's, as JSON. --check compares the two answers.parquet files column
by column (floats to a relative 1e-9, everything else exactly) and exits 1 on a difference.

    python benchmarks/answers_bench.py --answers 1M
    python benchmarks/answers_bench.py --answers 20k --check
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# Only the standard library at module level (and bench.py, which holds to the same rule): numpy,
# pyarrow and pandas are imported where used, so a worker's peak RSS is its config's.

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR.parent) not in sys.path:  # `python benchmarks/answers_bench.py` from any folder
    sys.path.insert(0, str(BENCH_DIR.parent))

from benchmarks.bench import (  # noqa: E402 - after the sys.path line above
    LETTER,
    MB,
    Result,
    TimedRun,
    add_ratios,
    children_peak_rss_bytes,
    cli_startup_seconds,
    failure_reason,
    format_optional,
    format_seconds,
    machine_facts,
    megabytes,
    own_peak_rss_bytes,
    parse_count,
    progress,
    timed_cli,
    work_folder,
    worker_environment,
    write_json,
)

CONFIGS = ("duckscore", "pandas")
INPUTS = ("answers", "citations", "chunks", "events")
MARKER = "generated.json"  # in a data set's folder: what was generated, so a stale cache is redone


# ---------------------------------------------------------------- worker: one config, timed


def load_duckscore(data: Path, workdir: Path, threads: int, policy: str) -> TimedRun:
    inputs = [arg for name in INPUTS for arg in (f"--{name}", str(data / f"{name}.parquet"))]
    return timed_cli(
        ["-q", "answers", *inputs, "--policy", policy, "--threads", str(threads)],
        workdir / "duckscore",
    )


def load_pandas(data: Path, workdir: Path, threads: int, policy: str) -> TimedRun:
    from benchmarks.answers_pandas import run_pandas

    return lambda: run_pandas(data, workdir / "pandas", policy)


LOADERS: dict[str, Callable[[Path, Path, int, str], TimedRun]] = {
    "duckscore": load_duckscore,
    "pandas": load_pandas,
}


def worker_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description="one answers benchmark config, run once (internal)"
    )
    parser.add_argument("--worker", choices=CONFIGS, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--policy", required=True)
    args = parser.parse_args(argv)
    setup_start = time.perf_counter()
    timed_run = LOADERS[args.worker](args.data, args.workdir, args.threads, args.policy)
    start = time.perf_counter()
    outputs = timed_run()
    seconds = time.perf_counter() - start
    peak = children_peak_rss_bytes() if args.worker == "duckscore" else own_peak_rss_bytes()
    print(
        json.dumps(
            {
                "seconds": seconds,
                "setup_seconds": start - setup_start,
                "peak_rss_bytes": peak,
                "outputs": outputs,
            }
        )
    )
    return 0


# ---------------------------------------------------------------- parent: data, workers, check


def ensure_data(data_dir: Path, label: str, answers: int, seed: int) -> tuple[Path, dict[str, Any]]:
    """The cached data set of this size and seed, generated when missing or stale."""
    from benchmarks.synthetic_answers import GENERATOR_VERSION, generate, text_facts

    folder = data_dir / f"answers_{label.lower()}_seed{seed}"
    wanted = {"generator_version": GENERATOR_VERSION, "answers": answers, "seed": seed}
    marker = folder / MARKER
    if marker.exists():
        facts = json.loads(marker.read_text())
        if {key: facts.get(key) for key in wanted} == wanted:
            return folder, facts
    progress(f"generating {answers:,} answers (seed {seed}) into {folder}")
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    start = time.perf_counter()
    rows = generate(partial, answers, seed)
    facts = {
        **wanted,
        "rows": rows,
        "generate_seconds": round(time.perf_counter() - start, 2),
        "text": text_facts(partial / "answers.parquet"),
    }
    (partial / MARKER).write_text(json.dumps(facts, indent=2) + "\n")
    shutil.rmtree(folder, ignore_errors=True)
    partial.replace(folder)
    progress(f"generated in {facts['generate_seconds']} s: {rows}")
    return folder, facts


def run_config(
    config: str, label: str, data: Path, answers: int, workdir: Path, args: argparse.Namespace
) -> Result:
    load_before = os.getloadavg()[0]
    progress(f"{label} {LETTER[config]} {config}: running (load average {load_before:.2f})")
    workdir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        config,
        "--data",
        str(data),
        "--workdir",
        str(workdir),
        "--threads",
        str(args.threads),
        "--policy",
        args.policy,
    ]
    finished = subprocess.run(
        command, capture_output=True, text=True, check=False, env=worker_environment(args.threads)
    )
    if finished.returncode != 0:
        reason = failure_reason(finished.returncode, finished.stderr)
        progress(f"{label} {config}: failed: {reason}")
        return Result(label, config, "failed", answers, reason=reason, load_before=load_before)
    report = json.loads(finished.stdout.strip().splitlines()[-1])
    result = Result(
        label,
        config,
        "ok",
        answers,
        seconds=report["seconds"],
        setup_seconds=report["setup_seconds"],
        rows_per_second=answers / report["seconds"],
        peak_rss_bytes=report["peak_rss_bytes"],
        outputs=report["outputs"],
        load_before=load_before,
    )
    progress(
        f"{label} {config}: {result.seconds:.2f} s, {result.rows_per_second:,.0f} answers/s, "
        f"peak RSS {result.peak_rss_bytes / MB:,.0f} MB"
    )
    return result


def add_rss_ratios(results: list[Result]) -> dict[str, float | None]:
    """Peak RSS of pandas over duckscore's (None unless both finished)."""
    peaks = {r.config: r.peak_rss_bytes for r in results if r.status == "ok"}
    if not {"duckscore", "pandas"} <= set(peaks):
        return {}
    return {"c/b": peaks["pandas"] / peaks["duckscore"]}


def markdown_table(results: list[Result], rss_ratios: dict[str, float | None]) -> str:
    lines = [
        "| answers | config | seconds | answers/s | peak RSS (MB) | time c/b | peak RSS c/b |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        time_ratio = format_optional(r.ratios.get("c/b"), "{:.2f}") if r.ratios else ""
        rss_ratio = format_optional(rss_ratios.get("c/b"), "{:.2f}") if r.ratios else ""
        lines.append(
            f"| {r.rows:,} | {LETTER[r.config]} {r.config} | {format_seconds(r)} | "
            f"{format_optional(r.rows_per_second, '{:,.0f}')} | {megabytes(r.peak_rss_bytes)} | "
            f"{time_ratio} | {rss_ratio} |"
        )
    return "\n".join(lines)


def check(work_root: Path, results: list[Result], limit: int) -> dict[str, Any]:
    """pandas's answers.parquet against duckscore's: the first `limit` differences."""
    from benchmarks.answers_pandas import compare

    if {r.config for r in results if r.status == "ok"} != set(CONFIGS):
        return {"ok": False, "problems": ["needs successful duckscore and pandas runs"]}
    progress("comparing the pandas answers.parquet with duckscore's")
    problems = compare(
        work_root / "duckscore" / "duckscore" / "answers.parquet",
        work_root / "pandas" / "pandas" / "answers.parquet",
        limit=limit,
    )
    return {"ok": not problems, "rel_tol": 1e-9, "problems": problems}


# ---------------------------------------------------------------- main


def parse_configs(text: str) -> list[str]:
    configs = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown config {unknown[0]!r}; choose from {', '.join(CONFIGS)}"
        )
    return [name for name in CONFIGS if name in configs]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument(
        "--answers", default="1M", help="answers to generate, with k/M suffixes (default 1M)"
    )
    parser.add_argument("--seed", type=int, default=1, help="the data's seed (default 1)")
    parser.add_argument(
        "--configs",
        type=parse_configs,
        default=",".join(CONFIGS),
        help=f"any of {','.join(CONFIGS)} (default both)",
    )
    parser.add_argument(
        "--policy", default="answer_v1", help="answer policy for both (default answer_v1)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="DuckDB threads, and the Arrow thread pool of pandas (default 2)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=BENCH_DIR / "data",
        help="cache of generated data sets (default benchmarks/data)",
    )
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "answers_bench.json")
    parser.add_argument(
        "--keep-outputs", action="store_true", help="keep both configs' output folders"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare pandas's answers.parquet with duckscore's; exit 1 on a difference",
    )
    parser.add_argument(
        "--check-limit", type=int, default=20, help="differences listed at most (default 20)"
    )
    args = parser.parse_args(argv)
    try:
        args.size = parse_count(args.answers)
    except argparse.ArgumentTypeError as error:
        parser.error(f"--answers: {error}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--worker" in argv:
        return worker_main(argv)
    args = parse_args(argv)
    data, data_facts = ensure_data(args.data_dir, args.answers, args.size, args.seed)
    answers = data_facts["rows"]["answers"]
    checks: dict[str, Any] = {}
    with work_folder("duckscore-answers-bench-", args.keep_outputs) as work_root:
        results = [
            run_config(config, args.answers, data, answers, work_root / config, args)
            for config in args.configs
        ]
        if args.check:
            checks = check(work_root, results, args.check_limit)
    add_ratios(results)
    rss_ratios = add_rss_ratios(results)
    table = markdown_table(results, rss_ratios)
    print(table)
    if checks:
        print(
            "\ncheck: "
            + (
                "pandas and duckscore agree on every column"
                if checks["ok"]
                else "differences:\n  " + "\n  ".join(checks["problems"])
            )
        )
    write_json(
        args.out,
        {
            "command": shlex.join(["python", "benchmarks/answers_bench.py", *argv]),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_facts(),
            "settings": {
                "threads": args.threads,
                "policy": args.policy,
                "seed": args.seed,
                "duckscore_cli_startup_seconds": cli_startup_seconds(),
            },
            "data": {"folder": str(data), **data_facts},
            "notes": [
                (
                    "seconds: one run each, in a fresh process; b is the `duckscore` child's wall time, "
                    "interpreter start and imports included (see duckscore_cli_startup_seconds)"
                ),
                "c: imports before the clock (setup_seconds)",
                "peak RSS: ru_maxrss of the duckscore child (b); VmHWM of the worker (c)",
                "ratios c/b: pandas's seconds (ratios) and peak RSS (rss_ratios) over duckscore's",
            ],
            "results": [asdict(r) for r in results],
            "rss_ratios": rss_ratios,
            "table": table,
            "checks": checks,
        },
    )
    progress(f"wrote {args.out}")
    return 1 if checks and not checks["ok"] else 0


if __name__ == "__main__":
    sys.exit(main())
