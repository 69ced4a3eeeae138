"""The lifecycle's last two statuses (seed 004's `evolved` and `archived`), where the seed names
them but gives no trigger: `evolve` moves a mature instinct (the policy's `lifecycle.evolve`
rule) to `evolved`; `archive` retires any instinct, kept with its history and never deleted; the
weekly job archives an instinct evolved `lifecycle.archive_evolved_after_days` before. Every
transition leaves a `confidence_history` row whose reason is the new status."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from ..core.errors import InputError, PolicyError
from ..core.render import lit
from ..core.session import Session
from . import postgres
from .history import history_rows, now_literal
from .policy import Evolution, InstinctPolicy, Lifecycle
from .scores import render_confidence
from .workspace import Store, open_workspace

REFLECT_EVENTS = "('reflect_approved', 'reflect_rejected')"


def lifecycle_rules(policy: InstinctPolicy) -> Lifecycle:
    """The policy's lifecycle rules; a policy without them (instinct_v1) cannot evolve."""
    rules = policy.lifecycle
    if rules is None:
        raise PolicyError(
            f"policy {policy.version} has no lifecycle rules (instinct_v2 has them: "
            "create the store with `duckscore instincts init --policy instinct_v2`)"
        )
    return rules


def evolve(
    db: Store,
    ids: Sequence[str] = (),
    eligible: bool = False,
    now: dt.datetime | None = None,
) -> list[str]:
    """Move to `evolved` the instincts `ids` (each must meet the rule: one that does not is
    refused, and nothing changes), or with `eligible` every active instinct that meets it.
    The ids evolved, in id order."""
    if bool(ids) == eligible:
        raise InputError("evolve: give instinct ids or `eligible`, not both or neither")
    with open_workspace(db) as work:
        rule = lifecycle_rules(work.policy).evolve
        session = Session(connection=work.con)
        at = now_literal(now)

        def apply() -> list[str]:
            _check_evolution(session, work.policy, rule)
            if ids:
                _named(session, ids)
                _refuse_immature(session)
                chosen = "SELECT id FROM named"
            else:
                chosen = "SELECT id FROM evolution WHERE failed IS NULL"
            return _move(session, chosen, "evolved", at)

        def lend(loan: postgres.Loan) -> None:
            loan.pg.execute("LOCK TABLE instincts IN SHARE ROW EXCLUSIVE MODE")
            loan.lend("instincts")
            loan.lend("instinct_evidence", f"event_type IN {REFLECT_EVENTS}")
            loan.lend_nothing(["confidence_history"])

        return work.write(apply, lend)


def archive(db: Store, ids: Sequence[str], now: dt.datetime | None = None) -> dict[str, int]:
    """Move the instincts `ids` to `archived` (from any status); one already archived is
    counted, not changed. Needs no policy rule: it is the user's decision."""
    if not ids:
        raise InputError("archive: give at least one instinct id")
    with open_workspace(db) as work:
        session = Session(connection=work.con)
        at = now_literal(now)

        def apply() -> dict[str, int]:
            _named(session, ids)
            moved = _move(session, "SELECT id FROM named", "archived", at)
            return {"archived": len(moved), "already_archived": len(set(ids)) - len(moved)}

        def lend(loan: postgres.Loan) -> None:
            loan.lend("instincts", "id::text = ANY(%s)", [sorted(set(ids))], "FOR UPDATE")
            loan.lend_nothing(["confidence_history"])

        return work.write(apply, lend)


def archive_evolved(session: Session, policy: InstinctPolicy, at: str) -> int | None:
    """The weekly job's last step: evolved instincts not updated for
    `lifecycle.archive_evolved_after_days` become archived (None: the policy has no rule)."""
    if policy.lifecycle is None:
        return None
    days = policy.lifecycle.archive_evolved_after_days
    return len(
        _move(
            session,
            f"SELECT id FROM instincts WHERE status = 'evolved' "
            f"AND updated_at < {at} - INTERVAL {days} DAY",
            "archived",
            at,
        )
    )


def _named(session: Session, ids: Sequence[str]) -> None:
    """The temp table `named` of the ids given, each a UUID of an instinct in the store."""
    for given in ids:
        if session.first_row(f"SELECT TRY_CAST({lit(given)} AS UUID)")[0] is None:  # type: ignore[index]
            raise InputError(f"--id {given!r}: not a UUID")
    listed = ", ".join(f"(CAST({lit(given)} AS UUID))" for given in ids)
    session.execute(
        f"CREATE OR REPLACE TEMP TABLE named AS SELECT DISTINCT id FROM (VALUES {listed}) AS t(id)"
    )
    unknown = session.first_row(
        "SELECT CAST(id AS VARCHAR) FROM named WHERE id NOT IN (SELECT id FROM instincts) "
        "ORDER BY id LIMIT 1"
    )
    if unknown:
        raise InputError(f"--id {unknown[0]!r}: no such instinct in the store")


def _check_evolution(session: Session, policy: InstinctPolicy, rule: Evolution) -> None:
    """The temp table `evolution`: each instinct and the first condition of the evolve rule it
    fails (`failed`, NULL when it may evolve)."""
    confidence = render_confidence(policy)
    session.check(confidence)
    reviewed = (
        "coalesce(r.last_reflect = 'reflect_approved', FALSE)"
        if rule.require_reflect_approved
        else "TRUE"
    )
    minimum, successes = rule.min_composite, rule.min_successes
    below_composite = lit(f" is below lifecycle.evolve.min_composite {minimum:g}")
    below_successes = lit(
        f" successful applications, below lifecycle.evolve.min_successes {successes}"
    )
    unreviewed = lit(
        "its latest /reflect review is not an approval (lifecycle.evolve.require_reflect_approved)"
    )
    session.execute(
        f"""CREATE OR REPLACE TEMP TABLE evolution AS
        SELECT c.instinct_id AS id, CASE
            WHEN c.status <> 'active' THEN 'its status is ' || c.status || ', not active'
            WHEN c.composite < {lit(minimum)}
                THEN 'composite ' || round(c.composite, 4) || {below_composite}
            WHEN i.success_count < {successes} THEN i.success_count || {below_successes}
            WHEN NOT {reviewed} THEN {unreviewed}
            END AS failed
        FROM ({confidence.text}) AS c
        JOIN instincts AS i ON i.id = c.instinct_id
        LEFT JOIN (
            SELECT instinct_id, arg_max(event_type, observed_at) AS last_reflect
            FROM instinct_evidence WHERE event_type IN {REFLECT_EVENTS} GROUP BY instinct_id
        ) AS r ON r.instinct_id = c.instinct_id""",
        rendered=confidence,
    )


def _refuse_immature(session: Session) -> None:
    refused = session.first_row(
        "SELECT CAST(e.id AS VARCHAR), e.failed FROM evolution AS e JOIN named USING (id) "
        "WHERE e.failed IS NOT NULL ORDER BY e.id LIMIT 1"
    )
    if refused:
        raise InputError(f"--id {refused[0]!r}: cannot evolve: {refused[1]}")


def _move(session: Session, chosen: str, status: str, at: str) -> list[str]:
    """Set `status` on the instincts `chosen` selects that are not in it already; a history row
    (reason: the status) each. The ids moved, in id order."""
    session.execute(
        f"CREATE OR REPLACE TEMP TABLE moving AS SELECT id FROM instincts "
        f"WHERE id IN ({chosen}) AND status <> {lit(status)}"
    )
    session.execute(
        f"UPDATE instincts SET status = {lit(status)}, updated_at = {at} "
        "WHERE id IN (SELECT id FROM moving)"
    )
    history_rows(session, "moving", status, at)
    return [
        row[0]
        for row in session.con.execute(
            "SELECT CAST(id AS VARCHAR) FROM moving ORDER BY id"
        ).fetchall()
    ]
