"""Tests written for mutants of sql/instincts/ that survived the other tests (tests/mutants/,
issue 37): the packaged policy gives its two lowest tiers the same injection method (`none`), so
a CASE that lost the tentative tier's branch of injection_method still gave the right answer.
Here every tier has a method of its own (a policy that `extends` instinct_v1), and a composite in
every tier must get its tier's name and method (docs/instincts.md: the first tier, highest first,
whose `at_least` the composite reaches; below all, the last).

The store's score columns must keep the seed's DECIMAL(4,3) (docs/specs/004, the CREATE TABLE of
instincts and confidence_history): DECIMAL(4,4) (`3` made `4` in schema.sql) cannot hold 1.000,
and no fast test read the types back.

`top` on the edges (_composite.sql): a dimension of exactly 0.2 is not "below 0.2", so it is not
penalised, and a composite of exactly 0.2, 0.4, 0.6 or 0.8 (three equal scores, whose composite
in doubles is that score exactly, as the test checks) is in the upper tier, with its method; `<`
made `<=` and `>=` made `>` changed nothing elsewhere.

The store's `composite` column (_stored_composite.sql), read back from each backend's own table
(PostgreSQL's STORED value): the exact sum of the scores times the weights as DECIMAL(18, 9),
rounded once to DECIMAL(4,3), half away from zero (docs/instincts.md, the store). 1.000 must fit
(DECIMAL(4,4) holds less than 1), 0.43045 must give 0.430 (DECIMAL(4,4) rounds it twice, to
0.431), and a policy weight with a tenth decimal enters as its nine decimals: 0.4000000004 is
0.400000000, which makes 0.4305 a tie, 0.431 (with ten decimals the sum falls below it, 0.430).

PostgreSQL's schema is "the seed's, as written" (docs/instincts.md): its column types (every
VARCHAR size, JSONB, DECIMAL(4,3)), NOT NULLs, STORED composite, keys, CHECKs, ON DELETE CASCADE
and indexes (composite DESC, the partial one on active status) are compared with those the seed's
own CREATE statements (docs/specs/004, run verbatim in a scratch schema, less the references to
the undefined users and projects) give; test_postgres.py, which checks part of it, is not among
the mutation run's targets (tests/mutants/targets.yaml). The VARCHAR(50)
of `domain` and `source`, the two the input sets, is a limit there, which DuckDB does not
enforce: the input's check makes it one on both stores (50 characters stored, 51 refused by its
row, the store unchanged). A decay
that deletes an instinct leaves none of its applications, evidence or history, on both backends
(on PostgreSQL by the cascade; the one other test that deletes instincts, the 39-week decay, runs
on PostgreSQL only in `make test-extended`)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
import yaml

from duckscore.core.errors import InputError
from duckscore.instincts.postgres import is_postgres
from duckscore.instincts.scores import score_counts
from duckscore.instincts.store import decay, ingest, init_store, top
from duckscore.instincts.tables import VARCHAR_LENGTH
from duckscore.instincts.workspace import Store

from ..engines.warehouses import Postgres
from ..helpers import ROOT, need_module
from .conftest import new_database
from .instincts_reference import composite_confidence, load_parameters, tier_of
from .test_store import START, events, ids, new_instincts, snapshot, store

SCHEMA = ROOT / "sql" / "instincts" / "schema.sql"

TIERS = [
    {"tier": "core", "at_least": 0.8, "injection_method": "m_core"},
    {"tier": "strong", "at_least": 0.6, "injection_method": "m_strong"},
    {"tier": "moderate", "at_least": 0.4, "injection_method": "m_moderate"},
    {"tier": "tentative", "at_least": 0.2, "injection_method": "m_tentative"},
    {"tier": "deprecated", "at_least": 0.0, "injection_method": "m_deprecated"},
]


def policy_file(folder: Path, version: str, parameters: dict[str, Any]) -> str:
    """A policy `version` extending instinct_v1 with `parameters`, written into `folder`."""
    path = folder / f"{version}.yaml"
    document = {
        "instinct_policy_version": version,
        "extends": "instinct_v1",
        "parameters": parameters,
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return str(path)


def counts(n: int) -> dict[str, object]:
    """A spread of counts: observations 0..24, contradictions, applications and reviews."""
    return {
        "instinct_id": f"i{n:03d}",
        "observation_count": n % 25,
        "contradiction_count": n % 4,
        "positive_count": n % 7 % (n % 11 + 1),
        "application_count": n % 11,
        "approvals": n % 5,
        "rejections": n % 3,
        "reflect_approved": n % 6 == 0,
    }


def expected_tier(composite: float) -> tuple[str, str]:
    for t in TIERS[:-1]:
        if composite >= t["at_least"]:
            return t["tier"], t["injection_method"]
    return TIERS[-1]["tier"], TIERS[-1]["injection_method"]


def test_every_tier_gets_its_own_injection_method(tmp_path: Path) -> None:
    strong = [
        {**counts(400 + n), "observation_count": 30, "contradiction_count": 0,
         "positive_count": 300 - n, "application_count": 300, "approvals": 60 - n,
         "rejections": 0, "reflect_approved": True}
        for n in range(5)
    ]  # fmt: skip
    frame = pd.DataFrame([counts(n) for n in range(400)] + strong)
    frame = frame.astype({"reflect_approved": "bool", "instinct_id": "str"})
    out = score_counts(frame, policy_file(tmp_path, "instinct_tiers", {"tiers": TIERS}))
    got = {(r.tier, r.injection_method) for r in out.itertuples()}
    assert got == {(t["tier"], t["injection_method"]) for t in TIERS}, "a composite in every tier"
    for r in out.itertuples():
        assert (r.tier, r.injection_method) == expected_tier(r.composite), r


def test_the_store_keeps_the_seeds_score_types_and_defaults(tmp_path: Path) -> None:
    init_store(tmp_path / "store.duckdb")
    with duckdb.connect(str(tmp_path / "store.duckdb"), read_only=True) as con:
        columns = con.execute(
            "SELECT table_name, column_name, data_type, column_default FROM duckdb_columns() "
            "WHERE column_name IN ('freq_score', 'eff_score', 'human_score', 'composite', "
            "'observation_count', 'application_count', 'success_count', 'contradiction_count')"
        ).fetchall()
    types = {(table, name): kind for table, name, kind, _ in columns}
    scores = ("freq_score", "eff_score", "human_score", "composite")
    for table in ("instincts", "confidence_history"):
        assert {types[(table, name)] for name in scores} == {"DECIMAL(4,3)"}
    defaults = {name: default for table, name, _, default in columns if table == "instincts"}
    # the seed's DEFAULT 0.30, 0.50, 0.50 (instinct_v1's `initial`), 1, 0, 0, 0
    got = {
        name: duckdb.execute(f"SELECT {defaults[name]}").fetchall()[0][0]
        for name in defaults
        if name != "composite"
    }
    assert got == {
        "freq_score": 0.3, "eff_score": 0.5, "human_score": 0.5, "observation_count": 1,
        "application_count": 0, "success_count": 0, "contradiction_count": 0,
    }  # fmt: skip


SEED = load_parameters()
ROOT = Path(__file__).resolve().parents[2]


def on_store(db: Store, sql: str, rows: Sequence[tuple[str, ...]] = ()) -> list[tuple[Any, ...]]:
    """`sql` (`?` placeholders, run once per row of `rows`) on the store's own tables: the DuckDB
    file, or the PostgreSQL database itself (its STORED composite, not a workspace's copy)."""
    if is_postgres(db):
        with need_module("psycopg").connect(str(db)) as pg:
            cursor = pg.cursor()
            if rows:
                cursor.executemany(sql.replace("?", "%s"), rows)
                return []
            found: list[tuple[Any, ...]] = cursor.execute(sql).fetchall()
            return found
    with duckdb.connect(str(db)) as con:
        if rows:
            con.executemany(sql, rows)
            return []
        return con.execute(sql).fetchall()


def set_scores(db: Store, scores: Mapping[str, tuple[str, str, str]]) -> None:
    """The three scores of instincts written straight into the store (the composite is its own)."""
    on_store(
        db,
        "UPDATE instincts SET freq_score = CAST(? AS DECIMAL(4, 3)), "
        "eff_score = CAST(? AS DECIMAL(4, 3)), human_score = CAST(? AS DECIMAL(4, 3)) "
        "WHERE CAST(id AS VARCHAR) = ?",
        [(*triple, name) for name, triple in scores.items()],
    )


def store_with_scores(
    location: Callable[[], Store],
    scores: Sequence[tuple[str, str, str]],
    policy: str = "instinct_v1",
) -> tuple[Store, list[str]]:
    db = location()
    assert init_store(db, policy) == "created"
    names = ids(len(scores))
    ingest(db, new_instincts=new_instincts(names), now=START)
    set_scores(db, dict(zip(names, scores)))
    return db, names


def test_top_on_the_penalty_threshold_and_every_tier_edge(tmp_path: Path) -> None:
    threshold = ("0.300", "0.500", "0.200")
    edges = [(v, v, v) for v in ("0.200", "0.400", "0.600", "0.800")]
    db, names = store_with_scores(lambda: tmp_path / "store.duckdb", [threshold, *edges])
    floats = {
        name: (float(f), float(e), float(h)) for name, (f, e, h) in zip(names, [threshold, *edges])
    }
    expected = {name: composite_confidence(f, e, h, SEED) for name, (f, e, h) in floats.items()}
    # what the cases exercise: a weakest dimension exactly at the threshold, and the composites
    # exactly on the edges of the four upper tiers (in doubles, as the seed computes them)
    assert min(floats[names[0]]) == float(SEED["composite"]["low_dimension_below"])
    assert [expected[n] for n in names[1:]] == sorted(
        float(t["at_least"]) for t in SEED["tiers"][:-1]
    )
    rows = {r["instinct_id"]: r for r in top(db).to_dict("records")}
    for name, triple in floats.items():
        row = rows[name]
        assert (row["frequency_score"], row["effectiveness_score"], row["human_score"]) == triple
        assert (row["composite"], row["tier"], row["injection_method"]) == (
            expected[name],
            *tier_of(expected[name], SEED),
        ), triple


def stored_composite(scores: Sequence[str], weights: Sequence[Decimal], places: int = 3) -> Decimal:
    """sum(score * weight), exact, rounded half away from zero (the scores are not negative)."""
    total = sum((Decimal(s) * w for s, w in zip(scores, weights)), Decimal(0))
    return total.quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)


def stored_composites(db: Store) -> dict[str, str]:
    return dict(
        on_store(db, "SELECT CAST(id AS VARCHAR), CAST(composite AS VARCHAR) FROM instincts")
    )


def test_the_stored_composite_is_the_exact_sum_rounded_once(
    store_location: Callable[[], Store],
) -> None:
    weights = [SEED["weights"][d] for d in ("frequency", "effectiveness", "human")]
    cases = [("1.000", "1.000", "1.000"), ("0.302", "0.500", "0.499"), ("0.350", "0.500", "0.500")]
    expected = [stored_composite(c, weights) for c in cases]
    # 1.000 is beyond DECIMAL(4,4); 0.43045 rounded to four places first (0.4305) would give
    # 0.431; the docs' tie 0.4475 rounds half away from zero
    assert expected == [Decimal("1.000"), Decimal("0.430"), Decimal("0.448")]
    twice = stored_composite(cases[1], weights, places=4).quantize(Decimal("0.001"), ROUND_HALF_UP)
    assert twice == Decimal("0.431")
    db, names = store_with_scores(store_location, cases)
    assert stored_composites(db) == {n: str(e) for n, e in zip(names, expected)}


def test_policy_weights_enter_the_stored_composite_with_nine_decimals(
    store_location: Callable[[], Store], tmp_path: Path
) -> None:
    weights = {"frequency": 0.35, "effectiveness": 0.4000000004, "human": 0.2499999996}
    policy = policy_file(tmp_path, "instinct_weights", {"weights": weights})
    scores = ("0.300", "0.500", "0.502")

    def rounded(places: int) -> list[Decimal]:  # each weight's double, as DECIMAL(18, places)
        return [
            Decimal(w).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP) for w in weights.values()
        ]

    expected = stored_composite(scores, rounded(9))  # 0.105 + 0.2 + 0.1255: a tie, 0.431
    assert (expected, stored_composite(scores, rounded(10))) == (Decimal("0.431"), Decimal("0.430"))
    db, [name] = store_with_scores(store_location, [scores], policy)
    assert stored_composites(db) == {name: str(expected)}


SEED_TABLES = ["instincts", "instinct_applications", "instinct_evidence", "confidence_history"]
CATALOG = {
    "columns": (
        "SELECT c.relname, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), "
        "a.attnotnull, a.attgenerated FROM pg_attribute AS a "
        "JOIN pg_class AS c ON c.oid = a.attrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %(schema)s AND c.relname = ANY(%(tables)s) AND a.attnum > 0 "
        "AND NOT a.attisdropped ORDER BY 1, 2"
    ),
    "constraints": (
        "SELECT c.relname, o.conname, replace(pg_get_constraintdef(o.oid), %(prefix)s, '') "
        "FROM pg_constraint AS o JOIN pg_class AS c ON c.oid = o.conrelid "
        "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %(schema)s AND c.relname = ANY(%(tables)s) ORDER BY 1, 2"
    ),
    "indexes": (
        "SELECT indexname, replace(indexdef, %(prefix)s, '') FROM pg_indexes "
        "WHERE schemaname = %(schema)s AND tablename = ANY(%(tables)s) ORDER BY 1"
    ),
}


def seed_statements() -> list[str]:
    """The seed's CREATE statements (the SQL of its "数据库 Schema"), without the references to
    `users` and `projects`, which it does not define (docs/instincts.md: none on either backend)."""
    text = (ROOT / "docs/specs/004-instinct-confidence.txt").read_text(encoding="utf-8")
    block = text.split("## 数据库 Schema", 1)[1].split("```sql", 1)[1].split("```", 1)[0]
    block, dropped = re.subn(r" REFERENCES (?:users|projects)\(id\)", "", block)
    assert dropped == 2
    code = "\n".join(line.split("--", 1)[0] for line in block.splitlines())
    return [s for s in code.split(";") if s.strip()]


@pytest.mark.postgres
@pytest.mark.xdist_group("instincts-postgres")
def test_postgres_keeps_the_seeds_schema_as_written(pg_server: Postgres) -> None:
    db = new_database(pg_server)
    assert init_store(db) == "created"
    with need_module("psycopg").connect(db) as pg:
        pg.execute("CREATE SCHEMA seed")
        pg.execute("SET search_path TO seed")
        for statement in seed_statements():
            pg.execute(statement)

        def catalog(schema: str) -> dict[str, list[tuple[Any, ...]]]:
            where = {"schema": schema, "prefix": f"{schema}.", "tables": SEED_TABLES}
            return {name: pg.execute(sql, where).fetchall() for name, sql in CATALOG.items()}

        seed, store_schema = catalog("seed"), catalog("public")
    assert (len(seed["columns"]), len(seed["indexes"])) == (22 + 6 + 6 + 8, 4 + 3)  # all ran
    for part in CATALOG:
        assert store_schema[part] == seed[part], part


@pytest.mark.parametrize("column", ["domain", "source"])
def test_the_seeds_varchar_50_is_a_limit_on_both_stores(
    store_location: Callable[[], Store], column: str
) -> None:
    """PostgreSQL enforces the seed's VARCHAR(50), DuckDB would not: the input is checked, so
    both stores keep 50 characters (not bytes: 'é' and an emoji are one each) and refuse 51 in
    one line naming the row, the store unchanged."""
    assert f"{column} VARCHAR({VARCHAR_LENGTH})" in SCHEMA.read_text(encoding="utf-8")
    db = store(store_location)
    at_limit, beyond = ids(2)
    wide = "é" * 49 + "\N{GRINNING FACE}"
    ingest(db, new_instincts=new_instincts([at_limit]).assign(**{column: wide}), now=START)
    assert on_store(db, f"SELECT {column} FROM instincts") == [(wide,)]
    before = snapshot(db)
    longer = new_instincts([at_limit, beyond]).assign(**{column: ["d", "d" * 51]})
    problem = rf"row 2, id='{beyond}'.*: column '{column}' is longer than 50 characters"
    with pytest.raises(InputError, match=problem):
        ingest(db, new_instincts=longer, now=START)
    assert snapshot(db) == before


def test_a_deleted_instinct_takes_its_records_with_it(store_location: Callable[[], Store]) -> None:
    db = store(store_location)
    gone, kept = ids(2)
    ingest(db, new_instincts=new_instincts([gone, kept]), now=START)
    # gone: effectiveness 0.50 - 4 x 0.15, clamped at 0, human 0.50 - 0.30: composite
    # 0.105 + 0 + 0.05 = 0.155; kept: 0.30 / 0.63 / 0.60, composite 0.507
    rows = [(f"f{i}", gone, "applied_failed", START) for i in range(4)]
    rows += [("r", gone, "reflect_rejected", START), ("s", kept, "applied_successfully", START)]
    rows += [("a", kept, "user_accepted", START)]
    ingest(db, events(rows), now=START)
    week = START + dt.timedelta(days=8)  # both last seen 8 days before: decayed; gone deprecated
    first = decay(db, week)
    later = decay(db, week + dt.timedelta(days=31))  # gone: deprecated 31 days before, deleted
    assert [(r.decayed, r.deprecated, r.deleted) for r in (first, later)] == [(2, 1, 0), (1, 0, 1)]
    for table in ("instinct_applications", "instinct_evidence", "confidence_history"):
        owners = on_store(db, f"SELECT DISTINCT CAST(instinct_id AS VARCHAR) FROM {table}")
        assert owners == [(kept,)], table
