"""Run the mutants of the SQL templates against their capability's fast tests.

    .venv/bin/python -m tests.mutants.run                       # every mutant (hours)
    .venv/bin/python -m tests.mutants.run --sample 4 --seed 0   # 4 per capability
    .venv/bin/python -m tests.mutants.run --template fuse/components/normalizer/minmax.sql --jobs 2
    .venv/bin/python -m tests.mutants.run --list --capability score
    .venv/bin/python -m tests.mutants.run --capability fuse --out DIR --resume  # go on in DIR

Each mutant is written into a scratch overlay's copy of sql/ (`overlay.py`), and the tests
`targets.yaml` names for its template run with `-x` and a timeout. Killed: a test failed or the
run timed out; survived: every test passed. Killers first: the last tests that killed a mutant of
the same selection run on their own before it (most mutants die there, in seconds); only when
they pass does the whole selection run. Reach (`reach.py`, off with --no-reach): a mutant
confined to plain SQL lines runs only the tests that rendered those lines in a reach pass over
the unmutated templates; when none did, it survives without a run. A survivor listed in
`equivalent.yaml` is an equivalent mutant (no test can tell it from the original) and is left
out of the kill rate.
Writes results.jsonl (as mutants end), report.json and report.md to --out (default: the
system temporary folder's duckscore-mutants).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

import yaml

from .catalogue import Mutant, mutants
from .overlay import ROOT, SQL, Overlay
from .reach import Reach, edited_lines, marked, marked_lines
from .report import markdown, merged

HERE = Path(__file__).resolve().parent
CAPABILITIES = ("fuse", "score", "answers", "bids", "instincts", "metrics")
MARKERS = "not slow and not extended and not spark"


@dataclass
class Result:
    id: str
    template: str
    operator: str
    line: int
    original: str
    replacement: str
    status: str  # killed | survived | timeout | error | equivalent
    seconds: float
    reason: str = ""
    killed_by: str = ""  # the first failing test's node id
    tests: int = 0  # the tests reach chose for it (0: the whole selection)


def targets() -> dict[str, list[str]]:
    loaded: dict[str, list[str]] = yaml.safe_load((HERE / "targets.yaml").read_text())
    return loaded


def equivalents() -> dict[str, str]:
    loaded: dict[str, str] | None = yaml.safe_load((HERE / "equivalent.yaml").read_text())
    return loaded or {}


def selection_for(template: str, table: dict[str, list[str]]) -> list[str]:
    return table.get(template) or table[template.split("/", 1)[0]]


def catalogue(capabilities: list[str], templates: list[str]) -> list[Mutant]:
    """Every mutant of the chosen templates (all of the capabilities' when none is named)."""
    chosen = templates or [
        str(path.relative_to(SQL))
        for capability in capabilities
        for path in sorted((SQL / capability).rglob("*.sql"))
    ]
    return [m for t in chosen for m in _mutants_of(t, (SQL / t).read_text(encoding="utf-8"))]


@cache
def _mutants_of(template: str, text: str) -> tuple[Mutant, ...]:
    # parsing every mutant that touches Jinja takes seconds; a process asks for the same texts again
    return tuple(mutants(template, text))


def sample(found: list[Mutant], per_capability: int, seed: int) -> list[Mutant]:
    """`per_capability` mutants of each capability, drawn with `seed` (stable for a given set)."""
    rng = random.Random(seed)
    picked: list[Mutant] = []
    for capability in CAPABILITIES:
        of_it = sorted((m for m in found if m.capability == capability), key=lambda m: m.id)
        picked += rng.sample(of_it, min(per_capability, len(of_it)))
    return picked


def interleave(found: list[Mutant]) -> list[Mutant]:
    """One mutant of each capability in turn, so a run stopped early has some of every one."""
    queues = [[m for m in found if m.capability == c] for c in CAPABILITIES]
    longest = max((len(q) for q in queues), default=0)
    return [q[i] for i in range(longest) for q in queues if i < len(q)]


def pytest_command(paths: list[str], markers: str = MARKERS) -> list[str]:
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", markers,
            "--no-header", "-p", "no:randomly", *paths]  # fmt: skip


FAILED_TEST = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", re.MULTILINE)


@dataclass
class Outcome:
    status: str  # killed | survived | timeout | error
    tail: str = ""  # the output's last lines
    failed: str = ""  # the first failing test's node id


def default_memory_gib(jobs: int) -> float:
    """A share of the machine's memory per job, so a mutant that makes a query grow without end
    fails its own tests (DuckDB's Out of Memory Error) instead of waking the kernel's OOM killer
    on the whole machine."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return max(2.0, round(physical / (max(1, jobs) + 1), 1))


# sets the limit, then becomes the command (no preexec_fn: the jobs are threads)
_CAP = "import os, resource, sys; n = int(sys.argv[1]); " \
    "resource.setrlimit(resource.RLIMIT_AS, (n, n)); os.execv(sys.argv[2], sys.argv[2:])"  # fmt: skip


def capped(command: list[str], address_space: int) -> list[str]:
    """`command` run with at most `address_space` bytes of virtual memory (it and its children)."""
    return [sys.executable, "-c", _CAP, str(address_space), *command]


def run_tests(
    overlay: Overlay,
    paths: list[str],
    args: argparse.Namespace,
    cache: Path,
    extra: tuple[str, ...] = (),
    **env_extra: str,
) -> Outcome:
    """The tests against the overlay's sql/, in at most args.memory GiB of address space."""
    env = dict(os.environ, PYTHONPATH=str(overlay.folder), DUCKSCORE_CACHE_DIR=str(cache))
    env.update(env_extra)
    env.pop("CI", None)
    command = capped([*pytest_command(paths, args.markers), *extra], int(args.memory * 2**30))
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=args.timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return Outcome("timeout")
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
    if done.returncode == 0:
        return Outcome("survived", tail)
    if done.returncode == 1:
        failed = FAILED_TEST.search(done.stdout)
        return Outcome("killed", tail, failed.group(1) if failed else "")
    return Outcome("error", tail)


class Killers:
    """The last few tests that killed a mutant, per selection (shared by the jobs): test
    functions, all their parametrized cases (a normaliser's mutant dies in its own case)."""

    def __init__(self, keep: int = 3) -> None:
        self.keep = keep
        self._by_selection: dict[tuple[str, ...], list[str]] = {}
        self._lock = threading.Lock()

    def of(self, selection: list[str]) -> list[str]:
        with self._lock:
            return list(self._by_selection.get(tuple(selection), []))

    def remember(self, selection: list[str], test: str) -> None:
        with self._lock:
            known = [t for t in self._by_selection.get(tuple(selection), []) if t != test]
            self._by_selection[tuple(selection)] = [test, *known][: self.keep]


def judge(
    overlay: Overlay,
    selection: list[str],
    killers: Killers,
    args: argparse.Namespace,
    cache: Path,
    tests: list[str] | None = None,
) -> Outcome:
    """Killers first, then (when they pass, or fail to run) the whole selection, or of it only
    `tests` (then only the killers among them)."""
    first = killers.of(selection)
    if tests is not None:
        first = [k for k in first if any(t.split("[", 1)[0] == k for t in tests)]
    if first:
        run = run_tests(overlay, first, args, cache)
        if run.status in ("killed", "timeout"):
            return run
    run = run_tests(overlay, selection if tests is None else tests, args, cache)
    if run.failed:
        killers.remember(selection, run.failed.split("[", 1)[0])  # every case of the test
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--capability", action="append", choices=CAPABILITIES)
    parser.add_argument("--template", action="append", default=[], help="e.g. fuse/fused.sql")
    parser.add_argument("--operator", action="append", help="only these operators")
    parser.add_argument("--id", action="append", default=[], help="only these mutant ids")
    parser.add_argument("--sample", type=int, help="this many mutants per capability")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, help="at most this many mutants")
    parser.add_argument("--tests", action="append", help="run these tests, not targets.yaml's")
    parser.add_argument("--markers", default=MARKERS, help=f"pytest -m (default {MARKERS!r})")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant")
    parser.add_argument(
        "--memory", type=float, help="GiB of address space per test run (default: RAM / (jobs+1))"
    )
    parser.add_argument(
        "--out", type=Path, default=Path(tempfile.gettempdir()) / "duckscore-mutants"
    )
    parser.add_argument("--list", action="store_true", help="print the mutants, run nothing")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument(
        "--no-reach", action="store_true", help="run every mutant against its whole selection"
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep --out's results, run the mutants they lack"
    )
    parser.add_argument(
        "--skip-equivalent",
        action="store_true",
        help="report the mutants equivalent.yaml records as equivalent without running them",
    )
    args = parser.parse_args(argv)
    args.memory = args.memory or default_memory_gib(args.jobs)

    found = catalogue(args.capability or list(CAPABILITIES), args.template)
    if args.operator:
        found = [m for m in found if m.operator in args.operator]
    if args.id:
        found = [m for m in found if m.id in args.id]
    if args.sample is not None:
        found = sample(found, args.sample, args.seed)
    found = interleave(found)
    if args.limit is not None:
        found = found[: args.limit]
    if args.list:
        for m in found:
            print(m.id, "\t", m.describe())
        print(f"{len(found)} mutants", file=sys.stderr)
        return 0
    chosen = {m.id for m in found}
    earlier = [r for r in results_so_far(args.out) if r.id in chosen] if args.resume else []
    done = {r.id for r in earlier}
    recorded = recorded_equivalents(found, done) if args.skip_equivalent else []
    done |= {r.id for r in recorded}
    results = earlier + recorded + execute([m for m in found if m.id not in done], args)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    (args.out / "report.md").write_text(markdown([asdict(r) for r in results]))
    print((args.out / "report.md").read_text())
    return 1 if any(r.status in ("survived", "error") for r in results) else 0


def not_run(m: Mutant, status: str, reason: str) -> Result:
    """`m`'s result without a test run (0 s)."""
    return Result(m.id, m.template, m.operator, m.line, m.original, m.replacement, status, 0.0,
                  reason)  # fmt: skip


def recorded_equivalents(found: list[Mutant], done: set[str]) -> list[Result]:
    """The mutants of `found` not in `done` that equivalent.yaml records, as results not run:
    a whole run skips their selections' full runs (about 200 s each on fused.sql)."""
    known = equivalents()
    return [
        not_run(m, "equivalent", known[m.id]) for m in found if m.id in known and m.id not in done
    ]


def results_so_far(out: Path) -> list[Result]:
    """The results an earlier run wrote to out/results.jsonl, the last of each mutant; a survivor
    since recorded in equivalent.yaml marked so."""
    progress = out / "results.jsonl"
    return [Result(**r) for r in merged([progress], equivalents())] if progress.exists() else []


def reach_passes(
    args: argparse.Namespace, work: Path, cache: Path
) -> Callable[[tuple[str, ...]], Reach]:
    """A function running one selection's reach pass against every template marked."""
    overlay = Overlay(work / "reach").build()
    for path in sorted(overlay.sql.rglob("*.sql")):
        name = str(path.relative_to(overlay.sql))
        path.write_text(marked(name, path.read_text(encoding="utf-8")), encoding="utf-8")

    def one_pass(selection: tuple[str, ...]) -> Reach:
        started = time.monotonic()
        out = work / f"reach-{hashlib.sha256(' '.join(selection).encode()).hexdigest()[:12]}.json"
        out.unlink(missing_ok=True)
        run = run_tests(overlay, list(selection), args, cache,
                        ("-p", "tests.mutants.reach_plugin", "--maxfail", "1000000"),
                        DUCKSCORE_REACH_OUT=str(out))  # fmt: skip
        found = Reach.read(out) if out.exists() else Reach()
        print(f"reach      {time.monotonic() - started:6.1f}s {len(found.tests)} tests, "
              f"{len(found.always)} always: {' '.join(selection)}", flush=True)  # fmt: skip
        if not found.tests:
            raise SystemExit(f"the reach pass recorded nothing: {run.status}\n{run.tail}")
        return found

    return one_pass


def execute(found: list[Mutant], args: argparse.Namespace) -> list[Result]:
    if not found:
        return []
    table, known = targets(), equivalents()
    if args.tests:
        table = {m.template: args.tests for m in found}
    work = args.out / "work"
    overlays: queue.Queue[Overlay] = queue.Queue()
    for n in range(max(1, args.jobs)):
        overlays.put(Overlay(work / f"overlay{n}").build())
    cache = work / "cache"
    progress = args.out / "results.jsonl"  # one line a mutant as it ends: a partial report
    if not args.resume:
        progress.unlink(missing_ok=True)
    writing = threading.Lock()
    originals = {m.template: (SQL / m.template).read_text(encoding="utf-8") for m in found}
    selections = {tuple(selection_for(t, table)) for t in originals}

    def baseline(selection: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
        overlay = overlays.get()
        started = time.monotonic()
        try:
            run = run_tests(overlay, list(selection), args, cache)
        finally:
            overlays.put(overlay)
        print(f"baseline   {time.monotonic() - started:6.1f}s {' '.join(selection)}", flush=True)
        if run.status != "survived":
            print(f"the unmutated templates fail {' '.join(selection)}: {run.status}\n{run.tail}")
        return selection, run.status

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        passes = None if args.no_reach else reach_passes(args, work, cache)
        passing = {s: pool.submit(passes, s) for s in sorted(selections)} if passes else {}
        runs = [] if args.no_baseline else list(pool.map(baseline, sorted(selections)))
        failing = {selection for selection, status in runs if status != "survived"}
        reach: dict[tuple[str, ...], Reach] = {s: f.result() for s, f in passing.items()}
    broken = {t for t in originals if tuple(selection_for(t, table)) in failing}
    killers = Killers()
    plain = {t: marked_lines(text) for t, text in originals.items()}

    def tests_for(m: Mutant) -> list[str] | None:
        """The tests reach chose for `m`: None when it touches a line that is not plain SQL."""
        lines = edited_lines(m.line, m.original)
        found = reach.get(tuple(selection_for(m.template, table)))
        if found is None or not set(lines) <= plain[m.template]:
            return None
        return found.tests_for(m.template, lines)

    def one(m: Mutant) -> Result:
        overlay = overlays.get()
        started = time.monotonic()
        tests = tests_for(m)
        try:
            overlay.write(m.template, m.text)
            run = (
                Outcome("survived", f"no test renders line {m.line}")
                if tests == []
                else judge(overlay, selection_for(m.template, table), killers, args, cache, tests)
            )
        finally:
            overlay.write(m.template, originals[m.template])
            overlays.put(overlay)
        status, reason = run.status, known.get(m.id, "")
        if status == "survived" and reason:
            status = "equivalent"
        elif status == "error" or tests == []:
            reason = run.tail
        result = Result(m.id, m.template, m.operator, m.line, m.original, m.replacement, status,
                        round(time.monotonic() - started, 1), reason, run.failed,
                        len(tests or []))  # fmt: skip
        print(f"{status:10} {result.seconds:6.1f}s {m.describe()[:160]}", flush=True)
        with writing, progress.open("a", encoding="utf-8") as written:
            written.write(json.dumps(asdict(result)) + "\n")
        return result

    skipped = [
        not_run(m, "error", "not run: the unmutated template fails its tests")
        for m in found
        if m.template in broken
    ]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        return skipped + list(pool.map(one, [m for m in found if m.template not in broken]))


if __name__ == "__main__":
    raise SystemExit(main())
