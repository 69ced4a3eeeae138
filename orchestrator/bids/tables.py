"""The tables of a `duckscore bids --input` folder (seed 002 §1), their contracts, and the
references between them, each failure naming the first bad row. Chunk ids elsewhere are not
checked against chunks: they may name another tenant's chunk, which the filters drop."""

from __future__ import annotations

import difflib
from operator import itemgetter
from pathlib import Path

from ..core.errors import InputError
from ..core.inputs import FORMATS, Table, create_empty_view
from ..core.render import RenderedSQL, ident
from ..core.session import Params, Session
from ..core.tables import Column, OpenedInput, TableContract
from ..core.validate import (
    FILE_COLUMN,
    ROW_COLUMN,
    check_references,
    check_rows,
    raw_view,
    row_label_sql,
    typed_column,
)
from .tender_fields import TENDER_FIELDS, check_tender_fields


def _flag(name: str, nullable: bool = False) -> Column:
    """An optional 0/1 column (force_review, high_risk, redline_pass)."""
    return Column(name, "count", required=False, min=0, max=1, nullable=nullable)


_BBOX = ("bbox_x0", "bbox_y0", "bbox_x1", "bbox_y1")

EVALUATIONS = TableContract(
    name="evaluations",
    columns=(
        Column("evaluation_id", "id"),
        Column("supplier_id", "id"),
        Column("tenant_id", "id"),
        Column("project_id", "id"),
        Column("trace_id", "text", required=False, nullable=True),
        _flag("force_review"),
        Column("scoring_ms", "number", min=0, required=False, nullable=True),
    ),
    key=("evaluation_id", "supplier_id"),
)

CRITERIA = TableContract(
    name="criteria",
    columns=(
        Column("tenant_id", "id"),
        Column("project_id", "id"),
        Column("criteria_id", "id"),
        Column("name", "text"),
        Column("weight", "number", min=0),
        Column("max_score", "number", min=0),
        Column("method", "text", choices=("llm", "formula", "redline", "required")),
    ),
    key=("tenant_id", "project_id", "criteria_id"),
)

QUERY_TYPES = ("fact", "relation", "comparison", "summary", "risk", "trace")

BID_QUERIES = TableContract(
    name="queries",
    columns=(
        Column("query_id", "id"),
        Column("tenant_id", "id"),
        Column("project_id", "id"),
        Column("evaluation_id", "id"),
        Column("supplier_id", "id"),
        Column("criteria_id", "id"),
        Column("query_text", "text"),
        Column("query_type", "text", required=False, nullable=True, choices=QUERY_TYPES),
        _flag("high_risk"),
        Column("doc_scope", "text", required=False, nullable=True),
        Column("sql_condition", "text", required=False, nullable=True),
        Column("retrieval_ms", "number", min=0, required=False, nullable=True),
    ),
    key=("query_id",),
)

BID_CHUNKS = TableContract(
    name="chunks",
    columns=(
        Column("tenant_id", "id"),
        Column("chunk_id", "id"),
        Column("project_id", "id"),
        Column("supplier_id", "id", nullable=True),
        Column("doc_id", "id"),
        Column("doc_type", "text"),
        Column("page", "count", min=1),
        *(Column(b, "number") for b in _BBOX),
        Column("tokens", "count", min=0),
        Column("text", "text"),
        Column("confidence", "number", min=0, max=1, required=False, nullable=True),
        Column("rule_scope", "text", required=False, nullable=True),
    ),
    key=("tenant_id", "chunk_id"),
)

HITS = TableContract(
    name="hits",
    columns=(
        Column("query_id", "id"),
        Column("chunk_id", "id"),
        Column("score_raw", "number", min=0, max=1),
        Column("rank", "count", min=1),
    ),
    key=("query_id", "chunk_id"),
    allow_empty=True,
)

BID_FIELDS = TableContract(
    name="bid_fields",
    columns=(
        Column("tenant_id", "id"),
        Column("project_id", "id"),
        Column("supplier_id", "id"),
        Column("chunk_id", "id"),
        Column("supplier_code", "text", nullable=True),
        Column("qualification_level", "text", nullable=True),
        *(
            Column(f, "number", nullable=True)
            for f in ("registered_capital", "bid_price", "delivery_period", "warranty_period")
        ),
    ),
    key=("tenant_id", "project_id", "supplier_id"),
    allow_empty=True,
)

RERANK = TableContract(
    name="rerank",
    columns=(
        Column("query_id", "id"),
        Column("chunk_id", "id"),
        Column("status", "text", choices=("ok", "timeout", "error")),
        Column("score_rerank", "number", min=0, max=1, nullable=True),
        Column("reason", "text", required=False, nullable=True),
    ),
    key=("query_id", "chunk_id"),
    allow_empty=True,
)

SOFT_SCORES = TableContract(
    name="soft_scores",
    columns=(
        Column("evaluation_id", "id"),
        Column("supplier_id", "id"),
        Column("criteria_id", "id"),
        Column("run_id", "id"),
        Column("score", "number", min=0),
        _flag("redline_pass", nullable=True),
        Column("reason", "text", required=False, nullable=True),
    ),
    key=("evaluation_id", "supplier_id", "criteria_id", "run_id"),
    allow_empty=True,
)

CLAIMS = TableContract(
    name="claims",
    columns=(
        Column("claim_id", "id"),
        Column("evaluation_id", "id"),
        Column("supplier_id", "id"),
        Column("criteria_id", "id"),
        Column("claim_text", "text"),
    ),
    key=("claim_id",),
    allow_empty=True,
)

CLAIM_CITATIONS = TableContract(
    name="claim_citations",
    columns=(
        Column("claim_id", "id"),
        Column("chunk_id", "id"),
        Column("page", "count", min=1, nullable=True),
        *(Column(b, "number", nullable=True) for b in _BBOX),
    ),
    allow_empty=True,
)

SYNONYMS = TableContract(
    name="synonyms",
    columns=(
        Column("tenant_id", "id"),
        Column("project_id", "id"),
        Column("term", "text"),
        Column("canonical", "text"),
    ),
    key=("tenant_id", "project_id", "term"),
    allow_empty=True,
)

# §8.4's anchor samples: the LLM's score of each anchor in each run, and the agreed score
ANCHORS = TableContract(
    name="anchors",
    columns=(
        Column("evaluation_id", "id"),
        Column("anchor_id", "id"),
        Column("criteria_id", "id"),
        Column("run_id", "id"),
        Column("score", "number", min=0),
        Column("reference_score", "number", min=0),
    ),
    key=("evaluation_id", "anchor_id", "criteria_id", "run_id"),
    allow_empty=True,
)

# §12.1's precomputed RAGAS values (`--ragas FILE`): one row per evaluated query, each metric in
# [0, 1] or NULL (not evaluated); a query without a row was not evaluated
RAGAS = TableContract(
    name="ragas",
    columns=(
        Column("query_id", "id"),
        *(
            Column(metric, "number", min=0, max=1, required=False, nullable=True)
            for metric in ("context_precision", "context_recall", "faithfulness")
        ),
    ),
    key=("query_id",),
    allow_empty=True,
)

# name -> (contract, required); the order is the order of checking
TABLES: dict[str, tuple[TableContract, bool]] = {
    "evaluations": (EVALUATIONS, True),
    "criteria": (CRITERIA, True),
    "queries": (BID_QUERIES, True),
    "chunks": (BID_CHUNKS, True),
    "hits": (HITS, True),
    "bid_fields": (BID_FIELDS, True),
    "rerank": (RERANK, False),
    "soft_scores": (SOFT_SCORES, False),
    "claims": (CLAIMS, False),
    "claim_citations": (CLAIM_CITATIONS, False),
    "synonyms": (SYNONYMS, False),
    "anchors": (ANCHORS, False),
    "tender_fields": (TENDER_FIELDS, False),
}


def open_bid_inputs(session: Session, input_dir: Path) -> dict[str, OpenedInput]:
    """The typed views of every table of the folder (optional ones empty when absent), checked
    against their contracts and each other."""
    refuse_unknown_tables(input_dir)
    opened: dict[str, OpenedInput] = {}
    for name, (contract, required) in TABLES.items():
        found = find_table(input_dir, name)
        if found is None:
            if required:
                raise InputError(
                    f"--input {input_dir}: no {name} table "
                    f"({name}.csv, .parquet, .json, .jsonl or a folder {name}/)"
                )
            create_empty_view(session.con, contract)
            continue
        opened[name] = session.open(name, contract, found, f"{name} table")
    check_bid_references(session, opened)
    return opened


def refuse_unknown_tables(input_dir: Path) -> None:
    """A data file whose name is no table's: a misspelt optional table (`reranks.csv`) would
    otherwise be ignored and change every total without a word."""
    for entry in sorted(input_dir.iterdir()):
        if entry.name.startswith((".", "_")) or not entry.is_file():
            continue
        suffix = entry.suffix.lower()
        if suffix in FORMATS and entry.stem not in TABLES:
            close = difflib.get_close_matches(entry.stem, TABLES, n=1)
            hint = f"did you mean {close[0]}{suffix}? " if close else ""
            raise InputError(
                f"--input {input_dir}: {entry.name} is no table of the folder ({hint}tables: "
                f"{', '.join(TABLES)})"
            )


def find_table(input_dir: Path, name: str) -> str | None:
    candidates = [
        input_dir / f"{name}{suffix}"
        for suffix in FORMATS
        if (input_dir / f"{name}{suffix}").is_file()
    ]
    if (input_dir / name).is_dir():
        candidates.append(input_dir / name)
    if len(candidates) > 1:
        raise InputError(
            f"--input {input_dir}: more than one {name} table: "
            f"{', '.join(p.name for p in candidates)}"
        )
    return str(candidates[0]) if candidates else None


def check_bid_references(session: Session, opened: dict[str, OpenedInput]) -> None:
    """The references of spec §1 between the tables, each failure naming the first bad row."""

    def col(table: str, name: str) -> str:
        return typed_column(opened[table], name)

    queries = opened["queries"]
    check_rows(
        session.con,
        opened["evaluations"],
        (
            f"{col('evaluations', 'evaluation_id')} IN (SELECT evaluation_id FROM evaluations GROUP BY evaluation_id "
            "HAVING count(DISTINCT (tenant_id, project_id)) > 1)"
        ),
        "evaluation_id {value} belongs to more than one (tenant_id, project_id)",
        shown=col("evaluations", "evaluation_id"),
    )
    check_rows(
        session.con,
        queries,
        (
            f"NOT EXISTS (SELECT 1 FROM evaluations AS e WHERE e.evaluation_id = {col('queries', 'evaluation_id')} "
            f"AND e.supplier_id = {col('queries', 'supplier_id')} AND e.tenant_id = {col('queries', 'tenant_id')} "
            f"AND e.project_id = {col('queries', 'project_id')})"
        ),
        "(evaluation_id, supplier_id, tenant_id, project_id) is not an evaluations row",
    )
    check_rows(
        session.con,
        queries,
        (
            f"NOT EXISTS (SELECT 1 FROM criteria AS k WHERE k.tenant_id = {col('queries', 'tenant_id')} "
            f"AND k.project_id = {col('queries', 'project_id')} AND k.criteria_id = {col('queries', 'criteria_id')})"
        ),
        "criteria_id {value} is not a criterion of its tenant and project",
        shown=col("queries", "criteria_id"),
    )
    check_rows(
        session.con,
        queries,
        (
            f"({col('queries', 'evaluation_id')}, {col('queries', 'supplier_id')}, {col('queries', 'criteria_id')}) IN "
            "(SELECT (evaluation_id, supplier_id, criteria_id) FROM queries GROUP BY ALL HAVING count(*) > 1)"
        ),
        "a second query for the same (evaluation_id, supplier_id, criteria_id)",
    )
    for table in ("hits", "rerank"):
        if table in opened:
            check_references(session.con, opened[table], "query_id", queries, "query_id")
    for table in ("soft_scores", "claims"):
        if table not in opened:
            continue
        check_rows(
            session.con,
            opened[table],
            (
                f"NOT EXISTS (SELECT 1 FROM evaluations AS e JOIN criteria AS k "
                f"ON k.tenant_id = e.tenant_id AND k.project_id = e.project_id "
                f"WHERE e.evaluation_id = {col(table, 'evaluation_id')} AND e.supplier_id = {col(table, 'supplier_id')} "
                f"AND k.criteria_id = {col(table, 'criteria_id')})"
            ),
            "(evaluation_id, supplier_id, criteria_id) is not a criterion of an evaluations row",
        )
    if "soft_scores" in opened:
        check_rows(
            session.con,
            opened["soft_scores"],
            (
                f"{col('soft_scores', 'score')} > (SELECT k.max_score FROM evaluations AS e JOIN criteria AS k "
                f"ON k.tenant_id = e.tenant_id AND k.project_id = e.project_id "
                f"WHERE e.evaluation_id = {col('soft_scores', 'evaluation_id')} "
                f"AND e.supplier_id = {col('soft_scores', 'supplier_id')} "
                f"AND k.criteria_id = {col('soft_scores', 'criteria_id')})"
            ),
            "score {value} is above the criterion's max_score",
            shown=col("soft_scores", "score"),
        )
    if "anchors" in opened:
        check_anchors(session, opened["anchors"])
    if "tender_fields" in opened:
        check_tender_fields(session, opened["tender_fields"])
    if "claim_citations" in opened:
        if "claims" not in opened:
            raise InputError("claim_citations table: given without a claims table")
        check_references(
            session.con, opened["claim_citations"], "claim_id", opened["claims"], "claim_id"
        )


def check_anchors(session: Session, anchors: OpenedInput) -> None:
    """An anchor scores an llm criterion of its evaluation's project, within its max_score."""
    evaluation, criterion = (typed_column(anchors, c) for c in ("evaluation_id", "criteria_id"))
    criterion_of = (
        "(SELECT k.max_score FROM evaluations AS e JOIN criteria AS k "
        "ON k.tenant_id = e.tenant_id AND k.project_id = e.project_id "
        f"WHERE e.evaluation_id = {evaluation} AND k.criteria_id = {criterion} "
        "AND k.method = 'llm' LIMIT 1)"
    )
    check_rows(
        session.con,
        anchors,
        f"{criterion_of} IS NULL",
        "(evaluation_id, criteria_id) is not an llm criterion of an evaluation's project",
    )
    for column in ("score", "reference_score"):
        check_rows(
            session.con,
            anchors,
            f"{typed_column(anchors, column)} > {criterion_of}",
            f"{column} {{value}} is above the criterion's max_score",
            shown=typed_column(anchors, column),
        )


def open_ragas(session: Session, ragas: Table, queries: OpenedInput) -> OpenedInput:
    """The --ragas table, typed and checked: each row names a query of the queries table."""
    opened = session.open("ragas", RAGAS, ragas, "--ragas table")
    check_references(session.con, opened, "query_id", queries, "query_id")
    return opened


def check_synonyms(session: Session, opened: dict[str, OpenedInput]) -> None:
    if "synonyms" in opened:
        check_rows(
            session.con,
            opened["synonyms"],
            f"contains({typed_column(opened['synonyms'], 'term')}, '\\E')",
            "term {value} contains \\E, which the dictionary pattern cannot quote",
            shown=typed_column(opened["synonyms"], "term"),
        )


def check_synonym_conflicts(
    session: Session, opened: dict[str, OpenedInput], conflicts: RenderedSQL, params: Params
) -> None:
    """Terms of one project that normalise alike (docs/bids.md, step 1) must be rewritten to
    one canonical form: else one error naming the first such row and the row it disagrees
    with. `conflicts` renders the synonym_conflicts stage of bids.sql."""
    found = session.rows(conflicts, params)
    if not found:
        return
    same_term = itemgetter("tenant_id", "project_id", "term_norm")
    entry_of = {row["term"]: row for row in found if same_term(row) == same_term(found[0])}
    synonyms = opened["synonyms"]
    term = typed_column(synonyms, "term")
    rows = session.con.execute(
        f"SELECT {row_label_sql(synonyms.contract, synonyms.columns)}, {FILE_COLUMN}, "
        f"{ROW_COLUMN}, {term} FROM {ident(raw_view(synonyms.contract))} AS child "
        f"WHERE {typed_column(synonyms, 'tenant_id')} = $tenant "
        f"AND {typed_column(synonyms, 'project_id')} = $project AND list_contains($terms, {term}) "
        f"ORDER BY {FILE_COLUMN}, {ROW_COLUMN}",
        {
            "tenant": found[0]["tenant_id"],
            "project": found[0]["project_id"],
            "terms": list(entry_of),
        },
    ).fetchall()
    (_, first_file, first_row, first_term), *later = rows
    first = entry_of[first_term]
    label, file, _, other_term = next(
        row for row in later if entry_of[row[3]]["canonical_norm"] != first["canonical_norm"]
    )
    where = f"{first_file}, " if file != first_file else ""
    raise InputError(
        f"{synonyms.label} ({label}): term {other_term!r} normalises to {first['term_norm']!r}, "
        f"as term {first_term!r} does ({where}row {first_row}), but is rewritten to "
        f"{entry_of[other_term]['canonical']!r}, not {first['canonical']!r}"
    )
