"""Table macros: a capability's SQL over any relation, as `FROM ds_fuse('my_log')`.

Each is the SQL the command runs, rendered from the same templates, behind CTEs that stand where
the command's typed input views stand (`retrieval_log`, `parent_features`, `eval_run` …). Those
CTEs read the relation the macro is given (`query_table`), add the contract's optional columns as
NULL where the relation lacks them (UNION ALL BY NAME with an empty row of every column) and
cast each column to its contract type, as the command's typed views do. The macros trust their
input — the commands are where a table is checked row by row — but for one thing: a number that
is NaN or ±inf, which the commands refuse and which DuckDB would sort above every number (a NaN
score ranked first, normalised to 1.0), stops the query with DuckDB's `error()`, naming the
macro, the column and the row's key (issue 35).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..answering.policy import AnswerPolicy
from ..answering.stages import render_answers
from ..answering.tables import CHUNKS, CITATIONS, EVENTS, answers_contract
from ..core.graph import Chain
from ..core.render import column, ident, lit
from ..core.tables import TableContract
from ..fusion.contract import RETRIEVAL_LOG
from ..fusion.recipe import FusePlan, plan, refuse_rerank
from ..fusion.recipe_view import Recipe
from ..fusion.stages import FUSED_ITEMS, LOG
from ..metrics.catalog import DEFAULT_LABEL_K, METRICS
from ..metrics.labels import render_labels
from ..metrics.retrieval import render_metrics
from ..metrics.tables import QRELS_DOC_COLUMNS, RUN_DOC_COLUMNS
from ..runner.graph import run_graph
from ..scoring.policy_view import ScorePolicy
from ..scoring.stages import FEATURES, SCORE_CONTRACT, SCORED_PARENTS
from ..scoring.tables import PARENT_FEATURES
from .scalar import macro_head


@dataclass(frozen=True)
class RelationInput:
    """A macro parameter naming a table or view, read as the view `view` of the command."""

    parameter: str
    view: str
    columns: tuple[tuple[str, str], ...]  # (name, SQL type): every column it may have
    select: tuple[tuple[str, str], ...]  # (name, SQL expression over those): the view's columns
    finite: tuple[str, ...] = ()  # the numbers a command refuses as NaN or ±inf
    key: tuple[tuple[str, str], ...] = ()  # (name, SQL expression): how a message names a row
    # a log's: the sources the macro fuses, when the recipe fuses every source of a log (as
    # `duckscore run` does): a row of another source stops the query instead of being left out
    sources: tuple[str, ...] = ()

    def cte(self, macro: str = "") -> str:
        """The view's CTE; `macro` (its name, prefixed) is named by the refusals."""
        empty = ", ".join(
            f"CAST(NULL AS {sql_type}) AS {ident(name)}" for name, sql_type in self.columns
        )
        select = ", ".join(f"{expression} AS {ident(name)}" for name, expression in self.select)
        source = f"FROM query_table({self.parameter}) UNION ALL BY NAME SELECT {empty} WHERE FALSE"
        checks = [f"{self._refused(macro, n)} AS {ident(n)}" for n in self.finite]
        if self.sources:
            checks.append(f"{self._unknown_source(macro)} AS source")
        if checks:
            source = f"SELECT * REPLACE ({', '.join(checks)}) FROM ({source})"
        return f"{ident(self.view)} AS (\n    SELECT {select}\n    FROM ({source})\n)"

    def _unknown_source(self, macro: str) -> str:
        """The source as it is, or error() when it is not one the macro fuses (NULL passes):
        `ds_fuse: log holds source 'bm25', which this pack does not fuse (installed for sources
        dense, sparse, summary; the log's sources: bm25, vector): install the pack again with
        --sources bm25,vector, or …`."""

        def found(separator: str) -> str:  # the relation's sources, listed
            name = "CAST(source AS VARCHAR)"
            return (
                f"(SELECT string_agg(DISTINCT {name}, {lit(separator)} ORDER BY {name}) "
                f"FROM query_table({self.parameter}))"
            )

        parts = [
            lit(f"{macro}: {self.parameter} holds source '"),
            "CAST(source AS VARCHAR)",
            lit(
                "', which this pack does not fuse (installed for sources "
                f"{', '.join(self.sources)}; the log's sources: "
            ),
            found(", "),
            lit("): install the pack again with --sources "),
            found(","),
            lit(f", or give {macro} a view of the log without the others"),
        ]
        known = ", ".join(lit(name) for name in self.sources)
        return (
            f"CASE WHEN CAST(source AS VARCHAR) NOT IN ({known}) "
            f"THEN error(concat({', '.join(parts)})) ELSE source END"
        )

    def _refused(self, macro: str, name: str) -> str:
        """The column as it is, or error() when it is NaN or ±inf (NULL passes): `ds_score:
        features.rrf_sum is NaN or infinite (query_id='q1', parent_id='P2')`."""
        parts = [lit(f"{macro}: {self.parameter}.{name} is NaN or infinite (")]
        for i, (label, expression) in enumerate(self.key):
            parts += [lit(f"{', ' if i else ''}{label}='"), f"CAST({expression} AS VARCHAR)"]
            parts.append(lit("'"))
        parts.append(lit(")"))
        return (
            f"CASE WHEN NOT isfinite(CAST({ident(name)} AS DOUBLE)) "
            f"THEN error(concat({', '.join(parts)})) ELSE {ident(name)} END"
        )


def contract_input(
    parameter: str, view: str, contract: TableContract, select: Sequence[tuple[str, str]] = ()
) -> RelationInput:
    """The contract's columns cast to their types (or as `select` writes them); its numbers and
    counts refused when NaN or ±inf, a row named by the contract's key."""
    written = dict(select)
    return RelationInput(
        parameter,
        view,
        tuple((c.name, c.sql_type) for c in contract.columns),
        tuple(
            (c.name, written.get(c.name, f"CAST({ident(c.name)} AS {c.sql_type})"))
            for c in contract.columns
        ),
        tuple(c.name for c in contract.columns if c.kind in ("number", "count")),
        tuple((name, ident(name)) for name in contract.key),
    )


@dataclass(frozen=True)
class TableMacro:
    """`name(relations…, scalar := default…) AS TABLE`: the `chain` (`stage` of the run graph
    and the stages it reads as CTEs, or one template) over the inputs' CTEs."""

    name: str
    doc: str
    inputs: tuple[RelationInput, ...]
    chain: Chain
    optional: tuple[tuple[str, object], ...] = ()
    stage: str | None = None

    def statement(self, prefix: str) -> str:
        relations = [i.parameter for i in self.inputs]
        head = macro_head(prefix, self.name, self.doc, relations, self.optional, table=True)
        return f"{head}\n{self.chain.sql([i.cte(prefix + self.name) for i in self.inputs])};\n"


def _log_input(fuse_plan: FusePlan) -> RelationInput:
    """The log as `duckscore fuse` reads it: without a score column, ranked by rank alone
    (-rank). With a recipe that fuses every source of a log (discover_sources), a source the
    macro was not made for stops it, where `duckscore run` would fuse it."""
    log = contract_input(
        "log",
        LOG,
        RETRIEVAL_LOG,
        [("score", "coalesce(CAST(score AS DOUBLE), -CAST(rank AS DOUBLE))")],
    )
    if not fuse_plan.recipe.discover_sources:
        return log  # a source the recipe does not declare is left out, as run leaves it out
    return replace(log, sources=tuple(fuse_plan.sources))


def _judged_input(
    parameter: str, view: str, documents: Sequence[str], measures: Sequence[tuple[str, str]]
) -> RelationInput:
    """A run or qrels as `duckscore eval` reads it: the document is the first of `documents`
    the relation has (a checked input has it on every row), the `measures` as written (and
    refused when NaN or ±inf)."""
    first = ", ".join(f"CAST({ident(name)} AS VARCHAR)" for name in documents)
    return RelationInput(
        parameter,
        view,
        (("query_id", "VARCHAR"), *((name, "VARCHAR") for name in documents))
        + tuple((name, "DOUBLE") for name, _ in measures),
        (("query_id", "CAST(query_id AS VARCHAR)"), ("doc_id", f"coalesce({first})"), *measures),
        tuple(name for name, _ in measures),
        (("query_id", "query_id"), ("doc_id", f"coalesce({first})")),
    )


def _run_and_qrels() -> tuple[RelationInput, RelationInput]:
    # a run is ordered by rank ascending, else by score descending (as -score ascending)
    rank = "coalesce(CAST(rank AS DOUBLE), -CAST(score AS DOUBLE))"
    run = _judged_input(
        "run", "eval_run", RUN_DOC_COLUMNS, [("score", "CAST(score AS DOUBLE)"), ("rank", rank)]
    )
    qrels = _judged_input(
        "qrels", "eval_qrels", QRELS_DOC_COLUMNS, [("relevance", "CAST(relevance AS DOUBLE)")]
    )
    return run, qrels


def table_macros(
    score: ScorePolicy, recipe: Recipe, answers: AnswerPolicy, sources: Sequence[str]
) -> list[TableMacro]:
    """fuse, parent features, score, queries, eval, labels and answers, as table macros."""
    refuse_rerank(recipe, "the macro pack")
    fuse_plan = plan(recipe, sorted(sources), has_rank=True)
    graph = run_graph(fuse_plan, score, column("top_n"), portable=True)
    given = {FEATURES: FEATURES}  # the score macros read the features they are given
    log, features = (
        _log_input(fuse_plan),
        contract_input("features", FEATURES, PARENT_FEATURES),
    )
    run_and_qrels = _run_and_qrels()
    k = column("k")
    metrics = [{"name": name, "k": k, "suffix": "", "column": name} for name in METRICS]
    answer_inputs = tuple(
        contract_input(table.name, table.name, table)
        for table in (answers_contract(answers.has("streaming")), CITATIONS, CHUNKS)
    )
    events = contract_input("events", "events", EVENTS)
    return [
        TableMacro(
            "fuse",
            f"the fused items of a retrieval log (recipe {recipe.version}; sources "
            f"{', '.join(fuse_plan.sources)}), as fused.parquet",
            (log,),
            graph.chain(FUSED_ITEMS, ordered=True),
            stage=FUSED_ITEMS,
        ),
        TableMacro(
            "parent_features",
            f"the seed-000 parent features of a retrieval log (recipe {recipe.version}), as "
            "parent_features.parquet",
            (log,),
            graph.chain(FEATURES, ordered=True),
            stage=FEATURES,
        ),
        TableMacro(
            "score",
            f"every candidate parent scored (policy {score.version}), as parents.parquet",
            (features,),
            graph.chain(SCORED_PARENTS, given, ordered=True),
            stage=SCORED_PARENTS,
        ),
        TableMacro(
            "queries",
            f"one decision per query (policy {score.version}), as contract.jsonl",
            (features,),
            graph.chain(SCORE_CONTRACT, given),
            optional=(("top_n", 5),),
            stage=SCORE_CONTRACT,
        ),
        TableMacro(
            "eval",
            "per-query retrieval metrics at cutoff k (ndcg, recall, precision, mrr, map, "
            "hit_rate, hits), as eval --per-query",
            run_and_qrels,
            Chain((), render_metrics(metrics, [{"k": k, "suffix": ""}], "rank")),
            optional=(("k", 10),),
        ),
        TableMacro(
            "labels",
            "good / ambiguous / bad per judged query, as duckscore labels",
            run_and_qrels,
            Chain((), render_labels(k, "rank")),
            optional=(("k", DEFAULT_LABEL_K),),
        ),
        TableMacro(
            "answers",
            f"the confidence of logged answers (policy {answers.version}), as answers.parquet",
            answer_inputs,
            Chain((), render_answers(answers, with_events=False)),
        ),
        TableMacro(
            "answers_with_events",
            f"the confidence of logged answers, contradiction events applied (policy "
            f"{answers.version}), as answers.parquet of `duckscore answers --events`",
            (*answer_inputs, events),
            Chain((), render_answers(answers, with_events=True)),
        ),
    ]
