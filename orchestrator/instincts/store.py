"""`duckscore instincts`: seed 004's composite confidence of learned behaviours, kept in a store
with the seed's tables, its update rules, the weekly decay job and the tiers an agent reads.

The store is a DuckDB database file (one writer process) or a PostgreSQL database (many; see
instincts/postgres.py). The store functions (`init_store`, `ingest`, `recompute`, `decay`, `top`)
run the policy's SQL (instincts/scores.py) in DuckDB — on the file, or on a workspace holding the
PostgreSQL rows the command needs — inside one transaction, so a failure or an interruption
leaves the store as it was.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ..core.errors import DuckscoreError, InputError, OptionError
from ..core.policy import canonical_json
from ..core.render import ident, lit, render, render_expression
from ..core.session import Session
from ..core.tables import OpenedInput
from . import postgres
from .history import HISTORY_INSERT, history_rows, now_literal
from .lifecycle import archive_evolved
from .policy import InstinctPolicy, load_instinct_policy
from .scores import render_confidence, render_replay, render_scores
from .signals import check_signals, outcome_sql
from .tables import EVENTS, NEW_INSTINCTS
from .workspace import (
    Store,
    has_table,
    open_store,
    open_workspace,
    policy_from_record,
    shown,
    store_value,
    stored_record,
    transaction,
)

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = "1"
# a store named like a data file would be read as one by every other tool (and by `--db` users)
DATA_FILE_SUFFIXES = {".parquet", ".pq", ".csv", ".tsv", ".json", ".jsonl", ".ndjson"}
NIL_SESSION = "00000000-0000-0000-0000-000000000000"  # the seed's applications need a session id


def init_store(db: Store, policy: str = "instinct_v1") -> str:
    """Create (or migrate) the store; records the schema version and the policy it uses."""
    loaded = load_instinct_policy(policy)
    if postgres.is_postgres(db):
        return _init_postgres(str(db), canonical_json(loaded.as_record()), loaded.parameters)
    db = Path(db)
    if db.suffix.lower() in DATA_FILE_SUFFIXES:
        raise InputError(
            f"--db {db}: the store is a DuckDB database, not a {db.suffix} data file; give it a "
            "name such as instincts.duckdb"
        )
    ddl = render("instincts/schema.sql", policy=loaded.parameters)
    db.parent.mkdir(parents=True, exist_ok=True)
    with open_store(db, create=True) as con, transaction(con):
        found = store_value(con, "schema_version") if has_table(con, "duckscore_store") else None
        if found is not None and found != SCHEMA_VERSION:
            raise DuckscoreError(
                f"--db {db}: schema version {found}, this duckscore knows {SCHEMA_VERSION}"
            )
        session = Session(connection=con)
        for statement in ddl.statements:
            session.execute(statement, rendered=ddl)
        stored_policy = store_value(con, "policy")
        if stored_policy is not None and stored_policy != canonical_json(loaded.as_record()):
            raise DuckscoreError(
                f"--db {db}: the store was created with another policy; "
                f"its composite column is bound to it"
            )
        con.execute(
            "INSERT OR REPLACE INTO duckscore_store VALUES ('schema_version', ?), ('policy', ?)",
            [SCHEMA_VERSION, canonical_json(loaded.as_record())],
        )
    return "created" if found is None else "up to date"


def migrate_store(source: Path, target: str) -> dict[str, int]:
    """Copy the DuckDB store `source` into a new PostgreSQL store `target` (created, or empty),
    its policy, rows and history unchanged, in one transaction; the rows copied per table."""
    if not postgres.is_postgres(target):
        raise InputError(f"--to {target}: expected a postgresql:// URL")
    with open_store(source, read_only=True) as con:
        record = stored_record(con, f"--from {source}")
        _init_postgres(target, record, policy_from_record(record, str(source)).parameters)
        tables = [t for t in postgres.TABLE_KEYS if t != "duckscore_store"]
        with postgres.connect(target) as pg:

            def attempt() -> dict[str, int]:
                pg.execute("SELECT pg_advisory_xact_lock(%s)", [postgres.INIT_LOCK])
                filled = [
                    t
                    for t in tables
                    if pg.execute(f"SELECT EXISTS (SELECT 1 FROM {ident(t)})").fetchone()[0]
                ]
                if filled:
                    raise InputError(
                        f"--to {shown(target)}: the store already holds {filled[0]}; "
                        "migrate copies into a new, empty store"
                    )
                loan = postgres.Loan(pg, con)
                loan.lend_nothing(tables)
                loan.write_back()
                return {t: _count(con, t) for t in tables}

            return postgres.retrying(pg, attempt)


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    row = con.execute(f"SELECT count(*) FROM {ident(table)}").fetchone()
    return int(row[0]) if row else 0


def _init_postgres(dsn: str, record: str, parameters: Mapping[str, Any]) -> str:
    """The seed's schema by migration (under an advisory lock, so two inits cannot race), then
    the schema version and the policy, as on a DuckDB store."""
    with postgres.connect(dsn) as pg:

        def attempt() -> str:
            pg.execute("SELECT pg_advisory_xact_lock(%s)", [postgres.INIT_LOCK])
            applied = postgres.migrate_schema(pg, parameters)
            row = pg.execute("SELECT value FROM duckscore_store WHERE key = 'policy'").fetchone()
            if row is not None and row[0] != record:
                raise DuckscoreError(
                    f"--db {postgres.describe(dsn)}: the store was created with another policy; "
                    "its composite column is bound to it"
                )
            pg.execute(
                "INSERT INTO duckscore_store VALUES ('schema_version', %s), ('policy', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                [SCHEMA_VERSION, record],
            )
            return "created" if applied and applied[0].version == 1 else "up to date"

        return postgres.retrying(pg, attempt)


FUTURE_TOLERANCE = dt.timedelta(days=1)  # producers' clocks drift


def _horizon(now: dt.datetime | None) -> dt.datetime:
    """The latest time an event may carry: a day past the clock, or past a later `now`."""
    clock = dt.datetime.now(dt.UTC)
    return max(clock, (now or clock).astimezone(dt.UTC)) + FUTURE_TOLERANCE


def ingest(
    db: Store,
    events: Any | None = None,
    new_instincts: Any | None = None,
    now: dt.datetime | None = None,
) -> dict[str, int]:
    """Add instincts and apply events (UPDATE_RULES) in one transaction; event ids already
    ingested are skipped, so re-running an ingest changes nothing."""
    with open_workspace(db) as work:
        at = now_literal(now)
        session = Session(connection=work.con)
        added = (
            None
            if new_instincts is None
            else session.open("instincts", NEW_INSTINCTS, new_instincts, "--instincts")
        )
        opened = None if events is None else session.open("events", EVENTS, events, "--events")

        def apply() -> dict[str, int]:
            counts = {"instincts_added": 0, "events_applied": 0, "events_skipped": 0}
            if added is not None:
                counts["instincts_added"] = _add_instincts(session, added, at)
            if opened is not None:
                counts.update(_apply_events(session, work.policy, opened, at, _horizon(now)))
            return counts

        def lend(loan: postgres.Loan) -> None:
            ids = [
                f"SELECT TRY_CAST({ident(column)} AS UUID) FROM {ident(table.contract.name)}"
                for table, column in ((added, "id"), (opened, "instinct_id"))
                if table is not None
            ]
            touched = _texts(
                session,
                f"SELECT DISTINCT CAST(u AS VARCHAR) FROM ({' UNION '.join(ids)}) AS t(u) "
                "WHERE u IS NOT NULL",
            )
            loan.lend("instincts", "id::text = ANY(%s)", [touched], "FOR UPDATE")
            seen = (
                _texts(session, "SELECT DISTINCT event_id FROM instinct_events") if opened else []
            )
            loan.lend("ingested_events", "event_id = ANY(%s)", [seen])
            loan.lend_nothing(APPENDED)

        return work.write(apply, lend)


APPENDED = ("confidence_history", "instinct_applications", "instinct_evidence")


def _texts(session: Session, sql: str) -> list[str]:
    return [row[0] for row in session.con.execute(sql).fetchall()]


def _check_uuids(session: Session, opened: OpenedInput, column: str) -> None:
    bad = session.first_row(
        f"SELECT {ident(column)} FROM {ident(opened.contract.name)} "
        f"WHERE TRY_CAST({ident(column)} AS UUID) IS NULL AND {ident(column)} IS NOT NULL LIMIT 1"
    )
    if bad:
        raise InputError(f"{opened.label}: column {column!r} holds {bad[0]!r}, not a UUID")


def _add_instincts(session: Session, opened: OpenedInput, at: str) -> int:
    for column in ("id", "user_id", "project_id"):
        _check_uuids(session, opened, column)
    clash = session.first_row(
        "SELECT n.id FROM new_instincts AS n JOIN instincts AS i ON i.id = CAST(n.id AS UUID) LIMIT 1"
    )
    if clash:
        raise InputError(f"{opened.label}: instinct {clash[0]!r} is already in the store")
    session.execute(f"""INSERT INTO instincts (id, trigger_text, action_text, domain, user_id, project_id, source,
                    first_seen, last_seen, created_at, updated_at)
                    SELECT CAST(id AS UUID), trigger_text, action_text, domain, CAST(user_id AS UUID),
                           CAST(project_id AS UUID), coalesce(source, 'observation'), {at}, {at}, {at}, {at}
                    FROM new_instincts""")
    return opened.rows


def _apply_events(
    session: Session, policy: InstinctPolicy, opened: OpenedInput, at: str, horizon: dt.datetime
) -> dict[str, int]:
    _check_uuids(session, opened, "instinct_id")
    _check_uuids(session, opened, "session_id")
    session.execute(
        "CREATE OR REPLACE TEMP TABLE fresh_events AS SELECT e.* FROM instinct_events AS e "
        "ANTI JOIN ingested_events AS done ON done.event_id = e.event_id"
    )
    fresh = session.first_row("SELECT count(*) FROM fresh_events")[0]  # type: ignore[index]
    check_signals(session, policy, opened, "fresh_events")
    unknown = session.first_row(
        "SELECT instinct_id FROM fresh_events WHERE CAST(instinct_id AS UUID) "
        "NOT IN (SELECT id FROM instincts) LIMIT 1"
    )
    if unknown:
        raise InputError(f"{opened.label}: instinct_id {unknown[0]!r} is not in the store")
    latest = now_literal(horizon)
    future = session.first_row(
        f"SELECT event_id, CAST(occurred_at AS VARCHAR), CAST({latest} AS VARCHAR) "
        f"FROM fresh_events WHERE occurred_at > {latest} "
        "ORDER BY occurred_at DESC, event_id LIMIT 1"
    )
    if future:
        event_id, occurred, limit = future
        raise InputError(
            f"{opened.label}: event_id {event_id!r} occurred at {occurred}, in the future (later "
            f"than {limit} UTC, a day past the clock or --now): an instinct seen in the future "
            "would not decay until then (fix the event's time)"
        )
    session.execute(
        "CREATE OR REPLACE TEMP VIEW instinct_start AS SELECT CAST(id AS VARCHAR) AS instinct_id, "
        "freq_score, eff_score, human_score FROM instincts"
    )
    session.create("replayed", render_replay(policy, events="fresh_events"))
    composite = render_expression(  # the store's composite column, as schema.sql declares it
        "{% from 'instincts/_stored_composite.sql' import stored_composite %}"
        "{{ stored_composite(weights) }}",
        weights=policy.weights,
    )
    session.execute(
        HISTORY_INSERT + f"SELECT CAST(instinct_id AS UUID), freq_score, eff_score, human_score, "
        f"{composite}, event_type, occurred_at FROM replayed ORDER BY instinct_id, step"
    )
    session.execute(f"""
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
    session_id = f"coalesce(CAST(session_id AS UUID), CAST({lit(NIL_SESSION)} AS UUID))"
    session.execute(f"""INSERT INTO instinct_applications (instinct_id, session_id, outcome, signals, applied_at)
                    SELECT CAST(instinct_id AS UUID), {session_id},
                           {outcome_sql(policy)},
                           CAST(coalesce(signals, '{{}}') AS JSON), occurred_at
                    FROM fresh_events WHERE event_type IN ('applied_successfully', 'applied_failed')
                    ORDER BY occurred_at, event_id""")
    session.execute("""INSERT INTO instinct_evidence (instinct_id, event_type, description, session_id, observed_at)
                   SELECT CAST(instinct_id AS UUID), event_type, coalesce(description, event_type),
                          CAST(session_id AS UUID), occurred_at
                   FROM fresh_events WHERE event_type NOT IN ('applied_successfully', 'applied_failed')
                   ORDER BY occurred_at, event_id""")
    session.execute(f"INSERT INTO ingested_events SELECT event_id, {at} FROM fresh_events")
    return {"events_applied": fresh, "events_skipped": opened.rows - fresh}


def recompute(db: Store, now: dt.datetime | None = None) -> dict[str, int]:
    """Overwrite the three scores with their values from the counts (frequency bins, Wilson,
    the human loop); a history row for every instinct whose scores change."""
    with open_workspace(db) as work:
        policy = work.policy
        at = now_literal(now)
        session = Session(connection=work.con)
        session.execute("""
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
        session.check(rendered)

        def apply() -> int:
            session.execute(
                f"CREATE OR REPLACE TEMP TABLE recomputed AS SELECT CAST(instinct_id AS UUID) AS id, "
                f"CAST(frequency_score AS DECIMAL(4, 3)) AS freq_score, "
                f"CAST(effectiveness_score AS DECIMAL(4, 3)) AS eff_score, "
                f"CAST(human_score AS DECIMAL(4, 3)) AS human_score FROM ({rendered.text})",
                rendered=rendered,
            )
            session.execute(
                "CREATE OR REPLACE TEMP TABLE changed AS SELECT r.* FROM recomputed AS r JOIN instincts AS i "
                "ON i.id = r.id WHERE (r.freq_score, r.eff_score, r.human_score) "
                "IS DISTINCT FROM (i.freq_score, i.eff_score, i.human_score)"
            )
            session.execute(
                f"UPDATE instincts AS i SET freq_score = c.freq_score, eff_score = c.eff_score, "
                f"human_score = c.human_score, updated_at = {at} FROM changed AS c WHERE i.id = c.id"
            )
            return history_rows(session, "changed", "recompute", at)

        def lend(loan: postgres.Loan) -> None:
            loan.pg.execute("LOCK TABLE instincts IN SHARE ROW EXCLUSIVE MODE")
            for table in ("instincts", "instinct_applications", "instinct_evidence"):
                loan.lend(table)
            loan.lend_nothing(["confidence_history"])

        changed = work.write(apply, lend)
        total = session.first_row("SELECT count(*) FROM instincts")[0]  # type: ignore[index]
        return {"instincts": total, "changed": changed}


@dataclass(frozen=True)
class DecayResult:
    week_start: dt.date
    already_ran: bool
    decayed: int
    deprecated: int
    deleted: int
    archived: int | None = None  # None: the policy has no lifecycle rules (instinct_v1)


def decay(db: Store, now: dt.datetime | None = None) -> DecayResult:
    """The seed's weekly job, once per ISO week of `now`: decay the inactive, deprecate the weak,
    delete the long deprecated (with their applications, evidence and history: the seed's
    ON DELETE CASCADE), then (a policy with lifecycle rules) archive the long evolved. One
    transaction; a second run in the same week changes nothing. On
    PostgreSQL it holds an advisory lock: two schedulers started together apply it once."""
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    week_start = (moment - dt.timedelta(days=moment.weekday())).date()
    at = now_literal(moment)
    with open_workspace(db) as work:
        d = work.policy.decay
        f, e, h = work.policy.weekly_decay
        session = Session(connection=work.con)

        def apply() -> DecayResult:
            if session.first_row(
                f"SELECT 1 FROM decay_runs WHERE week_start = {lit(week_start.isoformat())}::DATE"
            ):
                return DecayResult(week_start, True, 0, 0, 0)
            session.execute(
                f"CREATE OR REPLACE TEMP TABLE decayed AS SELECT id FROM instincts WHERE status = 'active' "
                f"AND last_seen < {at} - INTERVAL {int(d.inactive_days)} DAY"
            )
            session.execute(f"""UPDATE instincts SET
                    freq_score = greatest(0, freq_score + CAST({lit(f)} AS DECIMAL(4, 3))),
                    eff_score = greatest(0, eff_score + CAST({lit(e)} AS DECIMAL(4, 3))),
                    human_score = greatest(0, human_score + CAST({lit(h)} AS DECIMAL(4, 3))),
                    updated_at = {at}
                WHERE id IN (SELECT id FROM decayed)""")
            decayed = history_rows(session, "decayed", "weekly_decay", at)
            session.execute(
                f"CREATE OR REPLACE TEMP TABLE deprecated AS SELECT id FROM instincts WHERE status = 'active' "
                f"AND composite < CAST({lit(d.deprecate_below)} AS DECIMAL(4, 3))"
            )
            session.execute(
                f"UPDATE instincts SET status = 'deprecated', updated_at = {at} "
                f"WHERE id IN (SELECT id FROM deprecated)"
            )
            deprecated = history_rows(session, "deprecated", "deprecated", at)
            session.execute(
                f"CREATE OR REPLACE TEMP TABLE deleted AS SELECT id FROM instincts WHERE status = 'deprecated' "
                f"AND updated_at < {at} - INTERVAL {int(d.delete_after_days)} DAY"
            )
            for child in ("instinct_applications", "instinct_evidence", "confidence_history"):
                session.execute(
                    f"DELETE FROM {child} WHERE instinct_id IN (SELECT id FROM deleted)"
                )
            deleted = session.first_row(
                "DELETE FROM instincts WHERE id IN (SELECT id FROM deleted)"
            )
            archived = archive_evolved(session, work.policy, at)
            result = DecayResult(
                week_start, False, decayed, deprecated, int(deleted[0]) if deleted else 0, archived
            )
            session.execute(
                "INSERT INTO decay_runs VALUES (?, CAST(? AS TIMESTAMP), ?, ?, ?)",
                params=[
                    week_start,
                    moment.replace(tzinfo=None),
                    result.decayed,
                    result.deprecated,
                    result.deleted,
                ],
            )
            return result

        def lend(loan: postgres.Loan) -> None:
            loan.pg.execute("SELECT pg_advisory_xact_lock(%s)", [postgres.DECAY_LOCK])
            loan.pg.execute("LOCK TABLE instincts IN SHARE ROW EXCLUSIVE MODE")
            loan.lend("instincts")
            loan.lend("decay_runs")
            loan.lend_nothing(APPENDED)

        return work.write(apply, lend)


def top(db: Store, tier: str | None = None, limit: int = 20) -> pd.DataFrame:
    """Active instincts by the seed's (penalised) composite, highest first, with tier and
    injection method: what an agent injects."""
    with open_workspace(db, read_all=True) as work:
        tiers = [t.tier for t in work.policy.tiers]
        if tier is not None and tier not in tiers:
            raise OptionError(
                f"--tier {tier!r}: not a tier of policy {work.policy.version} "
                f"(its tiers: {', '.join(tiers)})"
            )
        rendered = render_confidence(work.policy)
        session = Session(connection=work.con)
        session.check(rendered)
        where = "status = 'active'" + (f" AND tier = {lit(tier)}" if tier else "")
        return session.frame(
            f"SELECT CAST(instinct_id AS VARCHAR) AS instinct_id, tier, injection_method, composite, "
            f"frequency_score, effectiveness_score, human_score, domain, trigger_text, action_text "
            f"FROM ({rendered.text}) WHERE {where} "
            f"ORDER BY composite DESC NULLS LAST, instinct_id LIMIT {int(limit)}"
        )
