"""The answers SQL (sql/answers/*.sql) rendered for a policy: answers.sql scores every answer in
named stages, contract.sql writes the contract rows."""

from __future__ import annotations

import math
from typing import Any

from ..core.render import RenderedSQL, render
from .policy import (
    BAND_LISTS,
    LEXICONS,
    PARAGRAPH_SEPARATOR,
    VISIBLE_CHARACTER,
    AnswerPolicy,
    conclusion_pattern,
    lexicon_pattern,
)

# the CTEs of answers.sql, in order, and the contract rows
STAGES = (
    "answer_rows",
    "citation_counts",
    "ranked_chunks",
    "relevance",
    "text_features",
    "lexicon_hits",
    "sub_factors",
    "certainty_parts",
    "factors",
    "totals",
    "percentages",
    "score_levels",
    "adjusted_levels",
    "scored_answers",
    "contract",
)


def render_answers(
    policy: AnswerPolicy,
    with_events: bool,
    final: str = "scored_answers",
    ordered: bool = True,
    *,
    logprobs: bool = False,
    feedback: bool = False,
) -> RenderedSQL:
    """The stages up to scored_answers (or the stage `final`) over answers, citations, chunks
    (and events, logprobs, feedback)."""
    context = _context(policy, with_events, logprobs, feedback)
    return render("answers/answers.sql", final=final, ordered=ordered, **context)


def render_contract(
    policy: AnswerPolicy,
    with_events: bool,
    standalone: bool,
    *,
    logprobs: bool = False,
    feedback: bool = False,
) -> RenderedSQL:
    """The contract rows, by answer_id, from the materialised scored_answers or (standalone) from
    the inputs."""
    context = _context(policy, with_events, logprobs, feedback)
    return render("answers/contract.sql", standalone=standalone, **context)


def render_stage(
    policy: AnswerPolicy,
    stage: str,
    with_events: bool,
    *,
    logprobs: bool = False,
    feedback: bool = False,
) -> RenderedSQL:
    """One stage of STAGES as a query over tables named answers, citations, chunks (and events,
    logprobs, feedback)."""
    if stage == "contract":
        return render_contract(
            policy, with_events, standalone=True, logprobs=logprobs, feedback=feedback
        )
    return render_answers(policy, with_events, final=stage, logprobs=logprobs, feedback=feedback)


def _context(
    policy: AnswerPolicy, with_events: bool, logprobs: bool, feedback: bool
) -> dict[str, Any]:
    lexicons = policy.lexicons
    given = {"events": with_events, "logprobs": logprobs, "feedback": feedback}
    return dict(
        policy=policy.parameters,
        policy_version=policy.version,
        with_events=with_events,
        with_logprobs=logprobs,
        with_feedback=feedback,
        inputs={
            "answers": "answers",
            "citations": "citations",
            "chunks": "chunks",
            **{name: name if present else None for name, present in given.items()},
        },
        lexicons={name: [t.lower() for t in lexicons[name]] for name in LEXICONS},
        lexicon_pattern=lexicon_pattern(lexicons),
        conclusion_pattern=conclusion_pattern(lexicons["conclusion"]),
        paragraph_separator=PARAGRAPH_SEPARATOR,
        visible_character=VISIBLE_CHARACTER,
        max_total=math.fsum(
            policy.weights[f]
            for f in ("citation_quality", "answer_quality", "retrieval", "certainty")
        ),
        max_points={name: max(band.points for band in policy.bands[name]) for name in BAND_LISTS},
    )
