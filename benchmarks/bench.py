"""Issue #8 benchmark: the floor, `duckscore run`, the pipeline in pandas and Polars, ranx RRF.

For each log size (synthetic logs from `synthetic_log.py`, cached in --data-dir) and each config,
a fresh worker process runs the config once and reports its wall seconds and peak RSS:

  a floor      a fresh DuckDB connection reads the needed columns and runs one
               GROUP BY query_id, parent_id into a temp table
  b duckscore  `duckscore run` end to end (fuse -> parent features -> OverallScore -> contract
               JSONL) as a child process: its wall time (interpreter start included) and its peak RSS
  c pandas     `benchmarks.pandas_pipeline.run_pandas`, the same pipeline in idiomatic pandas
  d ranx       ranx RRF (k = 60) of the three sources' document-level runs: reading the log with
               pandas and building the runs with `Run.from_df` included; numba's JIT is warmed
               before the clock along the same calls (from_df, fuse) on a tiny log whose doc ids
               have the log's widths (numba compiles per id width)
  e fuse       `duckscore fuse --recipe canonical_rrf`: the same document-level RRF as d (checked
               equal by --check), with duckscore's validation and parquet outputs: the
               like-for-like fusion comparison (d/e) beside d/b
  f lean       b with --no-explain (fused.parquet without per-source contributions and
               provenance; every score, rank and the contract unchanged)
  g fuse_lean  e with --no-explain --no-features: what ranx computes, fused scores and ranks
               only (d/g)
  h polars     `benchmarks.polars_pipeline.run_polars`, the same pipeline as one lazy Polars
               query, written independently of c (whose constants and `compare` it shares)

Imports happen before the clock in a, c, d and h. Peak RSS is the worker's VmHWM (a, c, d, h) or
the duckscore child's ru_maxrss (b). The DuckDB configs (a, b) get --threads,
--memory-limit and --temp-dir, Polars (h) as many threads (POLARS_MAX_THREADS); with --temp-dir
the parent polls the disk use of each run's spill folder every 0.2 s and reports the peak. Prints
a Markdown table (rows/s, peak RSS, the time ratios b/a, c/b, d/b, d/e, e/a, h/b, h/c) and
writes it all, with the machine's facts, as JSON.

    python benchmarks/bench.py --sizes 1M,10M,30M
    python benchmarks/bench.py --sizes 30M --configs duckscore --memory-limit 1GB --temp-dir /tmp/spill
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

# Only the standard library at module level: a worker's peak RSS should hold what its config
# needs and nothing else, so numpy, pyarrow, pandas, polars, duckdb and ranx are imported where
# used.

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(REPO_ROOT) not in sys.path:  # `python benchmarks/bench.py` from any folder
    sys.path.insert(0, str(REPO_ROOT))

CONFIGS = ("floor", "duckscore", "pandas", "ranx", "fuse", "lean", "fuse_lean", "polars")
LETTER = dict(zip(CONFIGS, "abcdefgh"))
RATIO_BASES = {
    "duckscore": ("floor",),
    "pandas": ("duckscore", "lean"),
    "ranx": ("duckscore", "fuse", "fuse_lean"),
    "fuse": ("floor",),
    "lean": ("floor",),
    "fuse_lean": ("floor",),
    "polars": ("duckscore", "lean", "pandas"),
}
CLI_CONFIGS = ("duckscore", "fuse", "lean", "fuse_lean")  # run as a `duckscore` child process
# the ones given --memory-limit and --temp-dir
DUCKDB_CONFIGS = ("floor", "duckscore", "fuse", "lean", "fuse_lean")
FLOOR_SQL = (
    "CREATE TEMP TABLE floor AS SELECT query_id, parent_id, count(*) AS hits, "
    "max(score) AS max_score, min(rank) AS best_rank "
    "FROM read_parquet({log}) GROUP BY query_id, parent_id"
)
RRF_K = 60
SCORE_TOLERANCE = 1e-12
POLL_SECONDS = 0.2
MB = 1_000_000  # DuckDB's units: its 1GB memory limit is 10^9 bytes


@dataclass(frozen=True)
class Size:
    label: str  # as given: 20k, 1M, 1.5M
    rows: int  # the generator's target; the log holds whole queries, so about this many

    @property
    def log_name(self) -> str:
        return f"log_{self.label.lower()}.parquet"


@dataclass(frozen=True)
class Engine:
    """DuckDB settings shared by the floor and `duckscore run`."""

    threads: int
    memory_limit: str | None = None
    temp_dir: Path | None = None

    def cli_flags(self) -> list[str]:
        flags = ["--threads", str(self.threads)]
        if self.memory_limit:
            flags += ["--memory-limit", self.memory_limit]
        if self.temp_dir:
            flags += ["--temp-dir", str(self.temp_dir)]
        return flags

    def duckdb_config(self) -> dict[str, str]:
        config = {"threads": str(self.threads)}
        if self.memory_limit:
            config["memory_limit"] = self.memory_limit
        if self.temp_dir:
            config["temp_directory"] = str(self.temp_dir)
        return config


@dataclass
class Result:
    size: str
    config: str
    status: str  # ok | failed | skipped
    rows: int
    seconds: float | None = None
    setup_seconds: float | None = None  # imports (and ranx's JIT warm-up) before the clock
    rows_per_second: float | None = None
    peak_rss_bytes: int | None = None
    spill_peak_bytes: int | None = None  # disk use of the run's spill folder, when --temp-dir
    outputs: dict[str, int] = field(default_factory=dict)
    reason: str | None = None
    ratios: dict[str, float | None] = field(default_factory=dict)  # "b/a": b's seconds over a's
    load_before: float | None = None  # 1-minute load average as the run started: others' work


# ---------------------------------------------------------------- worker: one config, timed

TimedRun = Callable[[], dict[str, int]]


def sql_string(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def load_floor(log: Path, workdir: Path, engine: Engine) -> TimedRun:
    import duckdb

    def run() -> dict[str, int]:
        connection = duckdb.connect(config=engine.duckdb_config())
        connection.execute(FLOOR_SQL.format(log=sql_string(log)))
        (groups,) = connection.execute("SELECT count(*) FROM floor").fetchone()
        return {"groups": groups}

    return run


def duckscore_cli() -> str:
    beside_python = Path(sys.executable).with_name("duckscore")
    return (
        str(beside_python) if beside_python.exists() else shutil.which("duckscore") or "duckscore"
    )


def timed_cli(arguments: list[str], out: Path) -> TimedRun:
    command = [duckscore_cli(), *arguments, "--out", str(out)]

    def run() -> dict[str, int]:
        finished = subprocess.run(command, capture_output=True, text=True, check=False)
        if finished.returncode != 0:
            raise RuntimeError(
                failure_reason(finished.returncode, finished.stderr, f"duckscore {arguments[0]}")
            )
        return {"output_bytes": sum(p.stat().st_size for p in out.glob("*.*"))}

    return run


def run_arguments(log: Path, engine: Engine) -> list[str]:
    recipe = ["--recipe", "hybrid_v1", "--policy", "overall_v1", "--top-n", "5"]
    return ["run", "--log", str(log), *recipe, *engine.cli_flags()]


def fuse_arguments(log: Path, engine: Engine) -> list[str]:
    return ["fuse", "--log", str(log), "--recipe", "canonical_rrf", *engine.cli_flags()]


def load_duckscore(log: Path, workdir: Path, engine: Engine) -> TimedRun:
    return timed_cli(run_arguments(log, engine), workdir / "duckscore")


def load_fuse(log: Path, workdir: Path, engine: Engine) -> TimedRun:
    return timed_cli(fuse_arguments(log, engine), workdir / "fuse")


def load_lean(log: Path, workdir: Path, engine: Engine) -> TimedRun:
    return timed_cli([*run_arguments(log, engine), "--no-explain"], workdir / "lean")


def load_fuse_lean(log: Path, workdir: Path, engine: Engine) -> TimedRun:
    return timed_cli(
        [*fuse_arguments(log, engine), "--no-explain", "--no-features"], workdir / "fuse_lean"
    )


def load_pandas(log: Path, workdir: Path, engine: Engine) -> TimedRun:
    from benchmarks.pandas_pipeline import run_pandas

    return lambda: run_pandas(log, workdir / "pandas")


def load_polars(log: Path, workdir: Path, engine: Engine) -> TimedRun:
    import polars  # noqa: F401 - before the clock, its thread pool sized by POLARS_MAX_THREADS

    from benchmarks.polars_pipeline import run_polars

    return lambda: run_polars(log, workdir / "polars")


def ranx_document_runs(log: Path) -> list[Any]:
    """The three sources' runs at parent level, the way a user builds them from a DataFrame."""
    import pandas as pd

    return ranx_runs(pd.read_parquet(log, columns=["query_id", "source", "parent_id", "score"]))


def ranx_runs(hits: Any) -> list[Any]:
    from ranx import Run

    keys = ["query_id", "source", "parent_id"]
    documents = hits.groupby(keys, sort=False, as_index=False)["score"].max()
    # Run.from_df asserts object-dtype ids; pandas 3 reads strings as `str`
    documents = documents.astype({"query_id": object, "parent_id": object})
    return [
        Run.from_df(
            part, q_id_col="query_id", doc_id_col="parent_id", score_col="score", name=str(source)
        )
        for source, part in documents.groupby("source", sort=True)
    ]


def ranx_rrf(log: Path) -> Any:
    from ranx import fuse

    return fuse(runs=ranx_document_runs(log), method="rrf", norm=None, params={"k": RRF_K})


def warm_ranx(log: Path) -> None:
    """numba's JIT compiled before the clock along the timed calls themselves (Run.from_df on
    object ids, then fuse), for the doc ids' widths of each source of `log`: numba compiles
    ranx's kernels once per fixed width of the ids (UnicodeCharSeq(n)), so warming with
    Run.from_dict on short ids, as this did before issue 34, left seconds of compilation inside
    ranx's clock."""
    import pandas as pd
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from ranx import fuse

    ids = pq.read_table(log, columns=["source", "parent_id"])
    lengths = ids.append_column("width", pc.utf8_length(ids["parent_id"]))
    widths = lengths.group_by("source").aggregate([("width", "max")]).to_pylist()
    rows = [
        (query, str(w["source"]), f"{document}".rjust(int(w["width_max"]), "d"), score)
        for w in widths
        for query in ("q1", "q2")
        for document, score in ((1, 2.0), (2, 1.0))
    ]
    hits = pd.DataFrame(rows, columns=["query_id", "source", "parent_id", "score"])
    fuse(runs=ranx_runs(hits), method="rrf", norm=None, params={"k": RRF_K})


def load_ranx(log: Path, workdir: Path, engine: Engine) -> TimedRun:
    warm_ranx(log)
    return lambda: {"queries": len(ranx_rrf(log))}


LOADERS: dict[str, Callable[[Path, Path, Engine], TimedRun]] = {
    "floor": load_floor,
    "duckscore": load_duckscore,
    "pandas": load_pandas,
    "ranx": load_ranx,
    "fuse": load_fuse,
    "lean": load_lean,
    "fuse_lean": load_fuse_lean,
    "polars": load_polars,
}


def own_peak_rss_bytes() -> int:
    """VmHWM, this process's peak RSS since its exec. Not ru_maxrss: Linux carries that over
    exec from the process that spawned it, so a worker would inherit the parent's peak."""
    status = Path("/proc/self/status")
    lines = status.read_text().splitlines() if status.exists() else []
    high_water = next((line.split()[1] for line in lines if line.startswith("VmHWM:")), None)
    if high_water is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return int(high_water) * 1024  # kB


def children_peak_rss_bytes() -> int:
    """The largest peak RSS of the waited-for children: the duckscore CLI. The worker spawning it
    holds only the standard library, so what the child inherits over exec stays below its own."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux reports KiB


def parquet_rows(log: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(log).num_rows


def run_worker(config: str, log: Path, workdir: Path, engine: Engine) -> dict[str, Any]:
    setup_start = time.perf_counter()
    timed_run = LOADERS[config](log, workdir, engine)
    start = time.perf_counter()
    outputs = timed_run()
    seconds = time.perf_counter() - start
    peak = children_peak_rss_bytes() if config in CLI_CONFIGS else own_peak_rss_bytes()
    return {
        "seconds": seconds,
        "setup_seconds": start - setup_start,
        "peak_rss_bytes": peak,
        "rows": parquet_rows(log),
        "outputs": outputs,
    }  # rows after the peak: pyarrow is big


def worker_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="one benchmark config, run once (internal)")
    parser.add_argument("--worker", choices=CONFIGS, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--memory-limit")
    parser.add_argument("--temp-dir", type=Path)
    args = parser.parse_args(argv)
    engine = Engine(args.threads, args.memory_limit, args.temp_dir)
    print(json.dumps(run_worker(args.worker, args.log, args.workdir, engine)))
    return 0


# ---------------------------------------------------------------- parent: logs, workers, spill


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def parse_count(text: str) -> int:
    from benchmarks.synthetic_log import parse_count as synthetic_parse_count

    return synthetic_parse_count(text)


def parse_sizes(text: str) -> list[Size]:
    return [Size(label.strip(), parse_count(label)) for label in text.split(",") if label.strip()]


def parse_configs(text: str) -> list[str]:
    configs = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown config {unknown[0]!r}; choose from {', '.join(CONFIGS)}"
        )
    return [name for name in CONFIGS if name in configs]


def ensure_log(data_dir: Path, size: Size) -> Path:
    """The cached synthetic log of this size, generated (seed 7) when missing."""
    from benchmarks.synthetic_log import generate

    path = data_dir / size.log_name
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        progress(f"generating {path} (~4.5 s per 1M rows)")
        partial = path.with_name(path.name + ".partial")
        generate(str(partial), size.rows)
        partial.replace(path)
    return path


def failure_reason(returncode: int, stderr: str, what: str = "worker") -> str:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return f"killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else f"{what} exited with status {returncode}"


def disk_use(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:  # DuckDB removed it between the listing and the stat
                continue
    return total


class PeakDiskUse:
    """Polls a folder's disk use in a thread; `peak` is the largest seen (None without a folder)."""

    def __init__(self, folder: Path | None, every: float = POLL_SECONDS) -> None:
        self.folder, self.every = folder, every
        self.peak: int | None = None if folder is None else 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _measure(self) -> None:
        if self.folder is not None:
            self.peak = max(self.peak or 0, disk_use(self.folder))

    def _poll(self) -> None:
        while True:
            self._measure()
            if self._stop.wait(self.every):
                return

    def __enter__(self) -> PeakDiskUse:
        if self.folder is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.folder is not None:
            self._stop.set()
            self._thread.join()
            self._measure()


@contextmanager
def spill_folder(temp_dir: Path | None, size: Size, config: str) -> Iterator[Path | None]:
    """A fresh folder of its own under --temp-dir for one DuckDB run, removed afterwards."""
    if temp_dir is None or config not in DUCKDB_CONFIGS:
        yield None
        return
    temp_dir.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=f"bench-{size.label}-{config}-", dir=temp_dir))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def worker_environment(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(threads)  # Arrow's thread pool (pandas.read_parquet) follows it
    # ranx's numba threads; more than the cores is an error
    env["NUMBA_NUM_THREADS"] = str(min(threads, os.cpu_count() or 1))
    env["POLARS_MAX_THREADS"] = str(threads)  # read once, when polars is imported
    return env


def worker_command(config: str, log: Path, workdir: Path, engine: Engine) -> list[str]:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        config,
        "--log",
        str(log),
        "--workdir",
        str(workdir),
        "--threads",
        str(engine.threads),
    ]
    if engine.memory_limit:
        command += ["--memory-limit", engine.memory_limit]
    if engine.temp_dir:
        command += ["--temp-dir", str(engine.temp_dir)]
    return command


def run_config(
    config: str, size: Size, log: Path, rows: int, workdir: Path, engine: Engine
) -> Result:
    load_before = os.getloadavg()[0]
    progress(f"{size.label} {LETTER[config]} {config}: running (load average {load_before:.2f})")
    workdir.mkdir(parents=True, exist_ok=True)
    with spill_folder(engine.temp_dir, size, config) as spill:
        memory_limit = engine.memory_limit if config in DUCKDB_CONFIGS else None
        run_engine = Engine(engine.threads, memory_limit, spill)
        command = worker_command(config, log, workdir, run_engine)
        with PeakDiskUse(spill) as spill_use:
            finished = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=False,
                env=worker_environment(engine.threads),
            )
    if finished.returncode != 0:
        result = Result(
            size.label,
            config,
            "failed",
            rows,
            reason=failure_reason(finished.returncode, finished.stderr),
            load_before=load_before,
        )
        progress(f"{size.label} {config}: failed: {result.reason}")
        return result
    report = json.loads(finished.stdout.strip().splitlines()[-1])
    result = Result(
        size.label,
        config,
        "ok",
        report["rows"],
        seconds=report["seconds"],
        setup_seconds=report["setup_seconds"],
        rows_per_second=report["rows"] / report["seconds"],
        peak_rss_bytes=report["peak_rss_bytes"],
        spill_peak_bytes=spill_use.peak,
        outputs=report["outputs"],
        load_before=load_before,
    )
    progress(
        f"{size.label} {config}: {result.seconds:.2f} s, {result.rows_per_second:,.0f} rows/s, "
        f"peak RSS {result.peak_rss_bytes / MB:,.0f} MB"
    )
    return result


def add_ratios(results: list[Result]) -> None:
    """b/a, c/b, d/b, d/e and e/a per size: a config's seconds over a base config's seconds
    (None when either did not finish; left out when the base was not asked for)."""
    finished = {(r.size, r.config): r for r in results if r.status == "ok"}
    asked = {(r.size, r.config) for r in results}
    for result in results:
        for base_config in RATIO_BASES.get(result.config, ()):
            if (result.size, base_config) not in asked:
                continue
            base = finished.get((result.size, base_config))
            ratio = result.seconds / base.seconds if result.status == "ok" and base else None
            result.ratios[f"{LETTER[result.config]}/{LETTER[base_config]}"] = ratio


# ---------------------------------------------------------------- checks (--check)


def check_ranx_against_canonical_rrf(log: Path, workdir: Path, engine: Engine) -> dict[str, Any]:
    """ranx's fused scores against `duckscore fuse --recipe canonical_rrf` (fused_score)."""
    import pandas as pd

    out = workdir / "canonical_rrf"
    command = [
        duckscore_cli(),
        "fuse",
        "--log",
        str(log),
        "--out",
        str(out),
        "--recipe",
        "canonical_rrf",
        "--threads",
        str(engine.threads),
    ]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        reason = failure_reason(finished.returncode, finished.stderr, "duckscore fuse")
        return {"ok": False, "reason": reason}
    ours = pd.read_parquet(out / "fused.parquet", columns=["query_id", "item_id", "fused_score"])
    fused = ranx_rrf(log).to_dict()
    theirs = pd.DataFrame(
        [(q, doc, score) for q, docs in fused.items() for doc, score in docs.items()],
        columns=["query_id", "item_id", "ranx_score"],
    )
    both = ours.merge(theirs, on=["query_id", "item_id"], how="outer", indicator=True)
    difference = (both["fused_score"] - both["ranx_score"]).abs()
    summary = {
        "pairs": len(both),
        "only_in_duckscore": int((both["_merge"] == "left_only").sum()),
        "only_in_ranx": int((both["_merge"] == "right_only").sum()),
        "max_abs_difference": float(difference.max()),
        "pairs_over_tolerance": int((difference > SCORE_TOLERANCE).sum()),
        "tolerance": SCORE_TOLERANCE,
    }
    summary["ok"] = (
        summary["only_in_duckscore"] == summary["only_in_ranx"] == 0
        and summary["pairs_over_tolerance"] == 0
    )
    return summary


def check_pandas_against_duckscore(workdir_duckscore: Path, workdir_pandas: Path) -> dict[str, Any]:
    from benchmarks.pandas_pipeline import compare

    return {"result": compare(workdir_duckscore / "duckscore", workdir_pandas / "pandas")}


def check_polars_against_duckscore(workdir_duckscore: Path, workdir_polars: Path) -> dict[str, Any]:
    from benchmarks.pandas_pipeline import compare

    return {"result": compare(workdir_duckscore / "duckscore", workdir_polars / "polars")}


def run_checks(
    size: Size, log: Path, results: list[Result], work_root: Path, engine: Engine
) -> dict[str, Any]:
    finished = {r.config for r in results if r.size == size.label and r.status == "ok"}
    checks: dict[str, Any] = {"size": size.label}
    progress(f"{size.label}: checking ranx RRF against duckscore canonical_rrf")
    checks["ranx_vs_canonical_rrf"] = check_ranx_against_canonical_rrf(
        log, work_root / "check", engine
    )
    if {"duckscore", "pandas"} <= finished:
        progress(f"{size.label}: comparing the pandas outputs with duckscore's")
        checks["pandas_vs_duckscore"] = check_pandas_against_duckscore(
            work_dir(work_root, size, "duckscore"), work_dir(work_root, size, "pandas")
        )
    else:
        checks["pandas_vs_duckscore"] = {"skipped": "needs successful duckscore and pandas runs"}
    if {"duckscore", "polars"} <= finished:
        progress(f"{size.label}: comparing the polars outputs with duckscore's")
        checks["polars_vs_duckscore"] = check_polars_against_duckscore(
            work_dir(work_root, size, "duckscore"), work_dir(work_root, size, "polars")
        )
    elif "polars" in {r.config for r in results if r.size == size.label}:
        checks["polars_vs_duckscore"] = {"skipped": "needs successful duckscore and polars runs"}
    return checks


# ---------------------------------------------------------------- report


def format_seconds(result: Result) -> str:
    return f"{result.seconds:.2f}" if result.status == "ok" else f"{result.status}: {result.reason}"


def format_optional(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def megabytes(value: int | None) -> str:
    return format_optional(None if value is None else value / MB, "{:,.0f}")


def markdown_table(results: list[Result]) -> str:
    lines = [
        "| size | rows | config | seconds | rows/s | peak RSS (MB) | time ratio "
        "| spill peak (MB) |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        ratio = ", ".join(
            f"{name} = {format_optional(value, '{:.2f}')}" for name, value in r.ratios.items()
        )
        lines.append(
            f"| {r.size} | {r.rows:,} | {LETTER[r.config]} {r.config} | {format_seconds(r)} | "
            f"{format_optional(r.rows_per_second, '{:,.0f}')} | "
            f"{megabytes(r.peak_rss_bytes)} | {ratio} | {megabytes(r.spill_peak_bytes)} |"
        )
    return "\n".join(lines)


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        finished = subprocess.run(
            ["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False
        )
        return finished.stdout.strip()

    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain"))}


def cpu_model() -> str | None:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    models = (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    return next(models, None)


def machine_facts() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "ram_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {
            name: package_version(name)
            for name in (
                "duckscore",
                "duckdb",
                "pandas",
                "polars",
                "pyarrow",
                "numpy",
                "ranx",
                "numba",
            )
        },
        "git": git_state(),
    }


def cli_startup_seconds() -> float:
    """Wall time of `duckscore --help`: the interpreter and import cost inside config b's time."""
    start = time.perf_counter()
    subprocess.run([duckscore_cli(), "--help"], capture_output=True, check=False)
    return time.perf_counter() - start


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(document, indent=2) + "\n")
    partial.replace(path)


# ---------------------------------------------------------------- main


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default="1M,10M,30M",
        help="log sizes, rows with k/M suffixes (default 1M,10M,30M)",
    )
    parser.add_argument(
        "--configs",
        type=parse_configs,
        default=",".join(CONFIGS),
        help=f"any of {','.join(CONFIGS)} (default all)",
    )
    parser.add_argument(
        "--ranx-max",
        type=parse_count,
        default="10M",
        help="run ranx only on logs up to this size (default 10M)",
    )
    parser.add_argument("--threads", type=int, default=2, help="DuckDB threads (default 2)")
    parser.add_argument("--memory-limit", help="DuckDB memory limit for a and b, e.g. 1GB")
    parser.add_argument(
        "--temp-dir",
        type=Path,
        help="where a and b spill; the peak disk use of each run is reported",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=BENCH_DIR / "data",
        help="cache of generated logs (default benchmarks/data)",
    )
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results" / "bench.json")
    parser.add_argument(
        "--keep-outputs", action="store_true", help="keep every config's output folder"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="at the smallest size, compare ranx with canonical_rrf, pandas and polars with "
        "duckscore",
    )
    return parser.parse_args(argv)


def work_dir(work_root: Path, size: Size, config: str) -> Path:
    return work_root / f"{size.label}-{config}"


def pandas_pipeline_problem() -> str | None:
    try:
        from benchmarks.pandas_pipeline import run_pandas  # noqa: F401
    except ImportError as error:
        return f"benchmarks.pandas_pipeline.run_pandas is not importable ({error})"
    return None


def polars_pipeline_problem() -> str | None:
    try:
        from benchmarks.polars_pipeline import run_polars  # noqa: F401
    except ImportError as error:
        return f"benchmarks.polars_pipeline.run_polars is not importable ({error})"
    return None


def skip_reason(
    config: str,
    size: Size,
    args: argparse.Namespace,
    pandas_problem: str | None,
    polars_problem: str | None = None,
) -> str | None:
    if config == "ranx" and size.rows > args.ranx_max:
        return "above --ranx-max"
    if config == "pandas":
        return pandas_problem
    if config == "polars":
        return polars_problem
    return None


def run_size(
    size: Size,
    args: argparse.Namespace,
    engine: Engine,
    work_root: Path,
    pandas_problem: str | None,
    keep: bool,
    polars_problem: str | None = None,
) -> tuple[Path, list[Result]]:
    log = ensure_log(args.data_dir, size)
    rows = parquet_rows(log)
    results = []
    for config in args.configs:
        reason = skip_reason(config, size, args, pandas_problem, polars_problem)
        if reason:
            progress(f"{size.label} {config}: skipped: {reason}")
            results.append(Result(size.label, config, "skipped", rows, reason=reason))
            continue
        workdir = work_dir(work_root, size, config)
        results.append(run_config(config, size, log, rows, workdir, engine))
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return log, results


@contextmanager
def work_folder(prefix: str, keep: bool) -> Iterator[Path]:
    """A temporary folder for the configs' outputs: removed afterwards unless `keep`."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        if keep:
            progress(f"outputs kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--worker" in argv:
        return worker_main(argv)
    args = parse_args(argv)
    engine = Engine(args.threads, args.memory_limit, args.temp_dir)
    pandas_problem = pandas_pipeline_problem() if "pandas" in args.configs else None
    if pandas_problem:
        progress(f"skipping config c pandas: {pandas_problem}")
    polars_problem = polars_pipeline_problem() if "polars" in args.configs else None
    if polars_problem:
        progress(f"skipping config h polars: {polars_problem}")
    smallest = min(args.sizes, key=lambda size: size.rows)
    results: list[Result] = []
    checks: dict[str, Any] = {}
    with work_folder("duckscore-bench-", args.keep_outputs) as work_root:
        for size in args.sizes:
            keep = args.keep_outputs or (args.check and size == smallest)
            log, size_results = run_size(
                size, args, engine, work_root, pandas_problem, keep, polars_problem
            )
            results += size_results
            if args.check and size == smallest:
                checks = run_checks(size, log, results, work_root, engine)
    add_ratios(results)
    table = markdown_table(results)
    print(table)
    if checks:
        print("\nchecks: " + json.dumps(checks, indent=2, default=str))
    write_json(
        args.out,
        {
            "command": shlex.join(["python", "benchmarks/bench.py", *argv]),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": machine_facts(),
            "settings": {
                "threads": args.threads,
                "memory_limit": args.memory_limit,
                "temp_dir": str(args.temp_dir) if args.temp_dir else None,
                "duckscore_cli_startup_seconds": cli_startup_seconds(),
            },
            "notes": [
                "seconds: one run each, in a fresh process; b and e are the `duckscore` child's wall "
                "time, interpreter start and imports included (see duckscore_cli_startup_seconds)",
                "a, c, d, h: imports before the clock; d warms numba's JIT before the clock "
                "(setup_seconds holds that time)",
                "peak RSS: VmHWM of the worker (a, c, d, h); ru_maxrss of the duckscore child "
                "(b, e)",
                "spill peak: disk use of the run's folder under --temp-dir, polled every 0.2 s",
            ],
            "results": [asdict(r) for r in results],
            "table": table,
            "checks": checks,
        },
    )
    progress(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
