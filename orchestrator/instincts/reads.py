"""One instinct's confidence as an agent reads it: the seed's penalised composite, its tier and
injection method, the three scores and the status (any status, where `top` lists the active)."""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import InputError
from ..core.render import lit
from ..core.session import Session
from .scores import render_confidence
from .workspace import Store, open_workspace


def instinct_confidence(db: Store, instinct_id: str) -> dict[str, Any] | None:
    """The instinct `instinct_id` (a UUID), or None when the store has none of that id."""
    with open_workspace(db, read_all=True) as work:
        session = Session(connection=work.con)
        if session.first_row(f"SELECT TRY_CAST({lit(instinct_id)} AS UUID)")[0] is None:  # type: ignore[index]
            raise InputError(f"instinct id {instinct_id!r}: not a UUID")
        rendered = render_confidence(work.policy)
        session.check(rendered)
        frame = session.frame(
            f"SELECT CAST(instinct_id AS VARCHAR) AS instinct_id, status, tier, injection_method, "
            f"composite, frequency_score, effectiveness_score, human_score, domain, trigger_text, "
            f"action_text FROM ({rendered.text}) "
            f"WHERE instinct_id = CAST({lit(instinct_id)} AS UUID)"
        )
    rows: list[dict[str, Any]] = json.loads(frame.to_json(orient="records", force_ascii=False))
    return rows[0] if rows else None
