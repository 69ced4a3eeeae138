"""The input tables of `duckscore answers` (seed 001): logged answers, their citations, the
reranked chunks and the streaming contradiction events. The rerank_score range is the policy's
(checked when the chunks are opened)."""

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
