"""Issue #8 benchmark: the floor, `duckscore run`, the pipeline in pandas and Polars, ranx RRF.

For each log size (synthetic logs from `synthetic_log.py`, cached in --data-dir) and each config,
a fresh worker process runs the config once (per repetition) and reports its wall seconds, CPU
seconds and peak RSS:

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
  i lean_sql   the lean-SQL measuring device (only with --lean-sql DIR, a folder outside the
               project; benchmarks/bench_lean.py): DIR/run_explain.sql, hand-written DuckDB SQL
               writing what b writes, its statements run in order in the worker like a
  j lean_sql_noexplain  DIR/run_noexplain.sql: what f writes
  k lean_rrf   DIR/rrf_fused_parquet.sql: what g writes

Imports happen before the clock in a, c, d, h and i-k. Peak RSS is the worker's VmHWM (a, c, d,
h, i-k) or the duckscore child's ru_maxrss (b, e, f, g). CPU seconds are user + system CPU over
the clock: the worker's own (every thread) plus its waited-for children's (the duckscore child
of b, e, f, g), none of the parent's. The DuckDB configs (a, b, e, f, g, i-k) get --threads,
--memory-limit and --temp-dir, Polars (h) as many threads (POLARS_MAX_THREADS); with --temp-dir
the parent polls the disk use of each run's spill folder every 0.2 s and reports the peak.

--repeat N runs every config of a size N times, round-robin, the configs' order rotated by one
each repetition (a b c, then b c a, then c a b), so a slow drift of the machine hits all alike.
The Markdown table shows medians over the repetitions (seconds, CPU seconds, peak RSS) and the
ratios b/a, c/b, d/b, d/e, e/a, h/b, h/c … (and with --lean-sql b/i, f/j, g/k: the issue's
target is b/i <= 1.1), each the median of the ratios within each repetition, for time and for
CPU; the JSON holds every repetition's numbers and the machine's facts. With --lean-sql, the
first repetition in which both ran compares i's, j's and k's outputs with b's, f's and g's
(Parquet EXCEPT ALL both ways, contract.jsonl by sha256): a difference is a warning, as the
device matches duckscore only on logs like the synthetic ones (no granularity column …).
Synthetic logs are cached in --data-dir.

    python benchmarks/bench.py --sizes 1M,10M,30M
    python benchmarks/bench.py --sizes 1M,10M --repeat 3 --lean-sql LEAN_SQL_DIR
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
import statistics
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

from benchmarks.bench_lean import (  # noqa: E402 - after the path; standard library only
    LEAN_FILES,
    LEAN_PAIRS,
    compare_outputs,
    describe_comparison,
    lean_sql_problem,
    load_lean_sql,
)

LEAN_CONFIGS = tuple(LEAN_FILES)  # i, j, k: only with --lean-sql DIR
BASE_CONFIGS = ("floor", "duckscore", "pandas", "ranx", "fuse", "lean", "fuse_lean", "polars")
CONFIGS = BASE_CONFIGS + LEAN_CONFIGS
LETTER = dict(zip(CONFIGS, "abcdefghijk"))
RATIO_BASES = {  # a config -> the configs its time (and CPU) is divided by
    "duckscore": ("floor", "lean_sql"),
    "pandas": ("duckscore", "lean"),
    "ranx": ("duckscore", "fuse", "fuse_lean"),
    "fuse": ("floor",),
    "lean": ("floor", "lean_sql_noexplain"),
    "fuse_lean": ("floor", "lean_rrf"),
    "polars": ("duckscore", "lean", "pandas"),
}
CLI_CONFIGS = ("duckscore", "fuse", "lean", "fuse_lean")  # run as a `duckscore` child process
# the ones given --memory-limit and --temp-dir
DUCKDB_CONFIGS = ("floor", "duckscore", "fuse", "lean", "fuse_lean", *LEAN_CONFIGS)
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

    def duckdb_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"threads": str(self.threads)}
        if self.memory_limit:
            config["memory_limit"] = self.memory_limit
        if self.temp_dir:
            config["temp_directory"] = str(self.temp_dir)
        return config


@dataclass
class Repetition:
    """One run of one config: the raw numbers, kept in the JSON."""

    rep: int  # 0 .. --repeat - 1
    status: str  # ok | failed
    seconds: float | None = None
    cpu_seconds: float | None = None  # user + system over the clock, children included
    setup_seconds: float | None = None  # imports (and ranx's JIT warm-up) before the clock
    peak_rss_bytes: int | None = None
    spill_peak_bytes: int | None = None  # disk use of the run's spill folder, when --temp-dir
    outputs: dict[str, int] = field(default_factory=dict)
    reason: str | None = None
    load_before: float | None = None  # 1-minute load average as the run started: others' work
    position: int | None = None  # its place in the repetition's order of configs


@dataclass
class Result:
    """One config at one size: medians over its successful repetitions."""

    size: str
    config: str
    status: str  # ok | failed | skipped
    rows: int
    seconds: float | None = None
    setup_seconds: float | None = None
    rows_per_second: float | None = None  # rows over the median seconds
    peak_rss_bytes: int | None = None
    spill_peak_bytes: int | None = None
    outputs: dict[str, int] = field(default_factory=dict)
    reason: str | None = None
    ratios: dict[str, float | None] = field(default_factory=dict)  # "b/a": b's seconds over a's
    load_before: float | None = None
    cpu_seconds: float | None = None
    cpu_ratios: dict[str, float | None] = field(default_factory=dict)  # b's CPU over a's
    repetitions: list[Repetition] = field(default_factory=list)


# ---------------------------------------------------------------- worker: one config, timed

TimedRun = Callable[[], dict[str, int]]


def sql_string(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def load_floor(log: Path, workdir: Path, engine: Engine) -> TimedRun:
    import duckdb

    def run() -> dict[str, int]:
        connection = duckdb.connect(config=engine.duckdb_config())
        connection.execute(FLOOR_SQL.format(log=sql_string(log)))
        row = connection.execute("SELECT count(*) FROM floor").fetchone()
        return {"groups": row[0] if row else 0}

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


def cpu_seconds() -> float:
    """User + system CPU of this process (all its threads) and of its waited-for children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def parquet_rows(log: Path) -> int:
    import pyarrow.parquet as pq

    return pq.read_metadata(log).num_rows


def load_config(
    config: str, log: Path, workdir: Path, engine: Engine, lean_sql: Path | None = None
) -> TimedRun:
    if config in LEAN_FILES:
        if lean_sql is None:
            raise ValueError(f"config {config} needs --lean-sql DIR")
        sql_file = lean_sql / LEAN_FILES[config]
        return load_lean_sql(
            sql_file, log, workdir / config, engine.duckdb_config(), engine.threads
        )
    return LOADERS[config](log, workdir, engine)


def run_worker(
    config: str, log: Path, workdir: Path, engine: Engine, lean_sql: Path | None = None
) -> dict[str, Any]:
    setup_start = time.perf_counter()
    timed_run = load_config(config, log, workdir, engine, lean_sql)
    cpu_start = cpu_seconds()
    start = time.perf_counter()
    outputs = timed_run()
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu_start
    peak = children_peak_rss_bytes() if config in CLI_CONFIGS else own_peak_rss_bytes()
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
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
    parser.add_argument("--lean-sql", type=Path)
    args = parser.parse_args(argv)
    engine = Engine(args.threads, args.memory_limit, args.temp_dir)
    print(json.dumps(run_worker(args.worker, args.log, args.workdir, engine, args.lean_sql)))
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
    env.pop("NUMBA_OPT", None)  # the tests compile ranx at -O0; time it as users run it
    return env


def worker_command(
    config: str, log: Path, workdir: Path, engine: Engine, lean_sql: Path | None = None
) -> list[str]:
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
    if lean_sql is not None and config in LEAN_FILES:
        command += ["--lean-sql", str(lean_sql)]
    return command


def run_config(
    config: str,
    size: Size,
    log: Path,
    workdir: Path,
    engine: Engine,
    rep: int = 0,
    lean_sql: Path | None = None,
) -> Repetition:
    """One run of `config` in a fresh worker process."""
    load_before = os.getloadavg()[0]
    progress(
        f"{size.label} {LETTER[config]} {config}{f' (repetition {rep + 1})' if rep else ''}: "
        f"running (load average {load_before:.2f})"
    )
    workdir.mkdir(parents=True, exist_ok=True)
    with spill_folder(engine.temp_dir, size, config) as spill:
        memory_limit = engine.memory_limit if config in DUCKDB_CONFIGS else None
        run_engine = Engine(engine.threads, memory_limit, spill)
        command = worker_command(config, log, workdir, run_engine, lean_sql)
        with PeakDiskUse(spill) as spill_use:
            finished = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=False,
                env=worker_environment(engine.threads),
            )
    if finished.returncode != 0:
        reason = failure_reason(finished.returncode, finished.stderr)
        progress(f"{size.label} {config}: failed: {reason}")
        return Repetition(rep, "failed", reason=reason, load_before=load_before)
    report = json.loads(finished.stdout.strip().splitlines()[-1])
    run = Repetition(
        rep,
        "ok",
        seconds=report["seconds"],
        cpu_seconds=report["cpu_seconds"],
        setup_seconds=report["setup_seconds"],
        peak_rss_bytes=report["peak_rss_bytes"],
        spill_peak_bytes=spill_use.peak,
        outputs=report["outputs"],
        load_before=load_before,
    )
    progress(
        f"{size.label} {config}: {report['seconds']:.2f} s, CPU {report['cpu_seconds']:.2f} s, "
        f"{report['rows'] / report['seconds']:,.0f} rows/s, "
        f"peak RSS {report['peak_rss_bytes'] / MB:,.0f} MB"
    )
    return run


def rotated(configs: list[str], rep: int) -> list[str]:
    """The order of repetition `rep`: `configs` rotated left by `rep` (a b c, b c a, c a b …)."""
    if not configs:
        return []
    shift = rep % len(configs)
    return configs[shift:] + configs[:shift]


def median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if present else None


def median_bytes(values: list[int | None]) -> int | None:
    middle = median([None if value is None else float(value) for value in values])
    return None if middle is None else round(middle)


def summarise(size: Size, config: str, rows: int, runs: list[Repetition]) -> Result:
    """The Result of a config's repetitions: medians over the successful ones; failed when none
    succeeded; a failed repetition among successful ones is named in `reason`."""
    ok = [run for run in runs if run.status == "ok"]
    failed = [run for run in runs if run.status != "ok"]
    if not ok:
        return Result(
            size.label,
            config,
            failed[0].status,
            rows,
            reason=failed[0].reason,
            load_before=median([run.load_before for run in runs]),
            repetitions=runs,
        )
    seconds = median([run.seconds for run in ok])
    return Result(
        size.label,
        config,
        "ok",
        rows,
        seconds=seconds,
        setup_seconds=median([run.setup_seconds for run in ok]),
        rows_per_second=rows / seconds if seconds else None,
        peak_rss_bytes=median_bytes([run.peak_rss_bytes for run in ok]),
        spill_peak_bytes=median_bytes([run.spill_peak_bytes for run in ok]),
        outputs=ok[0].outputs,
        reason=f"{len(failed)} of {len(runs)} runs failed: {failed[0].reason}" if failed else None,
        load_before=median([run.load_before for run in ok]),
        cpu_seconds=median([run.cpu_seconds for run in ok]),
        repetitions=runs,
    )


def per_repetition(result: Result, attribute: str) -> dict[int, float]:
    """A successful result's `attribute` (seconds, cpu_seconds) by repetition; a result built
    without repetitions counts as one repetition, 0."""
    if result.repetitions:
        values = {run.rep: getattr(run, attribute) for run in result.repetitions}
        oks = {run.rep for run in result.repetitions if run.status == "ok"}
        return {rep: value for rep, value in values.items() if rep in oks and value is not None}
    value = getattr(result, attribute)
    return {0: value} if result.status == "ok" and value is not None else {}


def median_ratio(result: Result, base: Result | None, attribute: str) -> float | None:
    """The median over the repetitions in which both ran of result's `attribute` over base's."""
    if base is None:
        return None
    tops, bases = per_repetition(result, attribute), per_repetition(base, attribute)
    return median([tops[rep] / bases[rep] for rep in tops if bases.get(rep)])


def add_ratios(results: list[Result]) -> None:
    """b/a, c/b, d/b, d/e, e/a, b/i … per size: a config's seconds (and CPU seconds) over a base
    config's, the median of the ratios within each repetition (None when no repetition has
    both; left out when the base was not asked for)."""
    by_key = {(r.size, r.config): r for r in results}
    for result in results:
        for base_config in RATIO_BASES.get(result.config, ()):
            if (result.size, base_config) not in by_key:
                continue
            base = by_key[(result.size, base_config)]
            name = f"{LETTER[result.config]}/{LETTER[base_config]}"
            result.ratios[name] = median_ratio(result, base, "seconds")
            result.cpu_ratios[name] = median_ratio(result, base, "cpu_seconds")


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


def format_seconds(result: Result, attribute: str = "seconds") -> str:
    if result.status != "ok":
        return f"{result.status}: {result.reason}" if attribute == "seconds" else "–"
    text = format_optional(getattr(result, attribute), "{:.2f}")
    ran = sum(run.status == "ok" for run in result.repetitions)
    if attribute == "seconds" and ran < len(result.repetitions):  # some repetitions failed
        text += f" ({ran} of {len(result.repetitions)} ran)"
    return text


def format_optional(value: float | None, pattern: str) -> str:
    return "–" if value is None else pattern.format(value)


def megabytes(value: int | None) -> str:
    return format_optional(None if value is None else value / MB, "{:,.0f}")


def format_ratios(ratios: dict[str, float | None]) -> str:
    return ", ".join(
        f"{name} = {format_optional(value, '{:.2f}')}" for name, value in ratios.items()
    )


def markdown_table(results: list[Result], repeat: int = 1) -> str:
    lines = []
    if repeat > 1:
        lines += [
            f"Medians of {repeat} runs per config, round-robin, the configs' order rotated by one "
            "each round; a ratio is the median of the ratios within each round.",
            "",
        ]
    lines += [
        "| size | rows | config | seconds | CPU s | rows/s | peak RSS (MB) | time ratio "
        "| CPU ratio | spill peak (MB) |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.size} | {r.rows:,} | {LETTER[r.config]} {r.config} | {format_seconds(r)} | "
            f"{format_seconds(r, 'cpu_seconds')} | "
            f"{format_optional(r.rows_per_second, '{:,.0f}')} | {megabytes(r.peak_rss_bytes)} | "
            f"{format_ratios(r.ratios)} | {format_ratios(r.cpu_ratios)} | "
            f"{megabytes(r.spill_peak_bytes)} |"
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
        help=f"any of {','.join(BASE_CONFIGS)} and, with --lean-sql, {','.join(LEAN_CONFIGS)} "
        "(default all)",
    )
    parser.add_argument(
        "--repeat",
        type=positive_count,
        default=1,
        metavar="N",
        help="runs of each config per size, round-robin, the order rotated by one each round; "
        "the table shows medians (default 1)",
    )
    parser.add_argument(
        "--lean-sql",
        type=Path,
        metavar="DIR",
        help="a folder outside the project holding hand-written SQL (run_explain.sql, "
        "run_noexplain.sql, rrf_fused_parquet.sql), run as configs i, j, k beside the others "
        "and compared with b's, f's and g's outputs (no default)",
    )
    parser.add_argument(
        "--ranx-max",
        type=parse_count,
        default="10M",
        help="run ranx only on logs up to this size (default 10M)",
    )
    parser.add_argument("--threads", type=int, default=2, help="DuckDB threads (default 2)")
    parser.add_argument(
        "--memory-limit",
        help="DuckDB memory limit for the DuckDB configs (a, b, e-g, i-k), e.g. 1GB",
    )
    parser.add_argument(
        "--temp-dir",
        type=Path,
        help="where the DuckDB configs spill; the peak disk use of each run is reported",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=BENCH_DIR / "data",
        help="cache of generated logs (default benchmarks/data)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=BENCH_DIR / "results" / "bench.json",
        help="the JSON results (default benchmarks/results/bench.json)",
    )
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


def positive_count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def chosen_configs(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The configs to run (the default: all, with i-k only with --lean-sql) and a one-line
    error, or None."""
    configs = args.configs or [
        c for c in CONFIGS if c not in LEAN_CONFIGS or args.lean_sql is not None
    ]
    lean = [c for c in configs if c in LEAN_CONFIGS]
    if lean and args.lean_sql is None:
        named = ", ".join(f"{LETTER[c]} {c}" for c in lean)
        return configs, f"config {named} needs --lean-sql DIR (a folder of hand-written SQL)"
    if args.lean_sql is not None:
        return configs, lean_sql_problem(args.lean_sql, lean)
    return configs, None


def work_dir(work_root: Path, size: Size, config: str, rep: int = 0) -> Path:
    return work_root / (f"{size.label}-{config}" + (f"-rep{rep}" if rep else ""))


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


def compare_lean(
    size: Size, rep: int, lean: str, ours: Path, theirs: Path, threads: int
) -> dict[str, Any]:
    """A lean config's outputs against its duckscore config's: recorded, a difference warned."""
    partner = LEAN_PAIRS[lean]
    comparison = compare_outputs(ours / partner, theirs / lean, threads)
    line = describe_comparison(comparison)
    pair = f"{LETTER[partner]} {partner} vs {LETTER[lean]} {lean}"
    if comparison["ok"]:
        progress(f"{size.label} {pair}: {line}")
    else:
        caveat = "the lean SQL matches duckscore only on logs like those it was written for"
        progress(f"WARNING: {size.label} {pair}: {line} ({caveat})")
    return {"size": size.label, "rep": rep, "duckscore": partner, "lean": lean, **comparison}


def run_size(
    size: Size,
    args: argparse.Namespace,
    engine: Engine,
    work_root: Path,
    pandas_problem: str | None,
    keep: bool,
    polars_problem: str | None = None,
) -> tuple[Path, list[Result], list[dict[str, Any]]]:
    """Every config `args.repeat` times, round-robin, rotated; with --lean-sql the first round
    in which a lean config and its duckscore config both ran compares their outputs."""
    log = ensure_log(args.data_dir, size)
    rows = parquet_rows(log)
    configs: list[str] = args.configs
    lean_sql: Path | None = args.lean_sql
    skipped: dict[str, str] = {}
    for config in configs:
        reason = skip_reason(config, size, args, pandas_problem, polars_problem)
        if reason:
            progress(f"{size.label} {config}: skipped: {reason}")
            skipped[config] = reason
    runnable = [c for c in configs if c not in skipped]
    # lean config -> its duckscore config, while their outputs are still to compare
    pending = {
        lean: partner
        for lean, partner in LEAN_PAIRS.items()
        if lean in runnable and partner in runnable and lean_sql is not None
    }
    comparisons: list[dict[str, Any]] = []
    runs: dict[str, list[Repetition]] = {config: [] for config in runnable}
    for rep in range(args.repeat):
        held: dict[str, Path] = {}  # configs of this round whose outputs await the comparison
        for position, config in enumerate(rotated(runnable, rep)):
            workdir = work_dir(work_root, size, config, rep)
            run = run_config(config, size, log, workdir, engine, rep, lean_sql)
            run.position = position
            runs[config].append(run)
            pair = next((item for item in pending.items() if config in item), None)
            if pair is None or run.status != "ok":
                if not keep:
                    shutil.rmtree(workdir, ignore_errors=True)
                continue
            lean, partner = pair
            other = partner if config == lean else lean
            if other not in held:
                held[config] = workdir
                continue
            ours, theirs = (
                (held.pop(other), workdir) if config == lean else (workdir, held.pop(other))
            )
            comparisons.append(compare_lean(size, rep, lean, ours, theirs, engine.threads))
            del pending[lean]
            if not keep:
                shutil.rmtree(ours, ignore_errors=True)
                shutil.rmtree(theirs, ignore_errors=True)
        for workdir in held.values():
            if not keep:
                shutil.rmtree(workdir, ignore_errors=True)
    results = [
        Result(size.label, config, "skipped", rows, reason=skipped[config])
        if config in skipped
        else summarise(size, config, rows, runs[config])
        for config in configs
    ]
    return log, results, comparisons


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
    args.configs, problem = chosen_configs(args)
    if problem:
        print(f"bench.py: error: {problem}", file=sys.stderr)
        return 2
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
    lean_checks: list[dict[str, Any]] = []
    with work_folder("duckscore-bench-", args.keep_outputs) as work_root:
        for size in args.sizes:
            keep = args.keep_outputs or (args.check and size == smallest)
            log, size_results, size_lean_checks = run_size(
                size, args, engine, work_root, pandas_problem, keep, polars_problem
            )
            results += size_results
            lean_checks += size_lean_checks
            if args.check and size == smallest:
                checks = run_checks(size, log, results, work_root, engine)
    add_ratios(results)
    if lean_checks:
        checks["lean_sql_outputs"] = lean_checks
    table = markdown_table(results, args.repeat)
    print(table)
    if lean_checks:
        print()
    for lean_check in lean_checks:
        lean, partner = lean_check["lean"], lean_check["duckscore"]
        print(
            f"{lean_check['size']} {LETTER[partner]} {partner} vs {LETTER[lean]} {lean}: "
            f"{describe_comparison(lean_check)}"
        )
    shown = {name: check for name, check in checks.items() if name != "lean_sql_outputs"}
    if shown:  # the lean SQL's comparisons are the lines above; in full in the JSON
        print("\nchecks: " + json.dumps(shown, indent=2, default=str))
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
                "repeat": args.repeat,
                "lean_sql": str(args.lean_sql) if args.lean_sql else None,
                "duckscore_cli_startup_seconds": cli_startup_seconds(),
            },
            "notes": [
                "seconds: each run in a fresh process; b, e, f, g are the `duckscore` child's wall "
                "time, interpreter start and imports included (see duckscore_cli_startup_seconds)",
                "cpu_seconds: user + system CPU over the clock of the worker (all threads) and its "
                "waited-for children (the duckscore child of b, e, f, g)",
                "a, c, d, h, i-k: imports before the clock; d warms numba's JIT before the clock "
                "(setup_seconds holds that time); i-k open their connection inside the clock, "
                "as a does",
                "peak RSS: VmHWM of the worker (a, c, d, h, i-k); ru_maxrss of the duckscore child "
                "(b, e, f, g)",
                "spill peak: disk use of the run's folder under --temp-dir, polled every 0.2 s",
                "with --repeat N: each result's seconds, cpu_seconds, peak and spill are medians "
                "over its successful repetitions (all in `repetitions`, with their place in the "
                "round's order); ratios and cpu_ratios are medians of the ratios within a round",
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
