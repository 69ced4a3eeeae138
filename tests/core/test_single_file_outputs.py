"""Single-file outputs — `labels --out`, `eval --per-query`, `calibrate --out`, `export
annotations --out` — go through the write protocol as folders do (docs/outputs.md): an output
that is an input of its command (the same path, another spelling of it, a symlink or a hard
link), lies inside an input folder or matches an input glob is refused in one line, exit status
2, before any work and with nothing written; and a file is written in the format its name's
suffix says, or refused (issue 35, item 1: each of these exited 0 and destroyed its input).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner, Result

from duckscore.calibrate.policy_file import write_policy_document
from duckscore.cli import cli
from duckscore.core.errors import OutputError
from duckscore.core.outputs import atomic_output_file

from ..calibrate.test_calibrate import _overlapping
from ..fuse.test_traces import scifact_slice, spans_of
from ..helpers import ROOT, SCIFACT

RRF = SCIFACT / "reference_rrf_k60.parquet"
QRELS = SCIFACT / "qrels.parquet"
FAST = ("--thresholds", "precision", "--folds", "2", "--passes", "1",
        "--target-precision", "0.8")  # fmt: skip
TABLE_SUFFIXES = "(use .parquet, .pq, .csv, .tsv, .json, .jsonl, .ndjson)"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def refused(result: Result, message: str) -> None:
    """Exit status 2 and exactly one line, the message; nothing on stdout."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.stderr == f"duckscore: error: {message}\n"
    assert result.stdout == ""


def contents(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones included: a lock or staging left behind shows)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder (the current one) with a run, qrels, and the features and labels of a fast
    calibration."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(RRF, "run.parquet")
    shutil.copy(QRELS, "qrels.parquet")
    features, labels = _overlapping(lead={"good": 0.002, "ambiguous": 0.001})
    features.to_parquet("f.parquet")
    labels.to_parquet("l.parquet")
    (tmp_path / "sub").mkdir()
    return tmp_path


# How an output can name an input file: as given, by another path, a symlink, a hard link.
SPELLINGS: dict[str, Callable[[Path, str], str]] = {
    "as given": lambda work, name: name,
    "another relative path": lambda work, name: f"sub/../{name}",
    "absolute": lambda work, name: str(work / name),
    "a symlink": lambda work, name: (os.symlink(name, work / f"link-{name}"), f"link-{name}")[1],
    "a hard link": lambda work, name: (os.link(work / name, work / f"hard-{name}"), f"hard-{name}")[1],
}  # fmt: skip


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_labels_out_is_its_run(spelling: str, work: Path) -> None:
    out = SPELLINGS[spelling](work, "run.parquet")
    before = contents(work)
    result = invoke("labels", "--run", "run.parquet", "--qrels", "qrels.parquet", "--out", out)
    refused(result, f"--out {out}: is the input --run (run.parquet); write the output elsewhere")
    assert contents(work) == before


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_eval_per_query_is_its_qrels(spelling: str, work: Path) -> None:
    per_query = SPELLINGS[spelling](work, "qrels.parquet")
    before = contents(work)
    result = invoke("eval", "--run", "run.parquet", "--qrels", "qrels.parquet",
                    "--per-query", per_query)  # fmt: skip
    refused(
        result,
        f"--per-query {per_query}: is the input --qrels (qrels.parquet); write the output "
        "elsewhere",
    )
    assert contents(work) == before


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_calibrate_out_is_its_labels(spelling: str, work: Path) -> None:
    out = SPELLINGS[spelling](work, "l.parquet")
    before = contents(work)
    result = invoke("calibrate", "--features", "f.parquet", "--labels", "l.parquet",
                    "--out", out, *FAST)  # fmt: skip
    refused(result, f"--out {out}: is the input --labels (l.parquet); write the output elsewhere")
    assert contents(work) == before


def test_calibrate_out_is_checked_before_any_work(work: Path) -> None:
    """The refusal comes before the inputs are read (calibrating takes minutes on a big log)."""
    result = invoke("calibrate", "--features", "missing.parquet", "--labels", "l.parquet",
                    "--out", "l.parquet", *FAST)  # fmt: skip
    refused(
        result, "--out l.parquet: is the input --labels (l.parquet); write the output elsewhere"
    )


@pytest.mark.parametrize(
    ("option", "name"),
    [("--features", "f.parquet"), ("--base", "base.yaml")],
)
def test_calibrate_out_is_another_of_its_inputs(option: str, name: str, work: Path) -> None:
    shutil.copy(ROOT / "sql" / "score" / "policies" / "overall_v2.yaml", "base.yaml")
    before = contents(work)
    result = invoke("calibrate", "--features", "f.parquet", "--labels", "l.parquet",
                    "--base", "base.yaml", "--out", name, *FAST)  # fmt: skip
    refused(result, f"--out {name}: is the input {option} ({name}); write the output elsewhere")
    assert contents(work) == before


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `duckscore run` on trace spans: the folder `export annotations` reads."""
    folder = tmp_path_factory.mktemp("traced")
    spans_of(scifact_slice()).to_parquet(folder / "spans.parquet", index=False)
    done = invoke("run", "--log", str(folder / "spans.parquet"), "--log-format", "openinference",
                  "--out", str(folder / "scored"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    return folder / "scored"


@pytest.mark.parametrize(
    "spelling", ["contract.jsonl", "queries.parquet", "annotations.json", "a symlink", "absolute"]
)
def test_export_annotations_out_is_in_its_scored_folder(
    spelling: str, traced: Path, work: Path
) -> None:
    shutil.copytree(traced, "scored")
    out = {
        "a symlink": lambda: (os.symlink("scored/contract.jsonl", "link.jsonl"), "link.jsonl")[1],
        "absolute": lambda: str(work / "scored" / "contract.jsonl"),
    }.get(spelling, lambda: f"scored/{spelling}")()
    before = contents(work)
    result = invoke("export", "annotations", "--scored", "scored", "--out", out)
    refused(
        result, f"--out {out}: is inside the input --scored (scored); write the output elsewhere"
    )
    assert contents(work) == before


@pytest.mark.parametrize(
    ("run", "per_query", "message"),
    [
        ("runs/*.parquet", "runs/pq.parquet", "matches the input --run (runs/*.parquet)"),
        ("runs/*.parquet", "runs/run.parquet", "matches the input --run (runs/*.parquet)"),
        ("runs", "runs/pq.parquet", "is inside the input --run (runs)"),
        (
            "runs/**/*.parquet",
            "runs/deeper/pq.csv",
            "is inside the input --run (runs/**/*.parquet)",
        ),
    ],
)
def test_an_output_an_input_glob_or_folder_would_read_is_refused(
    run: str, per_query: str, message: str, work: Path
) -> None:
    (work / "runs").mkdir()
    shutil.copy(RRF, work / "runs" / "run.parquet")
    before = contents(work)
    result = invoke("eval", "--run", run, "--qrels", "qrels.parquet", "--per-query", per_query)
    refused(result, f"--per-query {per_query}: {message}; write the output elsewhere")
    assert contents(work) == before


def test_beside_a_glob_input_is_fine(work: Path) -> None:
    """Only what the glob matches is refused: a .csv beside `runs/*.parquet` is not read."""
    (work / "runs").mkdir()
    shutil.copy(RRF, work / "runs" / "run.parquet")
    result = invoke("eval", "--run", "runs/*.parquet", "--qrels", "qrels.parquet",
                    "--per-query", "runs/pq.csv")  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert len(pd.read_csv(work / "runs" / "pq.csv")) == 300


# -- the write protocol itself, for every caller -------------------------------------------------


def test_the_protocol_refuses_an_input_before_locking(tmp_path: Path) -> None:
    source = tmp_path / "in" / "run.parquet"
    source.parent.mkdir()
    source.write_bytes(b"input")
    for out, given, said in [
        (source, source.parent, "is inside the input --run"),
        (tmp_path / "in" / "new.parquet", source.parent, "is inside the input --run"),
        (source, source, "is the input --run"),
        (tmp_path / "in" / "new.parquet", tmp_path / "in" / "*.parquet", "matches the input --run"),
    ]:
        with (
            pytest.raises(OutputError, match=re.escape(f"--out {out}: {said} ({given}); write")),
            atomic_output_file(out, inputs={"--run": str(given)}) as staging,
        ):
            staging.write_bytes(b"output")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["in", "run.parquet"]
    assert source.read_bytes() == b"input"


def test_a_policy_file_never_replaces_an_input_it_records(work: Path) -> None:
    """`recalibrate` writes its policy through write_policy_document with the inputs recorded in
    the document: those are refused as `calibrate`'s are."""
    before = contents(work)
    document = {"metadata": {"inputs": {"log": "run.parquet", "labels": "l.parquet"}}}
    with pytest.raises(OutputError) as refusal:
        write_policy_document(work / "l.parquet", document)
    assert str(refusal.value) == (
        f"--out {work / 'l.parquet'}: is the input --labels (l.parquet); write the output elsewhere"
    )
    assert contents(work) == before


# -- the suffix names the format -------------------------------------------------------------------


def per_query_table(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        return pd.read_parquet(path)
    if suffix in (".csv", ".tsv"):
        return pd.read_csv(path, sep="\t" if suffix == ".tsv" else ",", dtype={"query_id": str})
    return pd.read_json(path, lines=True, dtype={"query_id": str})


@pytest.mark.parametrize(
    "name", ["pq.parquet", "pq.pq", "pq.csv", "pq.TSV", "pq.json", "pq.jsonl", "pq.ndjson"]
)
def test_eval_per_query_writes_the_format_its_suffix_names(name: str, work: Path) -> None:
    result = invoke("eval", "--run", "run.parquet", "--qrels", "qrels.parquet",
                    "--per-query", name)  # fmt: skip
    assert result.exit_code == 0, result.stderr
    head = (work / name).read_bytes()[:4]
    assert (head == b"PAR1") == name.endswith(("parquet", ".pq"))
    table = per_query_table(work / name)
    expected = pd.read_parquet(SCIFACT / "reference_per_query.parquet")
    assert len(table) == len(expected) == 300
    assert list(table.columns)[:3] == ["query_id", "n_relevant", "n_retrieved"]
    assert abs(table["ndcg@10"].mean() - 0.6604601182827838) < 1e-9


@pytest.mark.parametrize("name", ["labels.csv", "labels.json", "labels.tsv"])
def test_labels_write_the_format_their_suffix_names(name: str, work: Path) -> None:
    result = invoke("labels", "--run", "run.parquet", "--qrels", "qrels.parquet", "--out", name)
    assert result.exit_code == 0, result.stderr
    assert not (work / name).read_bytes().startswith(b"PAR1")
    table = per_query_table(work / name)
    assert list(table.columns) == [
        "query_id", "label", "top1_doc_id", "first_relevant_rank", "n_relevant"
    ]  # fmt: skip
    assert dict(table["label"].value_counts()) == {"good": 162, "ambiguous": 79, "bad": 59}


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (("eval", "--run", "run.parquet", "--qrels", "qrels.parquet", "--per-query"), "pq.txt"),
        (("eval", "--run", "run.parquet", "--qrels", "qrels.parquet", "--per-query"), "pq"),
        (("labels", "--run", "run.parquet", "--qrels", "qrels.parquet", "--out"), "labels.xlsx"),
    ],
)
def test_a_table_named_with_an_unknown_suffix_is_refused(
    command: tuple[str, ...], name: str, work: Path
) -> None:
    before = contents(work)
    result = invoke(*command, name)
    refused(result, f"{command[-1]} {name}: unknown file type {TABLE_SUFFIXES}")
    assert contents(work) == before


@pytest.mark.parametrize(
    ("command", "name", "message"),
    [
        (("export", "annotations", "--scored", "scored", "--out"), "a.parquet",
         "the output is JSON, not Parquet (use .json, .jsonl, .ndjson)"),
        (("export", "annotations", "--scored", "scored", "--out"), "a.yaml",
         "the output is JSON, not YAML (use .json, .jsonl, .ndjson)"),
        (("calibrate", "--features", "f.parquet", "--labels", "l.parquet", *FAST, "--out"),
         "policy.csv", "the output is YAML, not CSV (use .yaml, .yml)"),
    ],
)  # fmt: skip
def test_a_document_named_as_another_format_is_refused(
    command: tuple[str, ...], name: str, message: str, traced: Path, work: Path
) -> None:
    shutil.copytree(traced, "scored")
    before = contents(work)
    refused(invoke(*command, name), f"--out {name}: {message}")
    assert contents(work) == before


def test_annotations_written_as_json(traced: Path, work: Path) -> None:
    shutil.copytree(traced, "scored")
    result = invoke("export", "annotations", "--scored", "scored", "--out", "out/a.json")
    assert result.exit_code == 0, result.stderr
    assert len(json.loads((work / "out" / "a.json").read_text())["data"]) > 0


@pytest.mark.parametrize("command", ["tune", "recalibrate"])
def test_tune_and_recalibrate_out_is_their_log(command: str, tmp_path: Path) -> None:
    log = tmp_path / "log.parquet"
    shutil.copy(SCIFACT / "retrieval_log.parquet", log)
    before = log.read_bytes()
    if command == "tune":
        args = [
            "tune",
            "--log",
            str(log),
            "--qrels",
            str(SCIFACT / "qrels.parquet"),
            "--grid",
            "fusion.k=20,60",
            "--out",
            str(log),
        ]
    else:
        args = ["recalibrate", "--policy", "overall_v3", "--log", str(log), "--out", str(log)]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 2, done.output
    assert f"--out {log}: is the input --log ({log}); write the output elsewhere" in done.output
    assert log.read_bytes() == before
