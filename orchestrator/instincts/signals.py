"""An application's outcome from its OutcomeSignals (seed 004: userAccepted, taskCompleted,
noErrorsIntroduced, timeSaved), when an event gives signals and no outcome. The seed records
both and gives no rule between them; a policy with `outcome_signals` (instinct_v2) does: negative
when any `negative_unless` flag is false; else positive when every `positive_if` flag is true
and timeSaved is at least `positive_min_time_saved_ms`; else neutral."""

from __future__ import annotations

from ..core.errors import InputError
from ..core.render import lit
from ..core.session import Session
from ..core.tables import OpenedInput
from .policy import SIGNAL_FLAGS, TIME_SAVED, InstinctPolicy

APPLIED = "('applied_successfully', 'applied_failed')"
BY_EVENT_TYPE = "CASE event_type WHEN 'applied_successfully' THEN 'positive' ELSE 'negative' END"
NUMBER_TYPES = "('UBIGINT', 'BIGINT', 'DOUBLE')"


def outcome_sql(policy: InstinctPolicy) -> str:
    """The outcome column of an application event: its own; else (a policy with the rule) the
    one its signals give; else the event type's (positive for a success, negative for a failure)."""
    rule = policy.outcome_signals
    if rule is None:
        return f"coalesce(outcome, {BY_EVENT_TYPE})"

    def flag(name: str) -> str:
        return f"CAST(json_extract(CAST(signals AS JSON), {lit('$.' + name)}) AS BOOLEAN)"

    saved = f"CAST(json_extract(CAST(signals AS JSON), {lit('$.' + TIME_SAVED)}) AS DOUBLE)"
    negative = " OR ".join(f"NOT {flag(n)}" for n in rule.negative_unless)
    positive = " AND ".join(flag(n) for n in rule.positive_if)
    at_least = lit(rule.positive_min_time_saved_ms)
    derived = (
        f"CASE WHEN signals IS NULL THEN NULL WHEN {negative} THEN 'negative' "
        f"WHEN {positive} AND {saved} >= {at_least} THEN 'positive' ELSE 'neutral' END"
    )
    return f"coalesce(outcome, {derived}, {BY_EVENT_TYPE})"


def check_signals(
    session: Session, policy: InstinctPolicy, opened: OpenedInput, events: str
) -> None:
    """The signals an outcome derives from hold the seed's four keys, typed: else one line
    naming the event and the key (nothing is written)."""
    if policy.outcome_signals is None:
        return
    deriving = (
        f"FROM {events} WHERE outcome IS NULL AND signals IS NOT NULL AND event_type IN {APPLIED}"
    )
    broken = session.first_row(
        f"SELECT event_id {deriving} AND NOT json_valid(signals) ORDER BY event_id LIMIT 1"
    )
    if broken:
        raise InputError(f"{opened.label}: event_id {broken[0]!r}: signals is not valid JSON")
    expected = [(name, "('BOOLEAN')", "true or false") for name in SIGNAL_FLAGS]
    expected.append((TIME_SAVED, NUMBER_TYPES, "a number of milliseconds"))
    for name, types, meaning in expected:
        wrong = session.first_row(
            f"SELECT event_id, coalesce(json_type(signals, {lit('$.' + name)}), 'missing') "
            f"{deriving} AND coalesce(json_type(signals, {lit('$.' + name)}) NOT IN {types}, TRUE) "
            "ORDER BY event_id LIMIT 1"
        )
        if wrong:
            raise InputError(
                f"{opened.label}: event_id {wrong[0]!r}: signals.{name} is {wrong[1].lower()}, "
                f"expected {meaning} (an outcome is derived from the four OutcomeSignals "
                "when the event gives no outcome)"
            )
