"""Partitioned outputs at scale and under damage (issue 35 §4): publishing a partition costs the
same however many are published; a deleted ledger, a damaged partition, other settings and a
SIGTERM during a publish each end in an output that is a whole set of partitions, consistent with
its ledger, and say so.

Oracles: counts of the file-system calls a run makes (not its time), the bytes and inodes of the
outputs before the damage, and the ledger against what the interrupted run said it kept."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from duckscore.core import interrupts, swap
from duckscore.core.errors import OptionError
from duckscore.runner import incremental
from duckscore.runner.incremental import Computed, PartitionJob, compute_on_duckdb, run_partitioned
from duckscore.runner.job import Job
from duckscore.runner.partitions import Partition

from .test_partitions import (
    DEFAULT_POLICY,
    data_files,
    day,
    inodes,
    invoke,
    ledger,
    partitioned_run,
    write_days,
)

# --- publishing costs the same per partition, however many are published ------------------------

RUN_FILES = ("fused.parquet", "parent_features.parquet", "parents.parquet", "queries.parquet",
             "contract.jsonl", "manifest.json", "sql/fuse_fused.sql", "sql/score_parents.sql")  # fmt: skip
FILE_SYSTEM_CALLS = ("link", "rename", "replace", "mkdir", "rmdir", "unlink")


def written_like_run(
    job: PartitionJob, partitions: Sequence[Partition], scratch: Path
) -> Iterator[Computed]:
    """A Compute writing the files `run` writes (a few bytes each), without DuckDB."""
    for partition in partitions:
        folder = scratch / partition.name
        (folder / "sql").mkdir(parents=True)
        for name in RUN_FILES:
            (folder / name).write_text(f"{partition.name} {name}\n")
        yield Computed(partition, folder, {Path(name).stem: 1 for name in RUN_FILES[:5]})


def file_system_calls(monkeypatch: pytest.MonkeyPatch, folder: Path, partitions: int) -> int:
    """The link, rename, mkdir, rmdir and unlink calls of a run computing `partitions` days into
    a new output."""
    logs = folder / "logs"
    for number in range(partitions):
        (logs / f"dt={number:04d}").mkdir(parents=True)
        (logs / f"dt={number:04d}" / "part.parquet").write_text(str(number))
    calls: Counter[str] = Counter()

    def counted(name: str) -> Callable[..., Any]:
        real = getattr(os, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        return call

    with monkeypatch.context() as patched:
        patched.setattr(incremental, "_check_queries", lambda *args, **kwargs: None)
        for name in FILE_SYSTEM_CALLS:
            patched.setattr(os, name, counted(name))
        run_partitioned(str(logs), folder / "scored", "dt", compute=written_like_run)
    assert len(ledger(folder / "scored")) == partitions
    return sum(calls.values())


def test_publishing_a_partition_costs_the_same_however_many_are_published(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Each partition is published whole, yet the file-system calls per partition of a run of
    40 are those of a run of 10: no partition already published is linked or removed again."""
    ten = file_system_calls(monkeypatch, tmp_path / "ten", 10)
    forty = file_system_calls(monkeypatch, tmp_path / "forty", 40)
    assert forty / 40 <= 1.1 * ten / 10, (ten, forty)


def partition_folders(out: Path) -> dict[str, list[str]]:
    return {
        kind.name: sorted(p.name for p in kind.iterdir())
        for kind in sorted(out.iterdir())
        if kind.is_dir() and not kind.name.startswith(".")
    }


@pytest.mark.parametrize("mode", ["exchange", "rename aside", "in place"])
def test_every_way_of_publishing_keeps_the_output_whole(
    mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The old folder each revision starts from is found whichever way the output is moved in:
    exchanged, renamed aside (no renameat2), or moved entry by entry (a mount point). After
    each run the output's partitions are the ledger's, a kept partition is the same files, a
    file of the user's is kept, and nothing is left beside or inside the output."""
    out, logs = tmp_path / "scored", tmp_path / "logs"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    if mode == "rename aside":
        monkeypatch.setattr(swap, "exchange", lambda first, second: False)
    elif mode == "in place":
        monkeypatch.setattr(os.path, "ismount", lambda path: Path(path) == out)
    monkeypatch.setattr(incremental, "_check_queries", lambda *args, **kwargs: None)
    for number in range(6):
        (logs / f"dt={number}").mkdir(parents=True)
        (logs / f"dt={number}" / "part.parquet").write_text(str(number))

    def publish(**options: Any) -> None:
        run_partitioned(str(logs), out, "dt", compute=written_like_run, **options)
        values = sorted(ledger(out))
        folders = partition_folders(out)
        assert folders.pop("sql", None) is None
        assert folders == {kind: [f"dt={v}" for v in values] for kind in folders}
        assert sorted(folders) == sorted({Path(n).stem for n in RUN_FILES[:5]} | {"manifest"})
        assert (out / "notes.txt").read_text() == "mine"
        left = [p.name for p in [*tmp_path.iterdir(), *out.iterdir()] if p.name.startswith(".")]
        assert left == []

    publish()
    before = inodes(out)
    (logs / "dt=2" / "part.parquet").write_text("two, changed")
    (logs / "dt=6").mkdir()
    (logs / "dt=6" / "part.parquet").write_text("6")
    publish(incremental=True)
    after = inodes(out)
    changed = {path for path in before if after.get(path) != before[path]}
    assert changed and all("/dt=2/" in path or path == "notes.txt" for path in changed), changed
    assert sorted(ledger(out)) == [str(n) for n in range(7)]
    shutil.rmtree(logs / "dt=0")
    publish()
    assert sorted(ledger(out)) == [str(n) for n in range(1, 7)]


# --- a deleted ledger ----------------------------------------------------------------------------


@pytest.fixture
def four_days(tmp_path: Path) -> Path:
    write_days(tmp_path / "logs", 1, 4)
    return tmp_path / "logs"


def test_a_deleted_ledger_is_a_rebuild_and_status_says_so(four_days: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored"
    assert partitioned_run(four_days, out, "--incremental").exit_code == 0
    before = data_files(out)
    (out / "ledger.json").unlink()
    status = invoke("status", "--out", str(out))
    assert status.exit_code == 2, status.output
    assert status.output.strip() == (
        f"duckscore: error: --out {out}: ledger.json is missing; the next run --partition-by "
        "computes every partition again"
    )
    shutil.rmtree(four_days / f"dt={day(4)}")  # a partition the log no longer has
    rebuilt = invoke("run", "--log", str(four_days), "--out", str(out), "--partition-by", "dt",
                     "--incremental", quiet=False)  # fmt: skip
    assert rebuilt.exit_code == 0, rebuilt.output
    assert (
        f"duckscore: warning: --out {out}: ledger.json is missing: every partition of the log is "
        "computed again and the 4 partitions the output holds are replaced" in rebuilt.output
    )
    assert "3 partitions by dt: 3 to compute, 0 kept" in rebuilt.output
    assert sorted(ledger(out)) == [day(n) for n in (1, 2, 3)]
    assert data_files(out) == {k: v for k, v in before.items() if day(4) not in k}
    assert not (out / "manifest" / f"dt={day(4)}").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# --- damaged partitions --------------------------------------------------------------------------


def states(out: Path, *extra: str) -> list[str]:
    result = invoke("status", "--out", str(out), *extra)
    assert result.exit_code == 0, result.output
    return [line.split(maxsplit=6)[-1] for line in result.output.splitlines()[1:]]


def test_a_damaged_partition_is_shown_and_rebuilt(four_days: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored"
    assert partitioned_run(four_days, out, "--incremental").exit_code == 0
    before = data_files(out)
    os.utime(out / "fused" / f"dt={day(1)}" / "part.parquet")  # touched: the same bytes
    (out / "parents" / f"dt={day(2)}" / "part.parquet").unlink()
    contract = out / "contract" / f"dt={day(3)}" / "part.jsonl"
    contract.write_bytes(contract.read_bytes()[::-1])  # the same size, other bytes
    shutil.copy(contract, out / "queries" / f"dt={day(4)}" / "more.parquet")  # a file too many
    assert states(out) == ["-", "damaged", "damaged", "damaged"]
    assert states(out, "--log", str(four_days)) == ["fresh", "damaged", "damaged", "damaged"]
    check = invoke("status", "--out", str(out), "--log", str(four_days), "--check")
    assert check.exit_code == 1
    kept = inodes(out)[f"fused/dt={day(1)}/part.parquet"]
    result = invoke("run", "--log", str(four_days), "--out", str(out), "--partition-by", "dt",
                    "--incremental", quiet=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "4 partitions by dt: 3 to compute, 1 kept" in result.output
    assert data_files(out) == before
    assert inodes(out)[f"fused/dt={day(1)}/part.parquet"] == kept
    assert states(out, "--log", str(four_days)) == ["fresh"] * 4


def test_a_damaged_partition_without_log_is_kept_and_named(four_days: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored"
    assert partitioned_run(four_days, out, "--incremental").exit_code == 0
    (out / "queries" / f"dt={day(4)}" / "part.parquet").unlink()
    shutil.rmtree(four_days / f"dt={day(4)}")
    assert states(out, "--log", str(four_days))[-1] == "damaged, no log"
    assert invoke("status", "--out", str(out), "--log", str(four_days), "--check").exit_code == 0
    result = invoke("run", "--log", str(four_days), "--out", str(out), "--partition-by", "dt",
                    "--incremental", quiet=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (
        f"duckscore: warning: dt={day(4)}: queries/dt={day(4)}/part.parquet is missing, and the "
        "log has no such partition to compute it again: kept as it is" in result.output
    )


# --- other settings ------------------------------------------------------------------------------


def test_incremental_with_other_settings_is_refused_without_force(
    four_days: Path, tmp_path: Path
) -> None:
    out = tmp_path / "scored"
    assert partitioned_run(four_days, out, "--incremental").exit_code == 0
    before = inodes(out)
    refused = partitioned_run(four_days, out, "--incremental", "--set", "T_high=0.9")
    assert refused.exit_code == 2, refused.output
    message = refused.output.strip()
    assert len(message.splitlines()) == 1
    assert message.startswith(
        f"duckscore: error: --incremental: the 4 partitions of --out {out} were computed with "
        f"other settings (policy {DEFAULT_POLICY} -> {DEFAULT_POLICY}+"
    )
    assert message.endswith(
        "give --force to compute every partition again under these, or the options the ledger's "
        "run was given"
    )
    assert inodes(out) == before
    shutil.rmtree(four_days / f"dt={day(4)}")
    forced = invoke("run", "--log", str(four_days), "--out", str(out), "--partition-by", "dt",
                    "--incremental", "--set", "T_high=0.9", "--force", quiet=False)  # fmt: skip
    assert forced.exit_code == 0, forced.output
    assert "3 partitions by dt: 3 to compute, 0 kept" in forced.output
    warning = next(line for line in forced.output.splitlines() if "warning" in line)
    assert warning.startswith(
        f"duckscore: warning: the 4 partitions of --out {out} were computed with other settings "
        f"(policy {DEFAULT_POLICY} -> {DEFAULT_POLICY}+"
    )
    assert warning.endswith(
        "computed again under these, the output moves to them at once, when all are done; the 1 "
        "partition with no log is removed"
    )
    policies = {entry["policy"] for entry in ledger(out).values()}
    assert sorted(ledger(out)) == [day(n) for n in (1, 2, 3)] and len(policies) == 1
    assert policies != {DEFAULT_POLICY}


def test_a_ledger_written_before_outputs_and_settings_were_recorded(
    four_days: Path, tmp_path: Path
) -> None:
    """Ledger lines without `decided` and `outputs` (duckscore before issue 35): fresh as they
    were, checked for damage by their folders, and other settings named by their versions."""
    out = tmp_path / "scored"
    assert partitioned_run(four_days, out, "--incremental").exit_code == 0
    document = json.loads((out / "ledger.json").read_text())
    for line in document["partitions"]:
        del line["decided"], line["outputs"]
    (out / "ledger.json").write_text(json.dumps(document, indent=2))
    assert states(out, "--log", str(four_days)) == ["fresh"] * 4
    shutil.rmtree(out / "contract" / f"dt={day(2)}")
    assert states(out) == ["-", "damaged", "-", "-"]
    refused = partitioned_run(four_days, out, "--incremental", "--policy", "overall_v2")
    assert refused.exit_code == 2
    assert f"(policy {DEFAULT_POLICY} -> overall_v2)" in refused.output, refused.output
    result = invoke("run", "--log", str(four_days), "--out", str(out), "--partition-by", "dt",
                    "--incremental", quiet=False)  # fmt: skip
    assert "4 partitions by dt: 1 to compute, 3 kept" in result.output, result.output
    assert [bool(line["outputs"]) for line in ledger(out).values()] == [False, True, False, False]


def interrupted_after(count: int) -> incremental.Compute:
    """compute_on_duckdb, stopped by Ctrl-C when `count` partitions are computed."""

    def compute(
        job: PartitionJob, partitions: Sequence[Partition], scratch: Path
    ) -> Iterator[Computed]:
        for number, computed in enumerate(compute_on_duckdb(job, partitions, scratch)):
            if number == count:
                raise KeyboardInterrupt
            yield computed

    return compute


@pytest.mark.parametrize("incremental_run", [False, True], ids=["full", "incremental --force"])
def test_other_settings_never_leave_an_output_of_two_policies(
    incremental_run: bool, four_days: Path, tmp_path: Path
) -> None:
    """A run under another policy interrupted after two partitions: the output is the old one,
    whole; the next run puts every partition under the new policy at once."""
    out = tmp_path / "scored"
    assert partitioned_run(four_days, out).exit_code == 0
    before, lines = data_files(out), ledger(out)
    job = Job(policy_overrides=("T_high=0.9",))
    options: dict[str, Any] = {"incremental": True, "force": True} if incremental_run else {}
    with pytest.raises(KeyboardInterrupt) as stopped:
        run_partitioned(str(four_days), out, "dt", job, compute=interrupted_after(2), **options)
    assert not getattr(stopped.value, "__notes__", None)  # the output was left as it was
    assert data_files(out) == before and ledger(out) == lines
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    done = run_partitioned(str(four_days), out, "dt", job, **options)
    assert len(done.computed) == 4
    assert len({entry["policy"] for entry in ledger(out).values()} - {DEFAULT_POLICY}) == 1


def test_force_needs_partition_by(tmp_path: Path) -> None:
    result = invoke("run", "--log", "x", "--out", str(tmp_path / "o"), "--force")
    assert result.exit_code == 2 and "--force needs --partition-by" in result.output


def test_other_settings_refused_in_python_too(four_days: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored"
    run_partitioned(str(four_days), out, "dt", incremental=True)
    with pytest.raises(OptionError, match="give --force"):
        run_partitioned(str(four_days), out, "dt", Job(top_n=3), incremental=True)


# --- SIGTERM during a publish -------------------------------------------------------------------


@pytest.fixture
def sigterm_interrupts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """SIGTERM raised where the program is, as `duckscore` arranges it (core/interrupts.py)."""
    previous = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(interrupts, "_RECEIVED", [])
    interrupts.catch_sigterm()
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.usefixtures("sigterm_interrupts")
@pytest.mark.parametrize("moment", ["after the exchange", "at the next rmdir"])
def test_sigterm_during_a_publish_counts_every_partition_kept_and_leaves_nothing(
    moment: str, four_days: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM as the third partition's revision is exchanged with the output (the first one
    is renamed into place), or at the first folder removed after that: the line says how many
    partitions the output keeps, the ledger has as many, and no staging is left beside it.
    The first folder removed is the fourth run's spill folder in `.tmp` (in the working folder,
    made private here); a removal that fails sends nothing, so the signal goes at the first that
    succeeds."""
    exchanged: list[Path] = []
    signalled: list[str] = []
    real_exchange, real_rmdir = swap.exchange, os.rmdir

    def exchange(first: Path, second: Path) -> bool:
        done = real_exchange(first, second)
        exchanged.append(second)
        if moment == "after the exchange" and len(exchanged) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return done

    def rmdir(*args: Any, **kwargs: Any) -> None:
        real_rmdir(*args, **kwargs)
        if moment == "at the next rmdir" and len(exchanged) >= 2 and not signalled:
            signalled.append(str(args[0]))
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(swap, "exchange", exchange)
    monkeypatch.setattr(os, "rmdir", rmdir)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "scored"
    result = partitioned_run(four_days, out)
    monkeypatch.undo()
    assert result.exit_code == 143, result.output
    assert [Path(s).parts[0] for s in signalled] == (
        [".tmp"] if moment == "at the next rmdir" else []
    )
    kept = len(ledger(out))
    assert kept >= 3
    assert result.output.strip().splitlines()[-1] == (
        f"duckscore: error: terminated (SIGTERM); the output keeps the {kept} partitions it "
        "finished, each whole, and the rest as it was"
    )
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert sorted(p.name for p in (out / "parents").iterdir()) == [
        f"dt={day(n)}" for n in range(1, kept + 1)
    ]
