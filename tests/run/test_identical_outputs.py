"""The speed work changes no number: `duckscore run` writes the same contract, byte for byte, and
the same fused scores and ranks as before it.

The digests below were taken from the outputs of commit 12de7f5 (before issue 20's reshaping),
run by that commit's own code on the same inputs, not by the code under test: the SciFact log
with two recipe/policy pairs, and the benchmark's synthetic log (seed 7) at 50k rows. A change
that moves a single bit of a score, a rank, a flag or the contract's JSON fails here.
`--no-explain` must give the very same numbers: it only leaves the explanations NULL.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from benchmarks.synthetic_log import generate
from duckscore.cli.app import cli

from ..helpers import FIXTURES

SCIFACT_LOG = FIXTURES / "scifact" / "retrieval_log.parquet"
# sha256 of the ordered (query_id, item_id, fused_score, rank, n_sources) lines of fused.parquet
FUSED_DIGEST = (
    "SELECT sha256(string_agg(concat_ws('|', query_id, item_id, fused_score, rank, n_sources), "
    "chr(10) ORDER BY query_id, rank)) FROM read_parquet(?)"
)
CASES = {
    "scifact-hybrid": (
        ("--recipe", "hybrid_v1", "--policy", "overall_v1"),
        "172f7a4d50afc7b9a841067b1c75e73c1e1cdfab29e5fc6bf34728b007f6424e",
        "8b0a49399bca3ee76d97ae7c95d1a2926a56a209e2e35057d82ad7a6da50f485",
    ),
    "scifact-canonical": (
        ("--recipe", "canonical_rrf", "--policy", "overall_v2"),
        "3c2ec41d7d4d37f1c068916da601a70296202a6ef0c5cbe134db1c971023b9cf",
        "342e62176762f43ccf27e4f923950ffa6c7284a2fa03759585b9a3902b3781fd",
    ),
    "synthetic-50k": (
        ("--recipe", "hybrid_v1", "--policy", "overall_v1"),
        "b8ad6d49e035e3bddc05b062606f9c5362b8f2b30cd46d4126764ae8ccdbc33d",
        "507a2b9378ef5d33ef495b5356c31e8e524891746085ccdd11be71976ac917de",
    ),
}


@pytest.fixture(scope="module")
def synthetic_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = tmp_path_factory.mktemp("synthetic") / "log.parquet"
    assert generate(str(log), 50_000) == 50_673
    return log


def run_digests(log: Path, out: Path, options: tuple[str, ...]) -> tuple[str, str]:
    args = ["-q", "run", "--log", str(log), "--out", str(out), *options]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == 0, done.output
    contract = hashlib.sha256((out / "contract.jsonl").read_bytes()).hexdigest()
    row = duckdb.connect().execute(FUSED_DIGEST, [str(out / "fused.parquet")]).fetchone()
    assert row is not None
    return contract, row[0]


@pytest.mark.parametrize("explain", ["--explain", "--no-explain"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_are_those_before_the_speed_work(
    case: str, explain: str, synthetic_log: Path, tmp_path: Path
) -> None:
    options, contract, fused = CASES[case]
    log = synthetic_log if case.startswith("synthetic") else SCIFACT_LOG
    assert run_digests(log, tmp_path / "out", (*options, explain)) == (contract, fused)


def test_no_explain_leaves_only_the_explanations_null(tmp_path: Path) -> None:
    outs = {}
    for flag in ("--explain", "--no-explain"):
        outs[flag] = tmp_path / flag.strip("-")
        args = ["-q", "fuse", "--log", str(SCIFACT_LOG), "--out", str(outs[flag]), flag]
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 0, done.output
    con = duckdb.connect()
    explained, bare = (str(outs[f] / "fused.parquet") for f in ("--explain", "--no-explain"))
    assert (
        con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [explained]).fetchall()
        == con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [bare]).fetchall()
    )
    counts = con.execute(
        "SELECT count(*), count(contributions), count(best_provenance) FROM read_parquet(?)",
        [bare],
    ).fetchone()
    assert counts == (40282, 0, 0)
    same = con.execute(
        "SELECT count(*) FROM read_parquet(?) AS e JOIN read_parquet(?) AS b "
        "USING (query_id, item_id) WHERE e.fused_score = b.fused_score AND e.rank = b.rank "
        "AND e.n_sources = b.n_sources AND e.contributions IS NOT NULL",
        [explained, bare],
    ).fetchone()
    assert same == (40282,)
    manifests = [(outs[f] / "manifest.json").read_text() for f in ("--explain", "--no-explain")]
    assert '"explanations": true' in manifests[0] and '"explanations": false' in manifests[1]
    assert (outs["--explain"] / "parent_features.parquet").read_bytes() == (
        outs["--no-explain"] / "parent_features.parquet"
    ).read_bytes()


def test_no_explain_is_refused_on_spark(tmp_path: Path) -> None:
    args = ["run", "--log", str(SCIFACT_LOG), "--out", str(tmp_path / "o"), "--engine", "spark"]
    done = CliRunner().invoke(cli, [*args, "--no-explain"])
    assert done.exit_code == 2
    assert "--no-explain is not supported with --engine spark" in done.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("case", ["scifact-hybrid", "synthetic-50k"])
def test_memory_bounded_runs_write_the_same_outputs(
    case: str, synthetic_log: Path, tmp_path: Path
) -> None:
    """Under --memory-limit fusion and parent features each group the hits (no kept aggregate:
    fuse/stages.py keeps_source_parents) and count block types in three levels (no mask); every
    output file is the same as without a limit."""
    options, contract, fused = CASES[case]
    log = synthetic_log if case.startswith("synthetic") else SCIFACT_LOG
    unbounded, bounded = tmp_path / "unbounded", tmp_path / "bounded"
    assert run_digests(log, unbounded, options) == (contract, fused)
    assert run_digests(log, bounded, (*options, "--memory-limit", "2GB")) == (contract, fused)
    for name in ("fused.parquet", "parent_features.parquet", "parents.parquet", "queries.parquet"):
        rows = "SELECT * FROM read_parquet(?, file_row_number := true)"
        differ = duckdb.execute(
            f"SELECT count(*) FROM (({rows}) EXCEPT ALL ({rows}))",
            [str(unbounded / name), str(bounded / name)],
        ).fetchone()
        assert differ == (0,), name
    kept = "fuse_source_parents"
    assert kept in (unbounded / "sql" / "fuse_fused.sql").read_text()
    assert kept not in (bounded / "sql" / "fuse_fused.sql").read_text()
    # and the block-type mask only without a limit (with it 100M rows at 2 GB ran out of memory)
    mask = "bit_count("
    assert mask in (unbounded / "sql" / "fuse_parent_features.sql").read_text()
    assert mask not in (bounded / "sql" / "fuse_parent_features.sql").read_text()


def test_the_id_columns_are_required_in_every_parquet_output(tmp_path: Path) -> None:
    """The values above are not the files: a change that keeps every value but writes an id
    column as nullable (a decode by a join, say) changes what readers see in the schema. Every
    id a run writes is never NULL, and its Parquet files say so (REQUIRED)."""
    import pyarrow.parquet as pq

    out = tmp_path / "out"
    assert (
        CliRunner()
        .invoke(cli, ["-q", "run", "--log", str(SCIFACT_LOG), "--out", str(out)])
        .exit_code
        == 0
    )
    ids = {"query_id", "item_id", "parent_id", "best_parent_id"}
    found = {
        file.name: {
            field.name: field.nullable for field in pq.read_schema(file) if field.name in ids
        }
        for file in sorted(out.glob("*.parquet"))
    }
    assert found == {
        "fused.parquet": {"query_id": False, "item_id": False},
        "parent_features.parquet": {"query_id": False, "parent_id": False},
        "parents.parquet": {"query_id": False, "parent_id": False},
        "queries.parquet": {"query_id": False, "best_parent_id": False},
    }
