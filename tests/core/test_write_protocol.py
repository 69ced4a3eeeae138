"""Faults are inputs too: every way a run can be stopped or crowded ends with the old output or
one complete new one, never a mix, no litter, and a one-line message (docs/outputs.md).

The runs are real `duckscore` processes. Where the tests may mount (as root, as in CI), real
tmpfs mounts stand for a volume as `--out`, a full disk and a read-only parent; what needs
privileges the tests lack is also simulated at the one call that differs (a mount point is found
by `os.path.ismount`, a rename fails with EXDEV or ENOSPC).
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest

from benchmarks.synthetic_log import generate
from duckscore.core import swap
from duckscore.core.errors import OutputError
from duckscore.core.outputs import atomic_output_dir

from ..helpers import FIXTURES, in_ci

pytestmark = pytest.mark.slow

DUCKSCORE = str(Path(sysconfig.get_path("scripts")) / "duckscore")
SCIFACT_LOG = str(FIXTURES / "scifact" / "retrieval_log.parquet")


# The child restores Ctrl-C (a background job inherits SIGINT ignored), sets the umask and
# becomes `duckscore` (exec: the same process, so a signal sent to it reaches duckscore).
LAUNCH = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "mask = int(sys.argv[1]); mask >= 0 and os.umask(mask); os.execv(sys.argv[2], sys.argv[2:])"
)


def duckscore(
    *args: str, cwd: Path, umask: int = -1, progress: bool = False
) -> subprocess.Popen[str]:
    quiet = "--progress" if progress else "-q"
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCH, str(umask), DUCKSCORE, quiet, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # no cache: every run checks its log, so a signal's delay lands where these tests aim it
        env={**os.environ, "DUCKSCORE_CACHE_DIR": ""},
    )


def finished(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = process.communicate(timeout=300)
    return process.returncode, err


def litter(folder: Path) -> list[str]:
    """Anything a run leaves beside or inside its output that is not output."""
    found = [p.name for p in folder.iterdir() if p.name.startswith(".")]
    found += [p.name for p in folder.glob("*/.duckscore.*")]
    return sorted(found)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def assert_complete(out: Path) -> dict:
    """A whole output of one run: the manifest's row counts are the files' row counts."""
    manifest = json.loads((out / "manifest.json").read_text())
    con = duckdb.connect()
    for name, output in manifest["outputs"].items():
        path, rows = str(out / name), output["rows"]
        if name.endswith(".parquet"):
            assert con.execute("SELECT count(*) FROM read_parquet(?)", [path]).fetchone() == (rows,)
        elif name.endswith(".jsonl"):
            assert len((out / name).read_text().splitlines()) == rows
    return manifest


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("log") / "log.parquet"
    generate(str(log), 300_000)
    return log


def test_concurrent_runs_on_one_output_leave_one_whole_output(tmp_path: Path) -> None:
    runs = [
        duckscore("run", "--log", SCIFACT_LOG, "--out", "out", "--top-n", str(n), cwd=tmp_path)
        for n in range(1, 9)
    ]
    results = [finished(run) for run in runs]
    assert any(code == 0 for code, _ in results)
    for code, err in results:
        assert code == 0 or (code == 2 and "another duckscore run (pid" in err), err
        assert len(err.strip().splitlines()) <= 1
    manifest = assert_complete(tmp_path / "out")
    contract = [json.loads(line) for line in (tmp_path / "out" / "contract.jsonl").open()]
    assert {len(c["top_parents"]) for c in contract} <= set(range(manifest["top_n"] + 1))
    assert max(len(c["top_parents"]) for c in contract) == manifest["top_n"]
    assert litter(tmp_path) == []


# Ctrl-C takes the path SIGTERM takes (both raise KeyboardInterrupt), and a real SIGINT with its
# status 130 and message is sent in tests/run/test_partitions.py: INT's run here is
# `make test-extended`'s
@pytest.mark.parametrize("how", [pytest.param("INT", marks=pytest.mark.extended), "TERM", "KILL"])
def test_a_stopped_run_leaves_the_old_output_and_no_litter(
    how: str, big_log: Path, tmp_path: Path
) -> None:
    first = duckscore("run", "--log", str(big_log), "--out", "out", cwd=tmp_path)
    assert finished(first)[0] == 0
    before = snapshot(tmp_path / "out")
    rng = random.Random(how)
    for delay in (rng.uniform(0.2, 0.8), rng.uniform(0.8, 2.0)):
        run = duckscore(
            "run", "--log", str(big_log), "--out", "out", "--top-n", "3",
            "--memory-limit", "60MB", "--threads", "1", "--temp-dir", "spill",
            cwd=tmp_path, progress=True,
        )  # fmt: skip
        # one thread: at this small limit two threads sometimes run out of memory instead of
        # spilling (DuckDB's per-thread buffers; 80 and 100 MB failed where 60 MB passed)
        # the clock starts at the first progress line: a loaded machine may take longer than
        # `delay` to start Python, and a signal there is the interpreter's, not duckscore's
        assert run.stderr is not None and run.stderr.readline().startswith("duckscore [")
        time.sleep(delay)
        run.send_signal(getattr(signal, f"SIG{how}"))
        code, err = finished(run)
        if code == 0 or "] done: " in err:
            continue  # it finished first (the signal may land in the exit): checked below
        if how == "KILL":
            assert code == -signal.SIGKILL
            assert snapshot(tmp_path / "out") == before
            continue
        said = [line for line in err.splitlines() if not line.startswith("duckscore [")]
        assert (code, len(said)) == ({"INT": 130, "TERM": 143}[how], 1), err
        assert litter(tmp_path) == [] and not list((tmp_path / "spill").glob("*"))
        if "the output was left as it was" in said[0]:
            assert snapshot(tmp_path / "out") == before
        else:  # the signal came once the new output was moving in: it is in place, whole
            assert said[0].endswith("--out out was already written, whole"), err
            assert assert_complete(tmp_path / "out")["top_n"] == 3
            before = snapshot(tmp_path / "out")
    # the next run on that output and spill folder removes what a killed one left, and completes
    rerun = duckscore(
        "run", "--log", str(big_log), "--out", "out", "--temp-dir", "spill", cwd=tmp_path
    )
    assert finished(rerun)[0] == 0
    assert_complete(tmp_path / "out")
    assert litter(tmp_path) == [] and not list((tmp_path / "spill").glob("*"))


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_permissions_follow_the_umask(mask: int, tmp_path: Path) -> None:
    run = duckscore("fuse", "--log", SCIFACT_LOG, "--out", "out", cwd=tmp_path, umask=mask)
    assert finished(run)[0] == 0
    out = tmp_path / "out"
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~mask
    assert stat.S_IMODE((out / "sql").stat().st_mode) == 0o777 & ~mask
    assert stat.S_IMODE((out / "manifest.json").stat().st_mode) == 0o666 & ~mask
    labels = duckscore(
        "labels", "--run", str(FIXTURES / "scifact" / "reference_rrf_k60.parquet"),
        "--qrels", str(FIXTURES / "scifact" / "qrels.parquet"), "--out", "labels.parquet",
        cwd=tmp_path, umask=mask,
    )  # fmt: skip
    assert finished(labels)[0] == 0
    assert stat.S_IMODE((tmp_path / "labels.parquet").stat().st_mode) == 0o666 & ~mask


def test_entries_of_another_kind_and_other_files_in_the_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "queries.parquet").mkdir(parents=True)  # as Spark writes a dataset
    (out / "queries.parquet" / "part-0.parquet").write_bytes(b"old")
    (out / "sql").write_text("a file where the run writes a folder")
    (out / "notes.txt").write_text("mine")
    run = duckscore("run", "--log", SCIFACT_LOG, "--out", "out", cwd=tmp_path)
    assert finished(run)[0] == 0
    assert_complete(out)
    assert (out / "queries.parquet").is_file() and (out / "sql").is_dir()
    assert (out / "notes.txt").read_text() == "mine"
    assert litter(tmp_path) == []


@pytest.mark.parametrize(
    ("log", "out", "message"),
    [
        ("data", "data/out", "is inside the input --log (data)"),
        ("data/log.parquet", "data", "holds the input "),
        ("data/log.parquet", "", "is empty: give the output a name"),
        ("data/log.parquet", ".", "is the current folder or holds it"),
    ],
)
def test_an_output_that_overlaps_an_input_is_refused(
    log: str, out: str, message: str, tmp_path: Path
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "log.parquet").write_bytes(Path(SCIFACT_LOG).read_bytes())
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, err = finished(duckscore("run", "--log", log, "--out", out, cwd=tmp_path))
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def mounted(out: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`out`, holding `files`, seen as a mount point."""
    out.mkdir()
    for name, text in files.items():
        (out / name).write_text(text)
    monkeypatch.setattr(os.path, "ismount", lambda p: Path(p) == out)


def failing_rename(
    monkeypatch: pytest.MonkeyPatch, fails: Callable[[Path, Path], OSError | None]
) -> None:
    real_rename = os.rename

    def rename(src: str | Path, dst: str | Path) -> None:
        error = fails(Path(src), Path(dst))
        if error is not None:
            raise error
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)


def test_a_mount_point_output_is_replaced_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "volume"
    mounted(out, {"old.parquet": "old", "keep.txt": "mine"}, monkeypatch)
    cross = OSError(errno.EXDEV, "Invalid cross-device link")  # nothing may cross the mount point
    failing_rename(
        monkeypatch, lambda src, dst: cross if tmp_path in (src.parent, dst.parent) else None
    )
    with atomic_output_dir(out) as stage:
        assert stage.parent == out
        (stage / "old.parquet").write_text("new")
        (stage / "sql").mkdir()
    assert (out / "old.parquet").read_text() == "new" and (out / "keep.txt").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt", "old.parquet", "sql"]


def test_a_move_that_fails_half_way_is_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "volume"
    old = {name: f"old {name}" for name in ("a", "b", "c")}
    mounted(out, old, monkeypatch)
    full = OSError(errno.ENOSPC, "No space left on device")
    failing_rename(
        monkeypatch,
        lambda src, dst: (
            full if dst == out / "c" and src.parent.name.startswith(".duckscore.tmp-") else None
        ),
    )
    with (
        pytest.raises(OutputError, match="cannot move the output in"),
        atomic_output_dir(out) as stage,
    ):
        for name in old:
            (stage / name).write_text(f"new {name}")
    assert {p.name: p.read_text() for p in out.iterdir()} == old


def test_without_an_atomic_exchange_the_old_folder_is_renamed_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("old")
    monkeypatch.setattr(swap, "exchange", lambda first, second: False)
    with atomic_output_dir(out) as stage:
        (stage / "x").write_text("new")
    assert (out / "x").read_text() == "new" and litter(tmp_path) == []


def test_an_exchange_swaps_two_folders(tmp_path: Path) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux's")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "from_a").touch()
    assert swap.exchange(tmp_path / "a", tmp_path / "b")
    assert [p.name for p in (tmp_path / "b").iterdir()] == ["from_a"]


# ---------------------------------------------------------------------------------------------
# real mounts: a tmpfs where the tests may mount one (root, as in CI), else skipped — but in CI,
# which runs as root, a refused mount fails


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """mount(name, size, *options): a fresh tmpfs at tmp_path/name, unmounted afterwards."""
    mounts: list[Path] = []

    def mount(name: str, size: str = "64m", *options: str) -> Path:
        point = tmp_path / name
        point.mkdir(exist_ok=True)
        command = ["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options])]
        done = subprocess.run([*command, "tmpfs", str(point)], capture_output=True, text=True)
        if done.returncode != 0:
            refused = f"cannot mount a tmpfs here: {done.stderr.strip()}"
            if in_ci():
                pytest.fail(f"{refused} (CI runs .ci/run as root)")
            pytest.skip(refused)
        mounts.append(point)
        return point

    yield mount
    for point in reversed(mounts):
        subprocess.run(["umount", "--lazy", str(point)], capture_output=True)


def bind_over_itself(folder: Path) -> None:
    """`folder` becomes a mount point of its own (so it stays writable when its parent is not)."""
    subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)


def test_a_mounted_volume_as_out_is_replaced_in_place(
    tmp_path: Path, tmpfs: Callable[..., Path]
) -> None:
    volume = tmpfs("volume")
    (volume / "keep.txt").write_text("mine")
    for recipe in ("hybrid_v1", "canonical_rrf"):
        # overall_v1 records no recipe; the default overall_v3 refuses hybrid_v1
        run = duckscore(
            "run", "--log", SCIFACT_LOG, "--recipe", recipe, "--policy", "overall_v1",
            "--out", "volume", cwd=tmp_path,
        )  # fmt: skip
        assert finished(run) == (0, "")
        manifest = assert_complete(volume)
        assert manifest["recipe_id"] == recipe
    assert (volume / "keep.txt").read_text() == "mine"
    assert litter(volume) == [] and litter(tmp_path) == []


def test_a_full_disk_leaves_the_old_output_and_no_litter(
    tmp_path: Path, tmpfs: Callable[..., Path]
) -> None:
    disk = tmpfs("disk", "1m")
    small = tmp_path / "small.parquet"
    duckdb.sql(
        f"COPY (FROM '{SCIFACT_LOG}' WHERE query_id IN (SELECT DISTINCT query_id FROM "
        f"'{SCIFACT_LOG}' ORDER BY query_id LIMIT 2)) TO '{small}'"
    )
    assert (
        finished(duckscore("fuse", "--log", str(small), "--out", "disk/out", cwd=tmp_path))[0] == 0
    )
    before = snapshot(disk / "out")
    code, err = finished(duckscore("fuse", "--log", SCIFACT_LOG, "--out", "disk/out", cwd=tmp_path))
    assert code == 2 and err.count("\n") == 1 and "No space left on device" in err, err
    assert snapshot(disk / "out") == before
    assert [p.name for p in disk.iterdir()] == ["out"] and litter(disk / "out") == []


def test_a_read_only_parent(tmp_path: Path, tmpfs: Callable[..., Path]) -> None:
    volume = tmpfs("volume")
    (volume / "out").mkdir()
    (volume / "out" / "keep.txt").write_text("mine")
    bind_over_itself(volume / "out")
    subprocess.run(["mount", "-o", "remount,bind,ro", str(volume)], check=True)
    try:
        run = duckscore("fuse", "--log", SCIFACT_LOG, "--out", "volume/out", cwd=tmp_path)
        assert finished(run) == (0, "")
        assert_complete(volume / "out")
        assert (volume / "out" / "keep.txt").read_text() == "mine"
        assert litter(volume / "out") == []
        code, err = finished(
            duckscore("fuse", "--log", SCIFACT_LOG, "--out", "volume/new", cwd=tmp_path)
        )
        assert code == 2 and err.count("\n") == 1 and "Read-only file system" in err, err
        assert sorted(p.name for p in volume.iterdir()) == ["out"]
    finally:
        subprocess.run(["umount", str(volume / "out")], check=True)
