"""Where `duckscore run` spends its time: wall and CPU seconds per SQL statement, check and write.

    python benchmarks/profile_run.py benchmarks/data/log_10m.parquet [--recipe R] [--policy P] [--no-explain]
        [--set-recipe KEY=VALUE …] [--unsorted]

Runs the pipeline in this process (imports timed separately) with every statement the Session
executes, every check of rendered SQL and every COPY to an output timed, then prints one line per
step in order (wall seconds, share of the run's wall time, CPU seconds of the process — all its
threads, DuckDB's included) and the total. The statements are labelled by their template, or by the first
words of the SQL.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

STEPS: list[tuple[str, float, float]] = []  # (name, wall seconds, CPU seconds)


def label(statement: str, rendered: Any) -> str:
    words = re.sub(r"\s+", " ", statement).strip()
    created = re.match(r"CREATE OR REPLACE TEMP (?:TABLE|VIEW) (\S+)", words)
    name = f"create {created.group(1)}" if created else words[:60]
    return f"{name} [{rendered.template}]" if rendered is not None else name


@contextmanager
def timed(name: str) -> Iterator[None]:
    start, start_cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        STEPS.append((name, time.perf_counter() - start, time.process_time() - start_cpu))


def wrap(owner: Any, attribute: str, name_of: Callable[..., str]) -> None:
    original = getattr(owner, attribute)

    def timed_call(*args: Any, **kwargs: Any) -> Any:
        with timed(name_of(*args, **kwargs)):
            return original(*args, **kwargs)

    setattr(owner, attribute, timed_call)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--recipe", default="hybrid_v1")
    parser.add_argument("--policy", default="overall_v1")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-explain", dest="explain", action="store_false")
    parser.add_argument(
        "--set-recipe", action="append", default=[], metavar="KEY=VALUE", help="as `run`'s"
    )
    parser.add_argument("--unsorted", action="store_true", help="as `run --unsorted`")
    parser.add_argument(
        "--min-seconds", type=float, default=0.01, help="hide shorter steps (default 0.01)"
    )
    args = parser.parse_args()

    with timed("import duckscore"):
        from duckscore.core import session as session_module
        from duckscore.core.connection import EngineSettings
        from duckscore.runner.job import Job
        from duckscore.runner.pipeline import run

    wrap(
        session_module.Session,
        "_run",
        lambda self, statement, rendered, params: label(statement, rendered),
    )
    wrap(
        session_module.Session,
        "check",
        lambda self, rendered: f"check sql/{rendered.template}",
    )
    wrap(
        session_module.Session,
        "open",
        lambda self, name, contract, given, label=None: f"read and validate {name}",
    )
    wrap(
        session_module,
        "copy_to",
        lambda con, query, path, rendered=None: f"write {path.name}",
    )
    with tempfile.TemporaryDirectory() as scratch, timed("run (total)"):
        run(
            str(args.log),
            Path(scratch) / "out",
            Job(
                recipe=args.recipe,
                policy=args.policy,
                recipe_overrides=tuple(args.set_recipe),
                explain=args.explain,
                allow_recipe_mismatch=bool(args.set_recipe),
                settings=EngineSettings(threads=args.threads),
                sorted_outputs=not args.unsorted,
            ),
        )
    total = next(seconds for name, seconds, _ in STEPS if name == "run (total)")
    print(f"{'wall':>9} {'share':>6} {'CPU':>9}  step")
    for name, seconds, cpu in STEPS:
        if seconds >= args.min_seconds or name.startswith("run"):
            print(f"{seconds:8.2f}s {100 * seconds / total:5.1f}% {cpu:8.2f}s  {name}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
