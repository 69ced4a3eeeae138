"""The speedups that change output bytes are opt-in (issue 34, item 6), and each keeps what it
promises: `run --unsorted` writes the same rows in another order; the recipe option
`parent_features.rrf_sum: fixed64` sums RRF terms exactly in a 64-bit fixed point — checked
against sums of the same terms in exact rational arithmetic (fractions), written here apart from
the SQL."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from fractions import Fraction
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from duckscore.cli.app import cli
from duckscore.fusion.recipe import load_recipe, plan

from ..helpers import FIXTURES

SCIFACT_LOG = FIXTURES / "scifact" / "retrieval_log.parquet"
HYBRID = ("--recipe", "hybrid_v1", "--policy", "overall_v1")
FIXED = ("--allow-recipe-mismatch", "--set-recipe", "parent_features.rrf_sum=fixed64")
PARQUET_OUTPUTS = ("fused", "parent_features", "parents", "queries")

pytestmark = pytest.mark.slow


def run(out: Path, *options: str, log: Path = SCIFACT_LOG) -> None:
    done = CliRunner().invoke(cli, ["-q", "run", "--log", str(log), "--out", str(out), *options])
    assert done.exit_code == 0, done.output


@pytest.fixture(scope="module")
def sorted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sorted") / "out"
    run(out, *HYBRID)
    return out


def rows_differing(a: Path, b: Path) -> int:
    """Rows of one file that the other lacks, either way (multisets: duplicates count)."""
    one_way = "SELECT count(*) FROM (SELECT * FROM read_parquet(?) EXCEPT ALL SELECT * FROM read_parquet(?))"
    return sum(
        duckdb.execute(one_way, [str(x), str(y)]).fetchall()[0][0] for x, y in ((a, b), (b, a))
    )


def test_unsorted_writes_the_same_rows_and_the_same_contract(
    sorted_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "unsorted"
    run(out, *HYBRID, "--unsorted")
    for name in PARQUET_OUTPUTS:
        assert rows_differing(sorted_run / f"{name}.parquet", out / f"{name}.parquet") == 0, name
    assert (out / "contract.jsonl").read_bytes() == (sorted_run / "contract.jsonl").read_bytes()
    manifests = [json.loads((o / "manifest.json").read_text()) for o in (sorted_run, out)]
    assert [m["sorted_outputs"] for m in manifests] == [True, False]
    recorded = [(o / "sql" / "fuse_fused.sql").read_text().rstrip() for o in (sorted_run, out)]
    assert recorded[0].endswith("ORDER BY query_id, rank")
    assert not recorded[1].endswith("ORDER BY query_id, rank")


def test_unsorted_is_refused_where_it_is_not_supported(tmp_path: Path) -> None:
    for extra in (("--partition-by", "day"), ("--engine", "spark")):
        out = tmp_path / "out"
        done = CliRunner().invoke(
            cli, ["run", "--log", str(SCIFACT_LOG), "--out", str(out), "--unsorted", *extra]
        )
        assert done.exit_code == 2
        assert "--unsorted is not supported with" in done.output
        assert not out.exists()


def exact_rrf_sums(log: Path, k: float = 60.0, rank_base: int = 1) -> dict[tuple[str, str], float]:
    """Each (query, parent)'s rrf_sum as parent features define it: per source the exact sum of
    the double terms 1 / (rank + k - 1 + rank_base), rounded once to a double, then the
    sources' sums added in source name order (weights are 1 in hybrid_v1)."""
    hits = duckdb.execute(
        "SELECT query_id, parent_id, source, rank FROM read_parquet(?)", [str(log)]
    ).fetchall()
    terms: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for query, parent, source, rank in hits:
        terms[(query, parent)][source].append(1.0 / (rank + (k - 1 + rank_base)))
    sums = {}
    for key, by_source in terms.items():
        total = 0.0
        for source in sorted(by_source):
            total = total + float(sum(Fraction(t) for t in by_source[source]))
        sums[key] = total
    return sums


def rrf_sums(out: Path) -> dict[tuple[str, str], float]:
    rows = duckdb.execute(
        "SELECT query_id, parent_id, rrf_sum FROM read_parquet(?)",
        [str(out / "parent_features.parquet")],
    ).fetchall()
    return {(q, p): s for q, p, s in rows}


def test_fixed64_sums_are_exact_where_the_decimal_sum_is_not(
    sorted_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "fixed"
    run(out, *HYBRID, *FIXED)
    exact = exact_rrf_sums(SCIFACT_LOG)
    fixed, decimal = rrf_sums(out), rrf_sums(sorted_run)
    assert fixed.keys() == exact.keys() == decimal.keys()
    assert all(math.ulp(exact[k]) >= abs(fixed[k] - exact[k]) for k in exact)
    off = {name: sum(got[k] != exact[k] for k in exact) for name, got in
           (("fixed64", fixed), ("decimal", decimal))}  # fmt: skip
    # DuckDB casts the HUGEINT sum to DOUBLE correctly rounded but in rare cases (1 of 40,282
    # here); the DECIMAL(38, 24) sum rounds each term to 1e-24 first (6,993 of 40,282)
    assert off["fixed64"] <= len(exact) // 1000 < off["decimal"], off
    assert (
        json.loads((out / "manifest.json").read_text())["policy"]["parameters"]["parent_features"][
            "rrf_sum"
        ]
        == "fixed64"
    )
    # fusion reads no sum over hits: its scores and ranks are the decimal recipe's
    assert rows_differing(sorted_run / "fused.parquet", out / "fused.parquet") == 0


def test_fixed64_gives_the_same_bits_in_any_row_order(tmp_path: Path) -> None:
    shuffled = tmp_path / "shuffled.parquet"
    duckdb.execute(
        f"COPY (SELECT * FROM read_parquet(?) ORDER BY hash(item_id, source) DESC) "
        f"TO '{shuffled}' (FORMAT parquet)",
        [str(SCIFACT_LOG)],
    ).fetchall()  # a result left unread would block the shared default connection
    run(tmp_path / "a", *HYBRID, *FIXED)
    run(tmp_path / "b", *HYBRID, *FIXED, log=shuffled)
    assert rrf_sums(tmp_path / "a") == rrf_sums(tmp_path / "b")


def scale_bits(*overrides: str) -> int | None:
    recipe = load_recipe("hybrid_v1", list(overrides))
    return plan(recipe, ["bm25", "dense"], has_rank=True).rrf_scale_bits


def test_the_fixed_point_is_the_finest_that_keeps_every_term_within_2_to_the_62() -> None:
    assert scale_bits() is None  # decimal, the default
    fixed = "parent_features.rrf_sum=fixed64"
    # 1 / 61 lies in [2^-6, 2^-5): terms up to 2^-5, so 2^67 units of 2^-67
    assert scale_bits(fixed) == 67
    assert scale_bits(fixed, "fusion.rank_base=0") == 67  # 1 / 60: still below 2^-5
    two = ("fusion.k=2", "fusion.rank_base=0")  # the first rank's term: weight / 2
    assert scale_bits(fixed, *two) == 63  # 1 / 2 = 2^-1
    assert scale_bits(fixed, *two, "source_defaults.weight=3") == 61  # 3 / 2 < 2^1
    boosted = ["query_analyzer.enabled=true",
               'query_analyzer.rules=[{"match": "x", "boost": {"dense": 4.0}}]']  # fmt: skip
    assert scale_bits(fixed, *two, *boosted) == 61  # 4 / 2 = 2^1


def test_fixed64_scales_down_for_heavy_weights_without_overflow(tmp_path: Path) -> None:
    """Weights of 1e9 and k 0.5 make a term up to 1e9 / 1.5: the fixed point shrinks to 2^-32
    so that no term passes 2^62; the sums still agree with the exact ones to that resolution."""
    heavy = ("--set-recipe", "source_defaults.weight=1000000000", "--set-recipe", "fusion.k=0.5")
    out = tmp_path / "heavy"
    run(out, *HYBRID, *FIXED, *heavy)
    assert scale_bits(FIXED[-1], *heavy[1::2]) == 32
    exact = exact_rrf_sums(SCIFACT_LOG, k=0.5)
    got = rrf_sums(out)
    hits_per_parent = 64  # more than any SciFact parent has; each term is off by <= 2^-33
    assert all(abs(got[k] - 1e9 * exact[k]) <= hits_per_parent * 2.0**-33 + 1e-15 * got[k]
               for k in exact)  # fmt: skip
