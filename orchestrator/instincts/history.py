"""What every instinct command that writes shares: the time it runs at, as SQL, and the
`confidence_history` rows of the instincts it changed."""

from __future__ import annotations

import datetime as dt

from ..core.render import ident, lit
from ..core.session import Session

HISTORY_INSERT = (
    "INSERT INTO confidence_history (instinct_id, freq_score, eff_score, human_score, composite, "
    "reason, recorded_at) "
)


def now_literal(now: dt.datetime | None) -> str:
    moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).replace(tzinfo=None)
    return f"CAST({lit(moment.isoformat(sep=' '))} AS TIMESTAMP)"


def history_rows(session: Session, ids_table: str, reason: str, at: str) -> int:
    """A confidence_history row, with the scores as they are now, for every id in `ids_table`."""
    row = session.first_row(
        HISTORY_INSERT + f"SELECT i.id, i.freq_score, i.eff_score, i.human_score, i.composite, "
        f"{lit(reason)}, {at} FROM instincts AS i WHERE i.id IN (SELECT id FROM {ident(ids_table)}) "
        f"ORDER BY i.id"
    )
    return int(row[0]) if row else 0
