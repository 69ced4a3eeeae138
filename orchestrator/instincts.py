"""`duckscore instincts`: seed 004's composite confidence of learned behaviours, kept in a DuckDB
store with the seed's tables, its update rules, the weekly decay job and the tiers an agent reads.

Pure functions (`score_counts`, `replay_events`) run the policy's SQL on DataFrames; the store
functions (`init_store`, `ingest`, `recompute`, `decay`, `top`) run it inside one transaction on
the database file, so a failure or an interruption leaves the store as it was.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from .engine import connect
from .errors import DuckscoreError, InputError, PolicyError
from .inputs import Column, OpenedInput, TableContract, open_input, schema_of
from .policy import (ListOf, Number, Policy, PolicyKind, Text, canonical_json, load_policy,
                     policy_from_parameters)
from .render import RenderedSQL, ident, lit, render
from .runner import execute, first_row
from .sqlcheck import check_sql

SCHEMA_VERSION = "1"
UNIT = Number(0.0, 1.0)
DIMENSIONS = ("frequency", "effectiveness", "human")
TRIGGERS = ("pattern_observed_again", "applied_successfully", "user_accepted", "reflect_approved",
            "causal_link_confirmed", "pattern_contradicted", "applied_failed", "user_corrected",
            "reflect_rejected", "weekly_decay")
NIL_SESSION = "00000000-0000-0000-0000-000000000000"  # the seed's applications need a session id


@dataclass(frozen=True)
class Deltas:
    """An UPDATE_RULES entry: [frequency, effectiveness, human] deltas."""

    def check(self, key: str, value: Any) -> Any:
        if not isinstance(value, list) or len(value) != 3:
            raise PolicyError(f"{key}: expected [frequency, effectiveness, human] deltas")
        return [Number(-1.0, 1.0).check(f"{key}[{i}]", v) for i, v in enumerate(value)]


def _ordered(p: dict[str, Any]) -> None:
    bins = [b["at_most"] for b in p["frequency"]["bins"]]
    if not bins or any(a >= b for a, b in zip(bins, bins[1:])):
        raise PolicyError("parameters.frequency.bins: at_most must strictly increase")
    tiers = [t["at_least"] for t in p["tiers"]]
    if any(a <= b for a, b in zip(tiers, tiers[1:])) or tiers[-1] != 0:
        raise PolicyError("parameters.tiers: at_least must strictly decrease down to 0")
    if abs(sum(p["weights"].values()) - 1.0) > 1e-9:
        raise PolicyError("parameters.weights must sum to 1")
    missing = sorted(set(TRIGGERS) - set(p["update_rules"]))
    if missing:
        raise PolicyError(f"parameters.update_rules: missing {', '.join(missing)}")


INSTINCT_POLICY = PolicyKind(
    capability="instincts",
    version_key="instinct_policy_version",
    spec={
        "weights": {d: UNIT for d in DIMENSIONS},
        "frequency": {"bins": ListOf({"at_most": Number(0.0, integer=True), "base": UNIT}),
                      "above": UNIT, "contradiction_penalty": UNIT},
        "effectiveness": {"z": Number(0.0, 10.0, lo_open=True), "no_applications": UNIT},
        "human": {"prior": UNIT, "learning_rate": Number(0.0, 1.0, lo_open=True), "reflect_approved": UNIT},
        "composite": {"low_dimension_below": UNIT, "low_dimension_factor": UNIT},
        "tiers": ListOf({"tier": Text(), "at_least": UNIT, "injection_method": Text()}),
        "initial": {d: UNIT for d in DIMENSIONS},
        "update_rules": {t: Deltas() for t in TRIGGERS},
        "decay": {"inactive_days": Number(0.0, integer=True), "deprecate_below": UNIT,
                  "delete_after_days": Number(0.0, integer=True)},
    },
    cross_checks=(_ordered,),
)

COUNTS = TableContract(
    name="instinct_counts",
    columns=(Column("instinct_id", "id"), Column("observation_count", "count", min=0),
             Column("contradiction_count", "count", min=0), Column("positive_count", "count", min=0),
             Column("application_count", "count", min=0), Column("approvals", "count", min=0),
             Column("rejections", "count", min=0), Column("reflect_approved", "number", min=0, max=1)),
    key=("instinct_id",),
    allow_empty=True,
)

EVENTS = TableContract(
    name="instinct_events",
    columns=(Column("event_id", "id"), Column("instinct_id", "id"),
             Column("event_type", "text", choices=TRIGGERS), Column("occurred_at", "time"),
             Column("session_id", "id", required=False),
             Column("outcome", "text", required=False, choices=("positive", "negative", "neutral")),
             Column("description", "text", required=False), Column("signals", "text", required=False)),
    key=("event_id",),
    allow_empty=True,
)

START = TableContract(
    name="instinct_start",
    columns=(Column("instinct_id", "id"), Column("freq_score", "number", min=0, max=1),
             Column("eff_score", "number", min=0, max=1), Column("human_score", "number", min=0, max=1)),
    key=("instinct_id",),
    allow_empty=True,
)

NEW_INSTINCTS = TableContract(
    name="new_instincts",
    columns=(Column("id", "id"), Column("trigger_text", "text"), Column("action_text", "text"),
             Column("domain", "text"), Column("user_id", "id"), Column("project_id", "id", required=False),
             Column("source", "text", required=False)),
    key=("id",),
)


# ---- pure functions -----------------------------------------------------------------------

def render_scores(policy: Policy, final: str = "tiered", counts: str = "instinct_counts") -> RenderedSQL:
    return render("instincts/scores.sql", policy=policy.parameters, final=final,
                  inputs={"counts": counts})


def render_replay(policy: Policy, final: str = "after_events", events: str = "instinct_events",
                  start: str = "instinct_start") -> RenderedSQL:
    return render("instincts/replay.sql", policy=policy.parameters, final=final,
                  inputs={"events": events, "start": start})


def render_confidence(policy: Policy) -> RenderedSQL:
    return render("instincts/confidence.sql", policy=policy.parameters, inputs={"instincts": "instincts"})


def score_counts(counts: pd.DataFrame, policy: str = "instinct_v1") -> pd.DataFrame:
    """Frequency, effectiveness, human score, composite and tier of each instinct, from counts."""
    loaded = load_policy(INSTINCT_POLICY, policy)
    con = connect()
    frame = counts.assign(reflect_approved=counts["reflect_approved"].astype(int))
    open_input(con, COUNTS, frame, "counts")
    con.execute("CREATE OR REPLACE TEMP VIEW counts_with_flags AS SELECT * EXCLUDE (reflect_approved), "
                "reflect_approved = 1 AS reflect_approved FROM instinct_counts")
    rendered = render_scores(loaded, counts="counts_with_flags")
    check_sql(rendered, {"counts_with_flags": schema_of(con, "counts_with_flags")})
    return con.execute(rendered.text).df()


def replay_events(events: pd.DataFrame, policy: str = "instinct_v1",
                  start: pd.DataFrame | None = None) -> pd.DataFrame:
    """The scores after each event (UPDATE_RULES, clamped per event, in event order)."""
    loaded = load_policy(INSTINCT_POLICY, policy)
    con = connect()
    open_input(con, EVENTS, events, "events")
    empty_start = pd.DataFrame({"instinct_id": pd.Series([], dtype=str),
                                **{c: pd.Series([], dtype=float) for c in ("freq_score", "eff_score", "human_score")}})
    open_input(con, START, empty_start if start is None else start, "start")
    rendered = render_replay(loaded)
    check_sql(rendered, {"instinct_events": schema_of(con, "instinct_events"),
                         "instinct_start": schema_of(con, "instinct_start")})
    frame = con.execute(f"SELECT instinct_id, event_id, event_type, CAST(freq_score AS DOUBLE) AS freq_score, "
                        f"CAST(eff_score AS DOUBLE) AS eff_score, CAST(human_score AS DOUBLE) AS human_score "
                        f"FROM ({rendered.text})").df()
    return frame


# ---- the store ----------------------------------------------------------------------------

@contextmanager
def open_store(db: Path, create: bool = False, wait_seconds: float = 10.0) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the store file. Another process holding it: wait up to `wait_seconds`,
    then one clear error; the store is never opened twice for writing."""
    if not create and not db.is_file():
        raise InputError(f"--db {db}: no such store (create it with `duckscore instincts init --db {db}`)")
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            con = duckdb.connect(str(db))
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise InputError(f"--db {db}: cannot open: {str(exc).splitlines()[0]}") from None
            if time.monotonic() >= deadline:
                holder = str(exc).split("(PID", 1)[1].split(")")[0].strip() if "(PID" in str(exc) else "?"
                raise DuckscoreError(f"--db {db}: the store is in use by another process (PID {holder}); "
                                     f"waited {wait_seconds:g} s") from None
            time.sleep(0.2)
    try:
        con.execute("SET TimeZone = 'UTC'")
        yield con
    finally:
        con.close()


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def init_store(db: Path, policy: str = "instinct_v1") -> str:
    """Create (or migrate) the store; records the schema version and the policy it uses."""
    loaded = load_policy(INSTINCT_POLICY, policy)
    ddl = render("instincts/schema.sql", policy=loaded.parameters)
    db.parent.mkdir(parents=True, exist_ok=True)
    with open_store(db, create=True) as con, transaction(con):
        found = _store_value(con, "schema_version") if _has_table(con, "duckscore_store") else None
        if found is not None and found != SCHEMA_VERSION:
            raise DuckscoreError(f"--db {db}: schema version {found}, this duckscore knows {SCHEMA_VERSION}")
        for statement in (s for s in ddl.text.split(";") if s.strip()):
            execute(con, statement, ddl)
        stored_policy = _store_value(con, "policy")
        if stored_policy is not None and stored_policy != canonical_json(loaded.as_record()):
            raise DuckscoreError(f"--db {db}: the store was created with another policy; "
                                 f"its composite column is bound to it")
        con.execute("INSERT OR REPLACE INTO duckscore_store VALUES ('schema_version', ?), ('policy', ?)",
                    [SCHEMA_VERSION, canonical_json(loaded.as_record())])
    return "created" if found is None else "up to date"


def store_policy(con: duckdb.DuckDBPyConnection, db: Path) -> Policy:
    raw = _store_value(con, "policy") if _has_table(con, "duckscore_store") else None
    if raw is None:
        raise InputError(f"--db {db}: not a duckscore instincts store (run `duckscore instincts init`)")
    record = json.loads(raw)
    return policy_from_parameters(INSTINCT_POLICY, record["instinct_policy_version"], record["parameters"],
                                  source=f"store {db}")


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = first_row(con, f"SELECT count(*) FROM duckdb_tables() WHERE table_name = {lit(name)}")
    return bool(row and row[0])


def _store_value(con: duckdb.DuckDBPyConnection, key: str) -> str | None:
    row = first_row(con, f"SELECT value FROM duckscore_store WHERE key = {lit(key)}")
    return row[0] if row else None


def _now_literal(now: dt.datetime | None) -> str:
    moment = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc).replace(tzinfo=None)
    return f"CAST({lit(moment.isoformat(sep=' '))} AS TIMESTAMP)"


HISTORY_INSERT = ("INSERT INTO confidence_history (instinct_id, freq_score, eff_score, human_score, composite, "
                  "reason, recorded_at) ")


def ingest(db: Path, events: Any | None = None, new_instincts: Any | None = None,
           now: dt.datetime | None = None) -> dict[str, int]:
    """Add instincts and apply events (UPDATE_RULES) in one transaction; event ids already
    ingested are skipped, so re-running an ingest changes nothing."""
    with open_store(db) as con:
        policy = store_policy(con, db)
        at = _now_literal(now)
        counts = {"instincts_added": 0, "events_applied": 0, "events_skipped": 0}
        with transaction(con):
            if new_instincts is not None:
                counts["instincts_added"] = _add_instincts(con, open_input(con, NEW_INSTINCTS, new_instincts, "--instincts"), at)
            if events is not None:
                opened = open_input(con, EVENTS, events, "--events")
                counts.update(_apply_events(con, policy, opened, at))
        return counts


def _check_uuids(con: duckdb.DuckDBPyConnection, opened: OpenedInput, column: str) -> None:
    bad = first_row(con, f"SELECT {ident(column)} FROM {ident(opened.contract.name)} "
                         f"WHERE TRY_CAST({ident(column)} AS UUID) IS NULL AND {ident(column)} IS NOT NULL LIMIT 1")
    if bad:
        raise InputError(f"{opened.label}: column {column!r} holds {bad[0]!r}, not a UUID")


def _add_instincts(con: duckdb.DuckDBPyConnection, opened: OpenedInput, at: str) -> int:
    for column in ("id", "user_id", "project_id"):
        _check_uuids(con, opened, column)
    clash = first_row(con, "SELECT n.id FROM new_instincts AS n JOIN instincts AS i ON i.id = CAST(n.id AS UUID) LIMIT 1")
    if clash:
        raise InputError(f"{opened.label}: instinct {clash[0]!r} is already in the store")
    con.execute(f"""INSERT INTO instincts (id, trigger_text, action_text, domain, user_id, project_id, source,
                    first_seen, last_seen, created_at, updated_at)
                    SELECT CAST(id AS UUID), trigger_text, action_text, domain, CAST(user_id AS UUID),
                           CAST(project_id AS UUID), coalesce(source, 'observation'), {at}, {at}, {at}, {at}
                    FROM new_instincts""")
    return opened.rows


def _apply_events(con: duckdb.DuckDBPyConnection, policy: Policy, opened: OpenedInput, at: str) -> dict[str, int]:
    _check_uuids(con, opened, "instinct_id")
    _check_uuids(con, opened, "session_id")
    con.execute("CREATE OR REPLACE TEMP TABLE fresh_events AS SELECT e.* FROM instinct_events AS e "
                "ANTI JOIN ingested_events AS done ON done.event_id = e.event_id")
    fresh = first_row(con, "SELECT count(*) FROM fresh_events")[0]  # type: ignore[index]
    unknown = first_row(con, "SELECT instinct_id FROM fresh_events WHERE CAST(instinct_id AS UUID) "
                             "NOT IN (SELECT id FROM instincts) LIMIT 1")
    if unknown:
        raise InputError(f"{opened.label}: instinct_id {unknown[0]!r} is not in the store")
    con.execute("CREATE OR REPLACE TEMP VIEW instinct_start AS SELECT CAST(id AS VARCHAR) AS instinct_id, "
                "freq_score, eff_score, human_score FROM instincts")
    replay = render_replay(policy, events="fresh_events")
    check_sql(replay, {"fresh_events": schema_of(con, "fresh_events"),
                       "instinct_start": schema_of(con, "instinct_start")})
    execute(con, f"CREATE OR REPLACE TEMP TABLE replayed AS {replay.text}", replay)
    w = policy.parameters["weights"]
    composite = (f"CAST(freq_score * {lit(w['frequency'])} + eff_score * {lit(w['effectiveness'])} "
                 f"+ human_score * {lit(w['human'])} AS DECIMAL(4, 3))")
    con.execute(HISTORY_INSERT + f"SELECT CAST(instinct_id AS UUID), freq_score, eff_score, human_score, "
                f"{composite}, event_type, occurred_at FROM replayed ORDER BY instinct_id, step")
    con.execute(f"""
        UPDATE instincts AS i SET
            freq_score = f.freq_score, eff_score = f.eff_score, human_score = f.human_score,
            observation_count = i.observation_count + f.observed,
            contradiction_count = i.contradiction_count + f.contradicted,
            application_count = i.application_count + f.applied,
            success_count = i.success_count + f.succeeded,
            last_seen = CASE WHEN f.last_observed IS NULL THEN i.last_seen ELSE greatest(i.last_seen, f.last_observed) END,
            last_applied = CASE WHEN f.last_applied IS NULL THEN i.last_applied ELSE greatest(coalesce(i.last_applied, f.last_applied), f.last_applied) END,
            last_verified = CASE WHEN f.last_verified IS NULL THEN i.last_verified ELSE greatest(coalesce(i.last_verified, f.last_verified), f.last_verified) END,
            updated_at = {at}
        FROM (
            SELECT
                CAST(instinct_id AS UUID) AS id,
                arg_max(freq_score, step) AS freq_score, arg_max(eff_score, step) AS eff_score,
                arg_max(human_score, step) AS human_score,
                count(*) FILTER (WHERE event_type = 'pattern_observed_again') AS observed,
                count(*) FILTER (WHERE event_type = 'pattern_contradicted') AS contradicted,
                count(*) FILTER (WHERE event_type IN ('applied_successfully', 'applied_failed')) AS applied,
                count(*) FILTER (WHERE event_type = 'applied_successfully') AS succeeded,
                max(occurred_at) FILTER (WHERE event_type = 'pattern_observed_again') AS last_observed,
                max(occurred_at) FILTER (WHERE event_type IN ('applied_successfully', 'applied_failed')) AS last_applied,
                max(occurred_at) FILTER (WHERE event_type IN ('reflect_approved', 'reflect_rejected')) AS last_verified
            FROM replayed GROUP BY instinct_id
        ) AS f
        WHERE i.id = f.id""")
    session = f"coalesce(CAST(session_id AS UUID), CAST({lit(NIL_SESSION)} AS UUID))"
    con.execute(f"""INSERT INTO instinct_applications (instinct_id, session_id, outcome, signals, applied_at)
                    SELECT CAST(instinct_id AS UUID), {session},
                           coalesce(outcome, CASE event_type WHEN 'applied_successfully' THEN 'positive' ELSE 'negative' END),
                           CAST(coalesce(signals, '{{}}') AS JSON), occurred_at
                    FROM fresh_events WHERE event_type IN ('applied_successfully', 'applied_failed')
                    ORDER BY occurred_at, event_id""")
    con.execute("""INSERT INTO instinct_evidence (instinct_id, event_type, description, session_id, observed_at)
                   SELECT CAST(instinct_id AS UUID), event_type, coalesce(description, event_type),
                          CAST(session_id AS UUID), occurred_at
                   FROM fresh_events WHERE event_type NOT IN ('applied_successfully', 'applied_failed')
                   ORDER BY occurred_at, event_id""")
    con.execute(f"INSERT INTO ingested_events SELECT event_id, {at} FROM fresh_events")
    return {"events_applied": fresh, "events_skipped": opened.rows - fresh}


def recompute(db: Path, now: dt.datetime | None = None) -> dict[str, int]:
    """Overwrite the three scores with their values from the counts (frequency bins, Wilson,
    the human loop); a history row for every instinct whose scores change."""
    with open_store(db) as con:
        policy = store_policy(con, db)
        at = _now_literal(now)
        con.execute("""
            CREATE OR REPLACE TEMP VIEW instinct_counts AS
            SELECT
                CAST(i.id AS VARCHAR) AS instinct_id,
                CAST(i.observation_count AS BIGINT) AS observation_count,
                CAST(i.contradiction_count AS BIGINT) AS contradiction_count,
                coalesce(a.positive, 0) AS positive_count,
                coalesce(a.total, 0) AS application_count,
                coalesce(e.approvals, 0) AS approvals,
                coalesce(e.rejections, 0) AS rejections,
                coalesce(e.last_reflect = 'reflect_approved', FALSE) AS reflect_approved
            FROM instincts AS i
            LEFT JOIN (SELECT instinct_id, count(*) FILTER (WHERE outcome = 'positive') AS positive,
                              count(*) AS total
                       FROM instinct_applications GROUP BY instinct_id) AS a ON a.instinct_id = i.id
            LEFT JOIN (SELECT instinct_id,
                              count(*) FILTER (WHERE event_type = 'user_accepted') AS approvals,
                              count(*) FILTER (WHERE event_type = 'user_corrected') AS rejections,
                              arg_max(event_type, observed_at) FILTER (WHERE event_type IN ('reflect_approved', 'reflect_rejected')) AS last_reflect
                       FROM instinct_evidence GROUP BY instinct_id) AS e ON e.instinct_id = i.id""")
        rendered = render_scores(policy)
        check_sql(rendered, {"instinct_counts": schema_of(con, "instinct_counts")})
        with transaction(con):
            execute(con, f"CREATE OR REPLACE TEMP TABLE recomputed AS SELECT CAST(instinct_id AS UUID) AS id, "
                         f"CAST(frequency_score AS DECIMAL(4, 3)) AS freq_score, "
                         f"CAST(effectiveness_score AS DECIMAL(4, 3)) AS eff_score, "
                         f"CAST(human_score AS DECIMAL(4, 3)) AS human_score FROM ({rendered.text})", rendered)
            con.execute("CREATE OR REPLACE TEMP TABLE changed AS SELECT r.* FROM recomputed AS r JOIN instincts AS i "
                        "ON i.id = r.id WHERE (r.freq_score, r.eff_score, r.human_score) "
                        "IS DISTINCT FROM (i.freq_score, i.eff_score, i.human_score)")
            con.execute(f"UPDATE instincts AS i SET freq_score = c.freq_score, eff_score = c.eff_score, "
                        f"human_score = c.human_score, updated_at = {at} FROM changed AS c WHERE i.id = c.id")
            changed = _history(con, "changed", "recompute", at)
        total = first_row(con, "SELECT count(*) FROM instincts")[0]  # type: ignore[index]
        return {"instincts": total, "changed": changed}


def _history(con: duckdb.DuckDBPyConnection, ids_table: str, reason: str, at: str) -> int:
    """A confidence_history row, with the scores as they are now, for every id in `ids_table`."""
    row = first_row(con, HISTORY_INSERT + f"SELECT i.id, i.freq_score, i.eff_score, i.human_score, i.composite, "
                         f"{lit(reason)}, {at} FROM instincts AS i WHERE i.id IN (SELECT id FROM {ident(ids_table)}) "
                         f"ORDER BY i.id")
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class DecayResult:
    week_start: dt.date
    already_ran: bool
    decayed: int
    deprecated: int
    deleted: int


def decay(db: Path, now: dt.datetime | None = None) -> DecayResult:
    """The seed's weekly job, once per ISO week of `now`: decay the inactive, deprecate the weak,
    delete the long deprecated (with their applications, evidence and history: the seed's
    ON DELETE CASCADE). One transaction; a second run in the same week changes nothing."""
    moment = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    week_start = (moment - dt.timedelta(days=moment.weekday())).date()
    at = _now_literal(moment)
    with open_store(db) as con:
        policy = store_policy(con, db)
        d = policy.parameters["decay"]
        f, e, h = policy.parameters["update_rules"]["weekly_decay"]
        with transaction(con):
            if first_row(con, f"SELECT 1 FROM decay_runs WHERE week_start = {lit(week_start.isoformat())}::DATE"):
                return DecayResult(week_start, True, 0, 0, 0)
            con.execute(f"CREATE OR REPLACE TEMP TABLE decayed AS SELECT id FROM instincts WHERE status = 'active' "
                        f"AND last_seen < {at} - INTERVAL {int(d['inactive_days'])} DAY")
            con.execute(f"""UPDATE instincts SET
                    freq_score = greatest(0, freq_score + CAST({lit(f)} AS DECIMAL(4, 3))),
                    eff_score = greatest(0, eff_score + CAST({lit(e)} AS DECIMAL(4, 3))),
                    human_score = greatest(0, human_score + CAST({lit(h)} AS DECIMAL(4, 3))),
                    updated_at = {at}
                WHERE id IN (SELECT id FROM decayed)""")
            decayed = _history(con, "decayed", "weekly_decay", at)
            con.execute(f"CREATE OR REPLACE TEMP TABLE deprecated AS SELECT id FROM instincts WHERE status = 'active' "
                        f"AND composite < CAST({lit(d['deprecate_below'])} AS DECIMAL(4, 3))")
            con.execute(f"UPDATE instincts SET status = 'deprecated', updated_at = {at} "
                        f"WHERE id IN (SELECT id FROM deprecated)")
            deprecated = _history(con, "deprecated", "deprecated", at)
            con.execute(f"CREATE OR REPLACE TEMP TABLE deleted AS SELECT id FROM instincts WHERE status = 'deprecated' "
                        f"AND updated_at < {at} - INTERVAL {int(d['delete_after_days'])} DAY")
            for child in ("instinct_applications", "instinct_evidence", "confidence_history"):
                con.execute(f"DELETE FROM {child} WHERE instinct_id IN (SELECT id FROM deleted)")
            deleted = first_row(con, "DELETE FROM instincts WHERE id IN (SELECT id FROM deleted)")
            result = DecayResult(week_start, False, decayed, deprecated, int(deleted[0]) if deleted else 0)
            con.execute("INSERT INTO decay_runs VALUES (?, CAST(? AS TIMESTAMP), ?, ?, ?)",
                        [week_start, moment.replace(tzinfo=None), result.decayed, result.deprecated, result.deleted])
        return result


def top(db: Path, tier: str | None = None, limit: int = 20) -> pd.DataFrame:
    """Active instincts by the seed's (penalised) composite, highest first, with tier and
    injection method: what an agent injects."""
    with open_store(db) as con:
        policy = store_policy(con, db)
        rendered = render_confidence(policy)
        check_sql(rendered, {"instincts": schema_of(con, "instincts")})
        where = "status = 'active'" + (f" AND tier = {lit(tier)}" if tier else "")
        return con.execute(f"SELECT CAST(instinct_id AS VARCHAR) AS instinct_id, tier, injection_method, composite, "
                           f"frequency_score, effectiveness_score, human_score, domain, trigger_text, action_text "
                           f"FROM ({rendered.text}) WHERE {where} "
                           f"ORDER BY composite DESC NULLS LAST, instinct_id LIMIT {int(limit)}").df()
