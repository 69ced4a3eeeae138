"""The input tables of `duckscore score`: parent features (seed 000's inputs) and query ids."""

from ..core.tables import Column, TableContract

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
