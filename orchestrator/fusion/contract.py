"""The retrieval_log contract (docs/fuse.md, "The log"): one row per hit. Its own module, since
both the log check (log.py) and the trace readers (traces.py, whose faults apply its rules to a
span's documents and name the span) read it."""

from __future__ import annotations

from ..core.tables import Column, TableContract

# a score's largest magnitude: squared and summed over a list, or weighted (up to 1e9) and summed
# over the sources, it stays finite in every normaliser and fusion method, where 1.7e308 made
# minmax's range, and 1e155 zscore's variance, overflow to NaN
MAX_SCORE = 1e100
# a hit's level, as seed 003 names them: doc (a parent; `file` is its name for a source file),
# block (an item of a parent: a chunk, lines of a file), module and entity (a class or function)
GRANULARITIES = ("doc", "block", "file", "module", "entity")
# what a hit carries of its place in the code (seed 003 §5.1's payload, §7.2's module_path);
# passed through to fused.parquet's best_provenance with any other column of the log
PAYLOAD = ("file_path", "start_line", "end_line", "qualified_name", "revision", "module_path")

RETRIEVAL_LOG = TableContract(
    name="retrieval_log",
    columns=(
        Column("query_id", "id"),
        Column("source", "text"),
        Column("item_id", "id"),
        Column("parent_id", "id"),
        Column("score", "number", required=False, min=-MAX_SCORE, max=MAX_SCORE),
        Column("rank", "count", min=1, required=False),
        Column("granularity", "text", required=False, nullable=True, choices=GRANULARITIES),
        Column("block_type", "text", required=False, nullable=True),
        Column("total_chunks", "count", min=0, required=False, nullable=True),
        Column("snippet", "text", required=False, nullable=True),
        Column("query_text", "text", required=False, nullable=True),
        Column("file_path", "text", required=False, nullable=True),
        Column("start_line", "count", min=1, required=False, nullable=True),
        Column("end_line", "count", min=1, required=False, nullable=True),
        Column("qualified_name", "text", required=False, nullable=True),
        Column("revision", "text", required=False, nullable=True),
        Column("module_path", "text", required=False, nullable=True),
    ),
    key=("query_id", "source", "item_id"),
    passes_others=True,
)

# `duckscore entities`' table (docs/code.md): the files, classes, methods and functions of a
# repository at its revisions, with their line spans, which the code mapper reads (--entities)
ENTITIES = TableContract(
    name="entities",
    columns=(
        Column("revision", "text", required=False, nullable=True),
        Column("file_path", "text"),
        Column("kind", "text", choices=("file", "class", "method", "function")),
        Column("qualified_name", "text"),
        Column("module_id", "text", nullable=True),
        Column("entity_id", "id"),
        Column("start_line", "count", min=1),
        Column("end_line", "count", min=1),
    ),
)

# issue 48 §5: an external re-ranker's scores of fused items (item_id at the target granularity)
RERANK_SCORES = TableContract(
    name="rerank_scores",
    columns=(
        Column("query_id", "id"),
        Column("item_id", "id"),
        Column("rerank_score", "number", min=-MAX_SCORE, max=MAX_SCORE),
    ),
    key=("query_id", "item_id"),
    allow_empty=True,
)
