"""The instinct SQL (sql/instincts/*.sql) rendered for a policy, and the pure functions that run
it on DataFrames: scores from counts, and the scores after each event."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.render import RenderedSQL, render
from ..core.session import Session
from .policy import InstinctPolicy, load_instinct_policy
from .tables import COUNTS, EVENTS, START

if TYPE_CHECKING:
    import pandas as pd


def render_scores(
    policy: InstinctPolicy, final: str = "tiered", counts: str = "instinct_counts"
) -> RenderedSQL:
    return render(
        "instincts/scores.sql", policy=policy.parameters, final=final, inputs={"counts": counts}
    )


def render_replay(
    policy: InstinctPolicy,
    final: str = "after_events",
    events: str = "instinct_events",
    start: str = "instinct_start",
) -> RenderedSQL:
    return render(
        "instincts/replay.sql",
        policy=policy.parameters,
        final=final,
        inputs={"events": events, "start": start},
    )


def render_confidence(policy: InstinctPolicy) -> RenderedSQL:
    return render(
        "instincts/confidence.sql", policy=policy.parameters, inputs={"instincts": "instincts"}
    )


def score_counts(counts: pd.DataFrame, policy: str = "instinct_v1") -> pd.DataFrame:
    """Frequency, effectiveness, human score, composite and tier of each instinct, from counts."""
    loaded = load_instinct_policy(policy)
    with Session() as session:
        frame = counts.assign(reflect_approved=counts["reflect_approved"].astype(int))
        session.open("counts", COUNTS, frame, "counts")
        session.execute(
            "CREATE OR REPLACE TEMP VIEW counts_with_flags AS SELECT * EXCLUDE (reflect_approved), "
            "reflect_approved = 1 AS reflect_approved FROM instinct_counts"
        )
        return session.frame(render_scores(loaded, counts="counts_with_flags"))


def replay_events(
    events: pd.DataFrame, policy: str = "instinct_v1", start: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The scores after each event (UPDATE_RULES, clamped per event, in event order)."""
    import pandas as pd

    loaded = load_instinct_policy(policy)
    with Session() as session:
        session.open("events", EVENTS, events, "events")
        empty_start = pd.DataFrame(
            {
                "instinct_id": pd.Series([], dtype=str),
                **{
                    c: pd.Series([], dtype=float)
                    for c in ("freq_score", "eff_score", "human_score")
                },
            }
        )
        session.open("start", START, empty_start if start is None else start, "start")
        rendered = render_replay(loaded)
        session.check(rendered)
        return session.frame(
            f"SELECT instinct_id, event_id, event_type, CAST(freq_score AS DOUBLE) AS freq_score, "
            f"CAST(eff_score AS DOUBLE) AS eff_score, CAST(human_score AS DOUBLE) AS human_score "
            f"FROM ({rendered.text})"
        )
