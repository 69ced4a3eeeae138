"""The input tables of `duckscore answers` (seed 001): logged answers, their citations, the
reranked chunks and the streaming contradiction events. The rerank_score range is the policy's
(checked when the chunks are opened)."""

import dataclasses

from ..core.tables import Column, TableContract

ANSWERS = TableContract(
    name="answers",
    columns=(
        Column("answer_id", "id"),
        Column("query_id", "id"),
        Column("answer_text", "text"),
        Column("retrieved_count", "count", min=0),
    ),
    key=("answer_id",),
)

CITATIONS = TableContract(
    name="citations",
    columns=(Column("answer_id", "id"), Column("chunk_id", "id")),
    key=("answer_id", "chunk_id"),
    allow_empty=True,
)

CHUNKS = TableContract(
    name="chunks",
    columns=(Column("answer_id", "id"), Column("chunk_id", "id"), Column("rerank_score", "number")),
    key=("answer_id", "chunk_id"),
    allow_empty=True,
)

EVENTS = TableContract(
    name="events",
    columns=(
        Column("answer_id", "id"),
        Column("severity", "text", choices=("high", "medium", "low")),
    ),
    allow_empty=True,
)

# answer_v2's optional inputs (seed 001 §未来改进 1, 2): the model's logprob of each token of
# an answer (what OpenAI's and vLLM's `logprobs` give), and users' ratings of an answer
LOGPROBS = TableContract(
    name="logprobs",
    columns=(
        Column("answer_id", "id"),
        Column("token_index", "count", min=0),
        Column("logprob", "number", max=0.0),
    ),
    key=("answer_id", "token_index"),
    allow_empty=True,
)

FEEDBACK = TableContract(
    name="feedback",
    columns=(
        Column("answer_id", "id"),
        Column("rating", "number", min=-1.0, max=1.0),
        Column("given_at", "time"),
    ),
    allow_empty=True,
)

# a streaming answer (seed 001 §使用方式) has no score yet: its level starts at the policy's
STREAMING = Column("streaming", "flag", required=False)


def answers_contract(streams: bool) -> TableContract:
    """--answers as a policy reads it: with the optional `streaming` column when the policy
    has a streaming start (answer_v2), else as answer_v1 reads it."""
    if not streams:
        return ANSWERS
    return dataclasses.replace(ANSWERS, columns=(*ANSWERS.columns, STREAMING))
