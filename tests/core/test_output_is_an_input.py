"""An output folder that is an input is named as such before any input is read (issue 47 §4:
`run --log scored --out scored`, an earlier output given as the log, was reported as a folder
that "mixes file types"); the input stays as it was."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import duckscore as ds
from duckscore.cli import cli
from duckscore.core.errors import OutputError

from ..cli.test_success_lines import LOG
from ..helpers import FIXTURES

OVERWRITE = "the output would overwrite it; write the output elsewhere"
REPLACE = "the output would replace it; write the output elsewhere"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", *args])


def digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def scored(tmp_path: Path) -> Path:
    """An earlier run's output (Parquet, JSON Lines, JSON and SQL files side by side)."""
    (tmp_path / "log.csv").write_text(LOG, encoding="utf-8")
    done = invoke("run", "--log", str(tmp_path / "log.csv"), "--out", str(tmp_path / "scored"))
    assert done.exit_code == 0, done.stderr
    return tmp_path / "scored"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("run", "--log", "scored"), f"--out scored: is the input --log (scored): {OVERWRITE}"),
        (("fuse", "--log", "scored"), f"--out scored: is the input --log (scored): {OVERWRITE}"),
        (("score", "--features", "scored"),
         f"--out scored: is the input --features (scored): {OVERWRITE}"),
        (("run", "--log", "scored/fused.parquet"),
         f"--out scored: holds the input --log (scored/fused.parquet): {REPLACE}"),
        (("run", "--log", "scored/*.parquet"),
         f"--out scored: holds the input --log (scored/*.parquet): {REPLACE}"),
        (("run", "--log", "log.csv", "--queries", "scored/queries.parquet"),
         f"--out scored: holds the input --queries (scored/queries.parquet): {REPLACE}"),
        (("run", "--log", "scored", "--log-format", "openinference"),
         f"--out scored: is the input --log (scored): {OVERWRITE}"),
    ],
)  # fmt: skip
def test_an_output_given_as_the_input_is_named_so(
    scored: Path, args: tuple[str, ...], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(scored.parent)
    before = digest(scored)
    done = invoke(*args, "--out", "scored")
    assert (done.exit_code, done.stderr) == (2, f"duckscore: error: {message}\n")
    assert digest(scored) == before


def test_a_file_given_as_log_and_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("log.csv").write_text(LOG, encoding="utf-8")
    done = invoke("run", "--log", "log.csv", "--out", "log.csv")
    assert (
        done.stderr
        == f"duckscore: error: --out log.csv: is the input --log (log.csv): {OVERWRITE}\n"
    )
    assert Path("log.csv").read_text(encoding="utf-8") == LOG


def test_answers_bids_and_the_python_api_alike(scored: Path, tmp_path: Path) -> None:
    answers = tmp_path / "answers"
    answers.mkdir()
    for name in ("answers.csv", "citations.csv", "chunks.csv"):
        (answers / name).write_bytes((FIXTURES / "answers" / name).read_bytes())
    done = invoke("answers", "--answers", str(answers / "answers.csv"),
                  "--citations", str(answers / "citations.csv"),
                  "--chunks", str(answers / "chunks.csv"), "--out", str(answers))  # fmt: skip
    assert done.exit_code == 2
    assert f"holds the input --answers ({answers / 'answers.csv'}): {REPLACE}" in done.stderr
    tender = FIXTURES / "bids" / "tender"
    done = invoke("bids", "--input", str(tender), "--out", str(tender / "out"))
    assert done.exit_code == 2 and f"is inside the input --input ({tender})" in done.stderr
    assert not (tender / "out").exists()
    with pytest.raises(OutputError, match=r": is the input --log \(.*scored\): the output would"):
        ds.run(str(scored), out=str(scored))


def test_a_partitioned_run_into_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    day = Path("logs/dt=2024-01-01")
    day.mkdir(parents=True)
    (day / "log.csv").write_text(LOG, encoding="utf-8")
    for out, message in (
        ("logs", f"--out logs: is the input --log (logs): {OVERWRITE}"),
        ("logs/scored", "--out logs/scored: is inside the input --log (logs); write the output "
                        "elsewhere"),
    ):  # fmt: skip
        done = invoke("run", "--log", "logs", "--out", out, "--partition-by", "dt")
        assert (done.exit_code, done.stderr) == (2, f"duckscore: error: {message}\n")
    assert sorted(str(p) for p in Path("logs").rglob("*")) == [str(day), str(day / "log.csv")]
