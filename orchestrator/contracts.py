"""The input table contracts of DESIGN.md: required columns, kinds, ranges and keys."""

from .inputs import Column, TableContract

PARENT_FEATURES = TableContract(
    name="parent_features",
    columns=(
        Column("query_id", "id"),
        Column("parent_id", "id"),
        Column("rrf_sum", "number"),
        Column("max_score", "number"),
        Column("coverage", "number", min=0),
        Column("total_chunks", "count", min=0),
        Column("coverage_ratio", "number", min=0, max=1),
        # the evidence overall_v2 adds (issue 4); `duckscore fuse` writes them
        Column("parent_rrf", "number", min=0, required=False),
        Column("source_agreement", "number", min=0, max=1, required=False),
        Column("score_lead", "number", min=0, max=1, required=False),
    ),
    key=("query_id", "parent_id"),
)

QUERY_IDS = TableContract(
    name="query_ids",
    columns=(Column("query_id", "id"),),
    allow_empty=True,
)

RETRIEVAL_LOG = TableContract(
    name="retrieval_log",
    columns=(
        Column("query_id", "id"),
        Column("source", "text"),
        Column("item_id", "id"),
        Column("parent_id", "id"),
        Column("score", "number", required=False),
        Column("rank", "count", min=1, required=False),
        Column("granularity", "text", required=False),
        Column("block_type", "text", required=False),
        Column("total_chunks", "count", min=0, required=False),
        Column("snippet", "text", required=False),
        Column("query_text", "text", required=False),
    ),
    key=("query_id", "source", "item_id"),
)

QRELS = TableContract(
    name="qrels",
    columns=(Column("query_id", "id"), Column("parent_id", "id"), Column("relevance", "number")),
    key=("query_id", "parent_id"),
)

LABELS = TableContract(
    name="labels",
    columns=(Column("query_id", "id"), Column("label", "text")),
    key=("query_id",),
)

# Seed 001 (`duckscore answers`): logged answers, their citations, the reranked chunks and the
# streaming contradiction events. The rerank_score range is the policy's (checked by the runner).
ANSWERS = TableContract(
    name="answers",
    columns=(Column("answer_id", "id"), Column("query_id", "id"), Column("answer_text", "text"),
             Column("retrieved_count", "count", min=0)),
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
    columns=(Column("answer_id", "id"), Column("severity", "text", choices=("high", "medium", "low"))),
    allow_empty=True,
)
