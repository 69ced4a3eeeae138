"""`run --partition-by dt [--incremental]` and `duckscore status` on a hive-partitioned log
made from SciFact (ten queries a day).

Oracles: the plain `run` of the whole log (its per-query results are the partitions' union, as
scoring never looks across queries), the log's own file layout (which partitions exist, which
changed), and the files' inodes and bytes (a kept partition is the same file)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli

from ..fuse.test_traces import scifact_slice, spans_of
from ..helpers import SCIFACT

SCIFACT_LOG = SCIFACT / "retrieval_log.parquet"
PER_DAY = 10
DATA = ("fused", "parent_features", "parents", "queries", "contract")
DEFAULT_POLICY = "overall_v3"  # what a run without --policy records in the ledger


def invoke(*args: str, quiet: bool = True) -> Result:
    return CliRunner().invoke(cli, ["-q", *args] if quiet else ["--progress", *args])


def day(number: int) -> str:
    return f"2024-01-{number:02d}" if number <= 31 else f"2024-02-{number - 31:02d}"


def write_days(logs: Path, first: int, last: int) -> None:
    """Days first..last, ten SciFact queries each (day 31 on: day 1's queries, renamed)."""
    con = duckdb.connect()
    query_ids = [
        row[0]
        for row in con.execute(
            "SELECT DISTINCT query_id FROM read_parquet(?) ORDER BY query_id", [str(SCIFACT_LOG)]
        ).fetchall()
    ]
    for number in range(first, last + 1):
        taken = query_ids[((number - 1) % 30) * PER_DAY :][:PER_DAY]
        folder = logs / f"dt={day(number)}"
        folder.mkdir(parents=True, exist_ok=True)
        con.execute(
            "COPY (SELECT * REPLACE (? || query_id AS query_id) FROM read_parquet(?) "
            "WHERE list_contains(?, query_id) ORDER BY ALL) TO ? (FORMAT parquet)",
            ["" if number <= 30 else f"d{number}-", str(SCIFACT_LOG), taken,
             str(folder / "part-0.parquet")],
        )  # fmt: skip


def ledger(out: Path) -> dict[str, dict]:
    document = json.loads((out / "ledger.json").read_text())
    return {entry["partition"]: entry for entry in document["partitions"]}


def data_files(out: Path) -> dict[str, bytes]:
    """Every data file of the output, by path (manifests carry the time they were made)."""
    return {
        str(p.relative_to(out)): p.read_bytes()
        for kind in DATA
        for p in sorted((out / kind).rglob("*"))
        if p.is_file()
    }


def inodes(out: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(out)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name != "ledger.json"
    }


def partitioned_run(logs: Path, out: Path, *extra: str) -> Result:
    return invoke(
        "run", "--log", str(logs), "--out", str(out), "--partition-by", "dt", *extra
    )  # fmt: skip


@pytest.fixture
def three_days(tmp_path: Path) -> Path:
    write_days(tmp_path / "logs", 1, 3)
    return tmp_path / "logs"


def test_partitions_are_the_plain_run_of_the_whole_log_split_by_day(
    three_days: Path, tmp_path: Path
) -> None:
    result = partitioned_run(three_days, tmp_path / "scored", "--memory-limit", "200MB")
    assert result.exit_code == 0, result.output
    plain = invoke("run", "--log", str(three_days), "--out", str(tmp_path / "plain"))
    assert plain.exit_code == 0, plain.output
    con = duckdb.connect()
    for kind in ("fused", "parent_features", "parents", "queries"):
        split = f"read_parquet('{tmp_path}/scored/{kind}/*/part.parquet', hive_partitioning = true)"
        whole = f"read_parquet('{tmp_path}/plain/{kind}.parquet')"
        counts = con.sql(
            f"SELECT (SELECT count(*) FROM {split}), (SELECT count(*) FROM {whole}), "
            f"(SELECT count(*) FROM (SELECT * EXCLUDE (dt) FROM {split} EXCEPT ALL "
            f"SELECT * FROM {whole}))"
        ).fetchall()[0]
        assert counts[0] == counts[1] > 0 and counts[2] == 0, kind
    days = con.sql(
        f"SELECT dt, count(*) FROM read_parquet('{tmp_path}/scored/queries/*/part.parquet', "
        "hive_partitioning = true) GROUP BY dt ORDER BY dt"
    ).fetchall()
    assert [(str(d), n) for d, n in days] == [(day(n), PER_DAY) for n in (1, 2, 3)]
    contract = con.sql(
        f"SELECT count(*) FROM read_json('{tmp_path}/scored/contract/*/part.jsonl')"
    ).fetchall()
    assert contract == [(3 * PER_DAY,)]
    entries = ledger(tmp_path / "scored")
    assert sorted(entries) == [day(n) for n in (1, 2, 3)]
    assert {e["rows"]["queries"] for e in entries.values()} == {PER_DAY}
    # the default policy, and the recipe it records (no --recipe given)
    assert {(e["recipe"], e["policy"]) for e in entries.values()} == {
        ("canonical_rrf", DEFAULT_POLICY)
    }


def test_a_partitioned_run_says_what_was_decided_as_a_run_does(
    three_days: Path, tmp_path: Path
) -> None:
    """Issue 47 §4: the level summary and the warnings of an ordinary run, over the queries of
    the partitions computed (none when nothing was computed)."""

    def said(*args: str) -> list[str]:
        done = CliRunner().invoke(cli, list(args))
        assert done.exit_code == 0, done.stderr
        return done.stderr.splitlines()

    out, plain = str(tmp_path / "scored"), str(tmp_path / "plain")
    split = said("run", "--log", str(three_days), "--out", out, "--partition-by", "dt")
    whole = said("run", "--log", str(three_days), "--out", plain)
    assert split[0].startswith("duckscore: computed 3 partitions (")
    assert split[1:] == whole[1:] and split[1].startswith("duckscore: 30 queries: high ")
    assert said("run", "--log", str(three_days), "--out", out, "--partition-by", "dt",
                "--incremental") == [f"duckscore: nothing to compute in {out}/ (by dt; 3 kept)"]  # fmt: skip
    strict = ("--set", "T_low=0.99", "--set", "T_high=0.999")  # every query low
    again = said("run", "--log", str(three_days), "--out", out, "--partition-by", "dt", *strict)
    alone = said("run", "--log", str(three_days), "--out", plain, *strict)
    warnings = [line for line in alone if line.startswith("duckscore: warning: policy ")]
    assert len(warnings) == 1 and "rates all 30 queries low" in warnings[0], alone
    assert warnings[0] in again and again[-1] == alone[-1], again
    assert again[-1].startswith("duckscore: 30 queries: high 0, medium 0, low 30 ")


def test_incremental_leaves_fresh_partitions_as_the_same_files(
    three_days: Path, tmp_path: Path
) -> None:
    out = tmp_path / "scored"
    assert partitioned_run(three_days, out, "--incremental").exit_code == 0
    before = inodes(out)
    (three_days / f"dt={day(2)}" / "part-0.parquet").unlink()
    write_days(three_days, 2, 2)  # the same bytes again: a new mtime, the same fingerprint
    write_days(three_days, 4, 4)
    os.truncate(three_days / f"dt={day(3)}" / "part-0.parquet", 0)
    write_days(three_days, 3, 3)  # rewritten: same bytes
    status = invoke("status", "--out", str(out), "--log", str(three_days))
    assert [line.split()[-1] for line in status.output.splitlines()[1:]] == [
        "fresh", "fresh", "fresh", "new",
    ]  # fmt: skip
    result = invoke("run", "--log", str(three_days), "--out", str(out), "--partition-by", "dt",
                    "--incremental", quiet=False)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "4 partitions by dt: 1 to compute, 3 kept" in result.output
    after = inodes(out)
    assert {k: v for k, v in after.items() if k in before} == before
    assert sorted(ledger(out)) == [day(n) for n in (1, 2, 3, 4)]


def test_a_changed_file_or_policy_makes_partitions_stale(three_days: Path, tmp_path: Path) -> None:
    out = tmp_path / "scored"
    assert partitioned_run(three_days, out, "--incremental").exit_code == 0
    con = duckdb.connect()
    changed = three_days / f"dt={day(1)}" / "part-0.parquet"
    con.execute(
        "COPY (SELECT * FROM read_parquet(?) WHERE rank <= 5) TO ? (FORMAT parquet)",
        [str(changed), str(tmp_path / "fewer.parquet")],
    )
    os.replace(tmp_path / "fewer.parquet", changed)
    states = invoke("status", "--out", str(out), "--log", str(three_days), "--json")
    assert [json.loads(line)["state"] for line in states.output.splitlines()] == [
        "files changed", "fresh", "fresh",
    ]  # fmt: skip
    check = invoke("status", "--out", str(out), "--log", str(three_days), "--check")
    assert check.exit_code == 1
    assert partitioned_run(three_days, out, "--incremental").exit_code == 0
    assert invoke("status", "--out", str(out), "--log", str(three_days), "--check").exit_code == 0
    # above the default overall_v3's T_low (0.82)
    states = invoke("status", "--out", str(out), "--log", str(three_days), "--set", "T_high=0.9")
    assert {line.split(maxsplit=6)[-1] for line in states.output.splitlines()[1:]} == {
        "settings changed"
    }


def test_without_incremental_partitions_whose_log_is_gone_are_removed(
    three_days: Path, tmp_path: Path
) -> None:
    out = tmp_path / "scored"
    assert partitioned_run(three_days, out).exit_code == 0
    shutil.rmtree(three_days / f"dt={day(3)}")
    assert partitioned_run(three_days, out, "--incremental").exit_code == 0
    status = invoke("status", "--out", str(out), "--log", str(three_days))
    assert status.output.splitlines()[-1].endswith("no log")
    assert (out / "parents" / f"dt={day(3)}").exists()
    assert partitioned_run(three_days, out).exit_code == 0
    assert sorted(ledger(out)) == [day(1), day(2)]
    assert sorted(p.name for p in (out / "parents").iterdir()) == [f"dt={day(n)}" for n in (1, 2)]
    assert not (out / "manifest" / f"dt={day(3)}").exists()


def test_a_query_in_two_partitions_is_an_error_naming_both(
    three_days: Path, tmp_path: Path
) -> None:
    out = tmp_path / "scored"
    assert partitioned_run(three_days, out, "--incremental").exit_code == 0
    moved = three_days / f"dt={day(9)}"
    moved.mkdir()
    duckdb.execute(
        "COPY (FROM read_parquet($day) WHERE query_id = (SELECT min(query_id) FROM "
        "read_parquet($day))) TO $moved (FORMAT parquet)",
        {
            "day": str(three_days / f"dt={day(2)}" / "part-0.parquet"),
            "moved": str(moved / "x.parquet"),
        },
    )
    query_id = duckdb.execute(
        "SELECT query_id FROM read_parquet(?)", [str(moved / "x.parquet")]
    ).fetchall()[0][0]
    before = inodes(out)
    result = partitioned_run(three_days, out, "--incremental")
    assert result.exit_code == 2
    assert (
        f"query_id '{query_id}' has hits in two partitions, dt={day(2)} and dt={day(9)}"
        in result.output
    )
    assert inodes(out) == before


@pytest.mark.parametrize(
    ("layout", "extra", "message"),
    [
        ("flat", ("--partition-by", "dt"), "is not under a dt=… folder (--partition-by dt)"),
        ("days", ("--incremental",), "--incremental needs --partition-by"),
        ("days", ("--partition-by", "dt", "--queries", "q.parquet"), "--queries is not supported"),
        ("days", ("--partition-by", "d-t"), "--partition-by 'd-t': a column name"),
        ("by day", ("--partition-by", "day"), "is partitioned by dt, not day"),
        ("plain", ("--partition-by", "dt"), "holds an output that is not partitioned"),
    ],
)
def test_refusals_are_one_line(
    layout: str, extra: tuple[str, ...], message: str, three_days: Path, tmp_path: Path
) -> None:
    out = tmp_path / "scored"
    log = str(three_days)
    if layout == "flat":
        log = str(SCIFACT_LOG)
    elif layout == "plain":
        assert invoke("run", "--log", str(SCIFACT_LOG), "--out", str(out)).exit_code == 0
    elif layout == "by day":
        assert partitioned_run(three_days, out).exit_code == 0
        log = str(tmp_path / "by-day")
        shutil.copytree(three_days / f"dt={day(1)}", Path(log) / "day=1")
    result = invoke("run", "--log", log, "--out", str(out), *extra)
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1


def test_status_needs_a_ledger(tmp_path: Path) -> None:
    tmp_path.joinpath("empty").mkdir()
    result = invoke("status", "--out", str(tmp_path / "empty"))
    assert result.exit_code == 2
    assert "has no ledger.json: not the output of run --partition-by" in result.output
    assert "--check needs --log" in invoke("status", "--out", str(tmp_path), "--check").output


def test_span_logs_partition_alike(tmp_path: Path) -> None:
    """OpenInference spans under dt= folders: each day's outputs those of its spans alone, and
    spans.parquet partitioned beside the others."""
    spans = spans_of(scifact_slice())
    traces = sorted(spans["context.trace_id"].unique())
    for number, chosen in enumerate((traces[: len(traces) // 2], traces[len(traces) // 2 :]), 1):
        folder = tmp_path / "spans" / f"dt={day(number)}"
        folder.mkdir(parents=True)
        spans[spans["context.trace_id"].isin(chosen)].to_parquet(folder / "spans.parquet")
    trace_options = ("--log-format", "openinference")
    result = partitioned_run(tmp_path / "spans", tmp_path / "scored", *trace_options)
    assert result.exit_code == 0, result.output
    assert sorted(ledger(tmp_path / "scored")) == [day(1), day(2)]
    for number in (1, 2):
        name = f"dt={day(number)}"
        alone = invoke("run", "--log", str(tmp_path / "spans" / name), *trace_options,
                       "--out", str(tmp_path / name))  # fmt: skip
        assert alone.exit_code == 0, alone.output
        for kind in ("fused", "parents", "queries", "spans"):
            partition = tmp_path / "scored" / kind / name / "part.parquet"
            assert partition.read_bytes() == (tmp_path / name / f"{kind}.parquet").read_bytes()


# --- the 30 days, and a real kill -------------------------------------------------------


def duckscore(*args: str, cwd: Path, progress: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "duckscore", "--progress" if progress else "-q", *args],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def until(process: subprocess.Popen[str], progress: str) -> list[str]:
    """The progress lines up to the one naming `progress` (a partition about to start)."""
    assert process.stderr is not None
    said = []
    for line in process.stderr:
        said.append(line)
        if progress in line:
            break
    return said


def completed(*args: str, cwd: Path) -> str:
    process = duckscore(*args, cwd=cwd, progress=True)
    _, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    return err


@pytest.mark.slow
@pytest.mark.extended  # 28 s: make test's 15 minutes
def test_thirty_days_then_one_more_then_a_new_policy_killed_and_resumed(tmp_path: Path) -> None:
    write_days(tmp_path / "logs", 1, 30)
    run = ("run", "--log", "logs", "--partition-by", "dt", "--incremental")
    # Ctrl-C mid-way: one line saying what the output keeps, and the next run goes on from there
    first = duckscore(*run, "--out", "scored", cwd=tmp_path, progress=True)
    said = until(first, "(5/30)")
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=60)
    kept = len(ledger(tmp_path / "scored"))
    assert any("30 to compute, 0 kept" in line for line in said), said
    assert first.returncode == 130 and 0 < kept < 30, (first.returncode, err)
    plural = "s" * (kept > 1)
    assert err.strip().splitlines()[-1] == (
        f"duckscore: error: interrupted; the output keeps the {kept} partition{plural} it "
        "finished, each whole, and the rest as it was"
    )
    # killed outright while resuming: every partition old or new, the ledger says which
    second = duckscore(*run, "--out", "scored", cwd=tmp_path, progress=True)
    said = until(second, f"(3/{30 - kept})")
    second.send_signal(signal.SIGKILL)
    second.communicate(timeout=60)
    assert any(f"{30 - kept} to compute, {kept} kept" in line for line in said), said
    published = sorted(ledger(tmp_path / "scored"))
    assert kept < len(published) < 30
    for kind in DATA:
        assert sorted(p.name for p in (tmp_path / "scored" / kind).iterdir()) == [
            f"dt={value}" for value in published
        ]
    kept = len(published)
    assert f"{30 - kept} to compute, {kept} kept" in completed(
        *run, "--out", "scored", cwd=tmp_path
    )
    write_days(tmp_path / "logs", 31, 31)
    assert "1 to compute, 30 kept" in completed(*run, "--out", "scored", cwd=tmp_path)
    assert "0 to compute, 31 kept" in completed(*run, "--out", "scored", cwd=tmp_path)
    before = data_files(tmp_path / "scored")

    # a new policy: refused by --incremental, recomputed with --force and published at once, so
    # a run killed outright mid-way leaves the output whole under the old policy
    policy = ("--set", "alpha=0.5")  # all but one of the 300 best scores change
    refused = duckscore(*run, *policy, "--out", "scored", cwd=tmp_path)
    assert refused.wait(timeout=600) == 2
    killed = duckscore(*run, *policy, "--force", "--out", "scored", cwd=tmp_path, progress=True)
    said = until(killed, "(8/31)")
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    assert any("31 to compute, 0 kept" in line for line in said), said
    assert [e["policy"] for e in ledger(tmp_path / "scored").values()] == [DEFAULT_POLICY] * 31
    assert data_files(tmp_path / "scored") == before
    resumed = completed(*run, *policy, "--force", "--out", "scored", cwd=tmp_path)
    assert "31 to compute, 0 kept" in resumed
    assert len({e["policy"] for e in ledger(tmp_path / "scored").values()} - {DEFAULT_POLICY}) == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    done = 8

    # byte for byte what one uninterrupted run writes: the days around the kill, and the last
    for number in (done - 1, done, done + 1, 31):
        name = f"dt={day(number)}"
        completed(
            "run", "--log", f"logs/{name}", *policy, "--out", f"plain/{name}", cwd=tmp_path
        )  # fmt: skip
        for kind in DATA:
            suffix = "jsonl" if kind == "contract" else "parquet"
            alone = (tmp_path / "plain" / name / f"{kind}.{suffix}").read_bytes()
            assert (tmp_path / "scored" / kind / name / f"part.{suffix}").read_bytes() == alone
