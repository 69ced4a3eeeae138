"""`duckscore eval`: retrieval metrics of a run against relevance judgments, computed in SQL.

Metrics are defined as trec_eval and ranx define them (nDCG with gain 2^rel − 1 as ranx's
`ndcg_burges`, which equals trec_eval's `ndcg_cut` for binary judgments): the SQL is
sql/eval/per_query.sql (one CTE per stage) and sql/eval/means.sql.

Conventions (as in trec_eval and ranx):
- the run orders a query's documents by `rank` ascending when it has a rank column, else by
  `score` descending; ties by document id ascending (as text). Positions are 1, 2, … in that order.
- a query is evaluated when the qrels judge at least one of its documents; relevant means
  relevance > 0. Run rows of queries absent from the qrels are ignored. An evaluated query with
  no run row, or with no relevant document, scores 0 on every metric.
- each mean is over the evaluated queries.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
import duckdb

from .engine import EngineSettings, connect
from .options import engine_options, run_and_qrels_options
from .errors import DuckscoreError, InputError
from .progress import SILENT, Progress

if TYPE_CHECKING:  # pandas, Jinja and sqlglot load on first use: `duckscore --help` stays fast
    import pandas as pd

    from .inputs import OpenedInput, TableContract
    from .render import RenderedSQL

DEFAULT_METRICS = "ndcg@10,recall@100,mrr@10,map"
MAX_K = 1_000_000_000

# metric -> needs a cutoff (the others without @k use the whole run, as ranx with k = 0)
METRICS: dict[str, bool] = {"ndcg": False, "recall": False, "precision": True, "mrr": False,
                            "map": False, "hit_rate": False, "hits": False}
_KNOWN = "ndcg@k, recall@k, precision@k, mrr@k, map, map@k, hit_rate@k, hits@k"
_SPEC = re.compile(r"(?P<name>[A-Za-z_]+)(?:@(?P<k>.*))?", re.DOTALL)


class MetricError(DuckscoreError):
    """--metrics names an unknown metric or a bad cutoff."""


@dataclass(frozen=True)
class Metric:
    """One requested metric: `key` exactly as the user wrote it, `k` None for the whole run."""

    key: str
    name: str
    k: int | None

    @property
    def suffix(self) -> str:
        return "_all" if self.k is None else f"_at_{self.k}"

    @property
    def column(self) -> str:
        return f"{self.name}{self.suffix}"

    @property
    def context(self) -> dict[str, Any]:
        return {"name": self.name, "k": self.k, "suffix": self.suffix, "column": self.column}


@dataclass(frozen=True)
class EvalResult:
    means: dict[str, float]
    per_query: pd.DataFrame
    metrics: list[Metric]
    queries: int
    queries_without_run: int
    run_queries_ignored: int
    order_by: str
    run_doc_column: str
    qrels_doc_column: str
    inputs: dict[str, OpenedInput]
    rendered: list[RenderedSQL]


def parse_metrics(spec: str | Sequence[str]) -> list[Metric]:
    """Parse `ndcg@10,recall@100,map` (or a list of such names) strictly; keys keep their spelling."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    metrics: list[Metric] = []
    seen: dict[tuple[str, int | None], str] = {}
    for item in items:
        if not isinstance(item, str):
            raise MetricError(f"--metrics: expected metric names, got {item!r}")
        key = item.strip()
        if not key:
            raise MetricError(f"--metrics {_shown(spec)}: empty metric name (known: {_KNOWN})")
        match = _SPEC.fullmatch(key)
        name = match.group("name").lower() if match else key.lower()
        if match is None or name not in METRICS:
            raise MetricError(f"--metrics: unknown metric {key!r}{_did_you_mean(key)} (known: {_KNOWN})")
        k_text = match.group("k")
        needs_k = METRICS[name]
        if k_text is None:
            if needs_k:
                raise MetricError(f"--metrics: {key!r} needs a cutoff, e.g. {name}@10")
            k = None
        else:
            if not re.fullmatch(r"[1-9][0-9]{0,9}", k_text) or int(k_text) > MAX_K:
                raise MetricError(f"--metrics: bad cutoff in {key!r}: k must be a whole number "
                                  f"from 1 to {MAX_K} (written without sign or leading zeros)")
            k = int(k_text)
        if (name, k) in seen:
            raise MetricError(f"--metrics: {key!r} is listed twice (as {seen[(name, k)]!r})")
        seen[(name, k)] = key
        metrics.append(Metric(key, name, k))
    if not metrics:
        raise MetricError(f"--metrics: no metric given (known: {_KNOWN})")
    return metrics


def _shown(spec: str | Sequence[str]) -> str:
    return repr(spec if isinstance(spec, str) else ",".join(map(str, spec)))


def _did_you_mean(key: str) -> str:
    name = key.split("@", 1)[0].lower()
    close = difflib.get_close_matches(name, list(METRICS), n=1)
    if not close:
        return ""
    tail = key[len(name):] if "@" in key else ("@k" if METRICS[close[0]] else "")
    return f" (did you mean {close[0] + tail!r}?)"


def render_per_query(metrics: list[Metric], order_by: str, final: str = "per_query") -> RenderedSQL:
    from .render import render

    cutoffs = sorted({m.k for m in metrics}, key=lambda k: (k is None, k or 0))
    return render(
        "eval/per_query.sql", final=final, order_by=order_by,
        metrics=[m.context for m in metrics],
        cutoffs=[{"k": k, "suffix": Metric("", "", k).suffix} for k in cutoffs],
        inputs={"run": "eval_run", "qrels": "eval_qrels"},
    )


def render_means(metrics: list[Metric]) -> RenderedSQL:
    from .render import render

    return render("eval/means.sql", metrics=[m.context for m in metrics],
                  inputs={"per_query": "eval_per_query"})


def evaluate(run: str | Path | pd.DataFrame, qrels: str | Path | pd.DataFrame,
             metrics: str | Sequence[str] = DEFAULT_METRICS,
             settings: EngineSettings | None = None,
             progress: Progress = SILENT) -> tuple[dict[str, float], pd.DataFrame]:
    """Evaluate `run` against `qrels` (each a path, glob, folder or DataFrame).

    Returns the means keyed by metric name exactly as given (in the given order) and one row per
    evaluated query: query_id, n_relevant, n_retrieved and one column per metric.
    Raises a DuckscoreError subclass naming the problem for bad metrics or inputs.
    """
    result = run_evaluation(run, qrels, metrics, settings, progress)
    return result.means, result.per_query


def run_evaluation(run: str | Path | pd.DataFrame, qrels: str | Path | pd.DataFrame,
                   metrics: str | Sequence[str] = DEFAULT_METRICS,
                   settings: EngineSettings | None = None,
                   progress: Progress = SILENT) -> EvalResult:
    """`evaluate` with everything the CLI reports: query counts, columns used, rendered SQL."""
    from .runner import first_row

    parsed = parse_metrics(metrics)
    con = connect(settings)
    progress.step("checking inputs")
    run_input, order_by, run_doc = open_run(con, run)
    qrels_input, qrels_doc = open_qrels(con, qrels)
    progress.step(f"evaluating {run_input.rows:,} run rows against {qrels_input.rows:,} judgments")
    rendered = eval_tables(con, parsed, order_by)
    frame = con.execute("SELECT * FROM eval_per_query ORDER BY query_id").df()
    frame = frame.rename(columns={m.column: m.key for m in parsed})
    values = con.execute("SELECT * FROM eval_means").df().iloc[0].to_dict()
    means = {m.key: float(values[m.column]) for m in parsed}
    ignored = first_row(
        con,
        "SELECT count(*) FROM (SELECT query_id FROM eval_run GROUP BY query_id) AS r "
        "ANTI JOIN (SELECT query_id FROM eval_qrels GROUP BY query_id) AS q "
        "ON q.query_id = r.query_id")
    con.close()
    return EvalResult(
        means=means, per_query=frame, metrics=parsed, queries=int(values["n_queries"]),
        queries_without_run=int((frame["n_retrieved"] == 0).sum()),
        run_queries_ignored=int(ignored[0]) if ignored else 0,
        order_by=order_by, run_doc_column=run_doc, qrels_doc_column=qrels_doc,
        inputs={"run": run_input, "qrels": qrels_input}, rendered=rendered,
    )


def eval_tables(con: duckdb.DuckDBPyConnection, metrics: list[Metric],
                order_by: str) -> list[RenderedSQL]:
    """Create the temp tables eval_per_query and eval_means from the eval_run and eval_qrels
    views; return the rendered SQL of both."""
    from .inputs import schema_of
    from .runner import execute

    per_query_sql = render_per_query(metrics, order_by)
    _check_once(per_query_sql, {"eval_run": schema_of(con, "eval_run"),
                                "eval_qrels": schema_of(con, "eval_qrels")})
    execute(con, f"CREATE OR REPLACE TEMP TABLE eval_per_query AS {per_query_sql.text}", per_query_sql)
    means_sql = render_means(metrics)
    _check_once(means_sql, {"eval_per_query": schema_of(con, "eval_per_query")})
    execute(con, f"CREATE OR REPLACE TEMP TABLE eval_means AS {means_sql.text}", means_sql)
    return [per_query_sql, means_sql]


_CHECKED: set[tuple[str, str]] = set()


def _check_once(rendered: RenderedSQL, schema: dict[str, dict[str, str]]) -> None:
    """check_sql, remembered per (SQL, schema): the check is a pure function of both, and
    parsing the SQL of many metrics costs more than evaluating a small run."""
    from .sqlcheck import check_sql

    key = (rendered.sha256, json.dumps(schema, sort_keys=True))
    if key not in _CHECKED:
        check_sql(rendered, schema)
        _CHECKED.add(key)


def _columns(con: duckdb.DuckDBPyConnection, given: str | pd.DataFrame, label: str,
             probe: str) -> tuple[list[str], str]:
    """The columns of an input (after the reader's own checks: file found, readable, not empty)."""
    from .eval_contracts import probe_contract
    from .inputs import open_input, schema_of

    opened = open_input(con, probe_contract(probe), given, label)
    names = [c for c in schema_of(con, f"__raw_{probe}") if not c.startswith("__duckscore")]
    return names, opened.given


def _open_judged(con: duckdb.DuckDBPyConnection, given: str | pd.DataFrame, label: str,
                 doc_columns: tuple[str, ...], contract_for: Callable[[str], TableContract], view: str,
                 columns: str) -> tuple[OpenedInput, str, list[str], str]:
    """Open a run or qrels input whose document column is the first of `doc_columns` present,
    and create `view` as SELECT query_id, <doc> AS doc_id, `columns`. Returns the opened input,
    the document column, the column names and the input as shown in messages."""
    from .eval_contracts import first_present
    from .inputs import open_input
    from .render import ident

    names, shown = _columns(con, given, label, f"{view}_probe")
    doc = first_present(names, doc_columns)
    if doc is None:
        others = ", ".join(repr(c) for c in doc_columns[1:])
        raise InputError(f"{label} ({shown}): missing column 'doc_id' (or {others}) "
                         f"(columns: {', '.join(names) or 'none'})")
    opened = open_input(con, contract_for(doc), given, label)
    con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS SELECT query_id, {ident(doc)} AS doc_id, "
                f"{columns} FROM {view}_input")
    return opened, doc, names, shown


def open_run(con: duckdb.DuckDBPyConnection,
             given: str | pd.DataFrame) -> tuple[OpenedInput, str, str]:
    """Create the view eval_run(query_id, doc_id, score, rank); return the opened input, the
    ordering used ('rank' or 'score') and the column read as the document id."""
    from .eval_contracts import RUN_DOC_COLUMNS, RUN_ORDER_COLUMNS, first_present, run_contract

    opened, doc, names, shown = _open_judged(con, given, "--run", RUN_DOC_COLUMNS, run_contract,
                                             "eval_run", "score, rank")
    order_by = first_present(names, RUN_ORDER_COLUMNS)
    if order_by is None:
        raise InputError(f"--run ({shown}): needs a rank or a score column "
                         f"(columns: {', '.join(names) or 'none'})")
    return opened, order_by, doc


def open_qrels(con: duckdb.DuckDBPyConnection, given: str | pd.DataFrame) -> tuple[OpenedInput, str]:
    """Create the view eval_qrels(query_id, doc_id, relevance)."""
    from .eval_contracts import QRELS_DOC_COLUMNS, qrels_contract

    opened, doc, _, _ = _open_judged(con, given, "--qrels", QRELS_DOC_COLUMNS, qrels_contract,
                                     "eval_qrels", "relevance")
    return opened, doc


def write_per_query(frame: pd.DataFrame, path: str | Path) -> None:
    """Write the per-query table as Parquet, atomically (a temporary sibling, then a rename)."""
    from .outputs import atomic_output_file
    from .render import lit

    with atomic_output_file(Path(path), "--per-query") as staging:
        con = duckdb.connect(":memory:")
        con.register("per_query_frame", frame)
        con.execute(f"COPY (SELECT * FROM per_query_frame) TO {lit(str(staging))} (FORMAT parquet)")
        con.close()


def format_table(result: EvalResult) -> str:
    """The plain-text table of `duckscore eval`: one line per metric, in the order given."""
    width = max(len("metric"), *(len(m.key) for m in result.metrics)) + 2
    lines = [f"{'metric':<{width}}{'mean':>10}"]
    for metric in result.metrics:
        lines.append(f"{metric.key:<{width}}{result.means[metric.key]:>10.6f}")
    lines += ["", f"{result.queries:,} queries evaluated ({result.queries_without_run:,} without "
                  f"run rows); {result.run_queries_ignored:,} run queries without judgments ignored"]
    return "\n".join(lines)


@click.command(name="eval")
@run_and_qrels_options
@click.option("--metrics", default=DEFAULT_METRICS, show_default=True, metavar="LIST",
              help="Comma-separated metrics: ndcg@k, recall@k, precision@k, mrr@k, map, map@k, "
                   "hit_rate@k, hits@k (ndcg, recall, mrr, hit_rate and hits without @k: the whole run).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object of the means, keyed by metric name as given.")
@click.option("--per-query", "per_query_path", type=click.Path(dir_okay=False, path_type=Path),
              metavar="FILE", help="Also write the per-query values to this Parquet file.")
@engine_options
@click.pass_context
def eval_command(ctx: click.Context, run_path: str, qrels_path: str, metrics: str, as_json: bool,
                 per_query_path: Path | None, settings: EngineSettings) -> None:
    """Evaluate a run against relevance judgments: nDCG, recall, precision, MRR, MAP, hit rate.

    Metrics are computed in SQL (sql/eval/*.sql) as trec_eval and ranx define them: nDCG with
    gain 2^relevance - 1 and discount log2(position + 1), ideal DCG from the qrels sorted by
    relevance (ranx's ndcg_burges; trec_eval's ndcg_cut for binary judgments).

    \b
    Order within a query: rank ascending when the run has a rank column, else score
    descending; ties by document id ascending (as text). Only the order matters.
    Each (query_id, document) appears at most once in the run and in the qrels.

    \b
    Queries: a query is evaluated when the qrels judge one of its documents. Run rows of
    other queries are ignored; an evaluated query with no run row, or with no relevant
    (relevance > 0) document, scores 0 on every metric. Means are over the evaluated queries.

    \b
    Output: a table of (metric, mean) on stdout; --json prints one JSON object of the
    means instead, keyed by metric name exactly as given, e.g. {"ndcg@10": 0.6604…}.
    --per-query FILE writes query_id, n_relevant, n_retrieved and one column per metric.
    """
    progress = ctx.find_object(Progress) or SILENT
    result = run_evaluation(run_path, qrels_path, metrics, settings, progress)
    if per_query_path is not None:
        write_per_query(result.per_query, per_query_path)
    if as_json:
        click.echo(json.dumps(result.means, ensure_ascii=False))
    else:
        click.echo(format_table(result))
    progress.step(f"done: {result.queries:,} queries evaluated")
