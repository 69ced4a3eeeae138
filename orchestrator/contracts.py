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

# Seed 002 (`duckscore evaluate`): the tables of an --input folder. Chunk ids elsewhere are not
# checked against chunks: they may name another tenant's chunk, which the filters drop.
_FLAG = {"kind": "count", "min": 0, "max": 1}
_BBOX = ("bbox_x0", "bbox_y0", "bbox_x1", "bbox_y1")

EVALUATIONS = TableContract(
    name="evaluations",
    columns=(Column("evaluation_id", "id"), Column("supplier_id", "id"), Column("tenant_id", "id"),
             Column("project_id", "id"), Column("trace_id", "text", required=False, nullable=True),
             Column("force_review", required=False, **_FLAG),
             Column("scoring_ms", "number", min=0, required=False, nullable=True)),
    key=("evaluation_id", "supplier_id"),
)

CRITERIA = TableContract(
    name="criteria",
    columns=(Column("tenant_id", "id"), Column("project_id", "id"), Column("criteria_id", "id"),
             Column("name", "text"), Column("weight", "number", min=0),
             Column("max_score", "number", min=0),
             Column("method", "text", choices=("llm", "formula", "redline", "required"))),
    key=("tenant_id", "project_id", "criteria_id"),
)

QUERY_TYPES = ("fact", "relation", "comparison", "summary", "risk", "trace")

BID_QUERIES = TableContract(
    name="queries",
    columns=(Column("query_id", "id"), Column("tenant_id", "id"), Column("project_id", "id"),
             Column("evaluation_id", "id"), Column("supplier_id", "id"), Column("criteria_id", "id"),
             Column("query_text", "text"),
             Column("query_type", "text", required=False, nullable=True, choices=QUERY_TYPES),
             Column("high_risk", required=False, **_FLAG),
             Column("doc_scope", "text", required=False, nullable=True),
             Column("sql_condition", "text", required=False, nullable=True),
             Column("retrieval_ms", "number", min=0, required=False, nullable=True)),
    key=("query_id",),
)

BID_CHUNKS = TableContract(
    name="chunks",
    columns=(Column("tenant_id", "id"), Column("chunk_id", "id"), Column("project_id", "id"),
             Column("supplier_id", "id", nullable=True), Column("doc_id", "id"),
             Column("doc_type", "text"), Column("page", "count", min=1),
             *(Column(b, "number") for b in _BBOX), Column("tokens", "count", min=0),
             Column("text", "text"), Column("confidence", "number", min=0, max=1, required=False),
             Column("rule_scope", "text", required=False, nullable=True)),
    key=("tenant_id", "chunk_id"),
)

HITS = TableContract(
    name="hits",
    columns=(Column("query_id", "id"), Column("chunk_id", "id"),
             Column("score_raw", "number", min=0, max=1), Column("rank", "count", min=1)),
    key=("query_id", "chunk_id"),
    allow_empty=True,
)

BID_FIELDS = TableContract(
    name="bid_fields",
    columns=(Column("tenant_id", "id"), Column("project_id", "id"), Column("supplier_id", "id"),
             Column("chunk_id", "id"),
             Column("supplier_code", "text", nullable=True), Column("qualification_level", "text", nullable=True),
             *(Column(f, "number", nullable=True)
               for f in ("registered_capital", "bid_price", "delivery_period", "warranty_period"))),
    key=("tenant_id", "project_id", "supplier_id"),
    allow_empty=True,
)

RERANK = TableContract(
    name="rerank",
    columns=(Column("query_id", "id"), Column("chunk_id", "id"),
             Column("status", "text", choices=("ok", "timeout", "error")),
             Column("score_rerank", "number", min=0, max=1, nullable=True),
             Column("reason", "text", required=False, nullable=True)),
    key=("query_id", "chunk_id"),
    allow_empty=True,
)

SOFT_SCORES = TableContract(
    name="soft_scores",
    columns=(Column("evaluation_id", "id"), Column("supplier_id", "id"), Column("criteria_id", "id"),
             Column("run_id", "id"), Column("score", "number", min=0),
             Column("redline_pass", required=False, nullable=True, **_FLAG),
             Column("reason", "text", required=False, nullable=True)),
    key=("evaluation_id", "supplier_id", "criteria_id", "run_id"),
    allow_empty=True,
)

CLAIMS = TableContract(
    name="claims",
    columns=(Column("claim_id", "id"), Column("evaluation_id", "id"), Column("supplier_id", "id"),
             Column("criteria_id", "id"), Column("claim_text", "text")),
    key=("claim_id",),
    allow_empty=True,
)

CLAIM_CITATIONS = TableContract(
    name="claim_citations",
    columns=(Column("claim_id", "id"), Column("chunk_id", "id"),
             Column("page", "count", min=1, nullable=True),
             *(Column(b, "number", nullable=True) for b in _BBOX)),
    allow_empty=True,
)

SYNONYMS = TableContract(
    name="synonyms",
    columns=(Column("tenant_id", "id"), Column("project_id", "id"), Column("term", "text"),
             Column("canonical", "text")),
    key=("tenant_id", "project_id", "term"),
    allow_empty=True,
)
