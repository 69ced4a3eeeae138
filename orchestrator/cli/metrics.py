"""`duckscore eval` and `duckscore labels`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..core.reporting import module_logger
from ..metrics.catalog import DEFAULT_LABEL_K, DEFAULT_METRICS, LOC_DEFAULT_K, MAX_K, TESTS
from .app import cli
from .options import (
    OutputPath,
    engine_options,
    optional_run_and_qrels_options,
    out_file_option,
    run_and_qrels_options,
)

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)


LOC_K_HELP = "; ".join(f"{level} {','.join(map(str, ks))}" for level, ks in LOC_DEFAULT_K.items())
# the options of each mode of `eval`, refused in the other
RETRIEVAL_OPTIONS = ("run_path", "qrels_path", "metrics", "baseline_path", "test", "alpha",
                     "permutations", "seed")  # fmt: skip
LOC_OPTIONS = ("gold_path", "levels", "k_specs", "merge_init", "entities_path")
QUALITY_OPTIONS = ("scored_paths", "report_path")
# what --answers-quality refuses: the retrieval options but the test's, and --loc's
NOT_QUALITY = ("run_path", "qrels_path", "metrics", "baseline_path", "test", "per_query_path",
               "loc_path", *LOC_OPTIONS)  # fmt: skip
REPORT_SUFFIXES = {".json": "json", ".md": "markdown", ".markdown": "markdown"}


@cli.command(name="eval")
@optional_run_and_qrels_options
@click.option(
    "--metrics",
    default=DEFAULT_METRICS,
    show_default=True,
    metavar="LIST",
    help="Comma-separated metrics: ndcg@k, recall@k, precision@k, mrr@k, map, map@k, "
    "hit_rate@k, hits@k (ndcg, recall, mrr, hit_rate and hits without @k: the whole run).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object of the means, keyed by metric name as given.",
)
@click.option(
    "--per-query",
    "per_query_path",
    type=OutputPath(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Also write the per-query values to this file: Parquet, CSV, TSV or JSON Lines as its "
    "suffix says (.parquet, .pq, .csv, .tsv, .json, .jsonl, .ndjson).",
)
@click.option(
    "--baseline",
    "baseline_path",
    metavar="PATH",
    help="Compare --run with this run: per metric both means, the difference and a paired "
    "two-sided test (docs/metrics.md#comparing-two-runs---baseline).",
)
@click.option(
    "--test",
    type=click.Choice(TESTS),
    default="randomization",
    show_default=True,
    help="With --baseline: Fisher's randomization test or Student's paired t-test.",
)
@click.option(
    "--alpha",
    default=0.05,
    show_default=True,
    type=click.FloatRange(min=0, max=1, min_open=True, max_open=True),
    help="With --baseline: a difference is significant (*) when p <= alpha.",
)
@click.option(
    "--permutations",
    default=10_000,
    show_default=True,
    type=click.IntRange(min=1),
    help="With --test randomization: the number of permutations.",
)
@click.option(
    "--seed",
    default=42,
    show_default=True,
    type=int,
    help="With --test randomization: the seed that chooses the permutations.",
)
@click.option(
    "--loc",
    "loc_path",
    metavar="PATH",
    help="Code localization: evaluate this loc_outputs.jsonl (found_files, found_modules, "
    "found_entities per instance_id) against --gold, instead of a run against qrels.",
)
@click.option(
    "--gold",
    "gold_path",
    metavar="PATH",
    help="With --loc: the gold locations, a table of instance_id, level (file, module or "
    "function), location (Parquet, CSV, JSON lines), or the benchmarks' JSONL "
    "(file_changes[].file / .changes.edited_modules / .changes.edited_entities, or "
    "edit_functions).",
)
@click.option(
    "--levels",
    default="file,module,function",
    show_default=True,
    metavar="LIST",
    help="With --loc: the levels to evaluate, comma-separated.",
)
@click.option(
    "--k",
    "k_specs",
    multiple=True,
    metavar="LEVEL=K,K,…",
    help=f"With --loc: the cutoffs of a level, e.g. file=1,3,5 (repeatable). Default: {LOC_K_HELP}.",
)
@click.option(
    "--merge-init/--no-merge-init",
    default=True,
    show_default=True,
    help="With --loc: at function level, read Class.__init__ as Class on both sides (LocAgent's "
    "merge_init).",
)
@click.option(
    "--entities",
    "entities_path",
    metavar="PATH",
    help="With --loc: the table of `duckscore entities`; a gold location in a file it does not "
    "list is refused.",
)
@click.option(
    "--answers-quality",
    "quality_path",
    metavar="PATH",
    help="Seed 000 §11: regress each policy version of --scored against this table of "
    "per-query answer quality (query_id, faithfulness, answer_relevancy, context_precision, "
    "context_recall in [0, 1] as RAGAS names them; optional needed_web, needed_clarification), "
    "instead of a run against qrels (docs/metrics.md#answer-quality-by-policy-version).",
)
@click.option(
    "--scored",
    "scored_paths",
    multiple=True,
    metavar="DIR",
    help="With --answers-quality: a `duckscore score` or `run` output folder (its "
    "contract.jsonl); repeat it to set versions side by side.",
)
@click.option(
    "--out",
    "report_path",
    type=OutputPath(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="With --answers-quality: also write the report, JSON (.json) or Markdown (.md).",
)
@engine_options
@click.pass_context
def eval_command(
    ctx: click.Context,
    run_path: str | None,
    qrels_path: str | None,
    metrics: str,
    as_json: bool,
    per_query_path: Path | None,
    baseline_path: str | None,
    test: str,
    alpha: float,
    permutations: int,
    seed: int,
    loc_path: str | None,
    gold_path: str | None,
    levels: str,
    k_specs: tuple[str, ...],
    merge_init: bool,
    entities_path: str | None,
    quality_path: str | None,
    scored_paths: tuple[str, ...],
    report_path: Path | None,
    settings: EngineSettings,
) -> None:
    """Evaluate a run against relevance judgments: nDCG, recall, precision, MRR, MAP, hit rate.

    Metrics are computed in SQL (sql/metrics/*.sql) as trec_eval and ranx define them: nDCG with
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
    A run that shares no query with the qrels is refused (exit 2).

    \b
    Output: a table of (metric, mean) on stdout; --json prints one JSON object of the
    means instead, keyed by metric name exactly as given, e.g. {"ndcg@10": 0.6604…}.
    --per-query FILE writes query_id, n_relevant, n_retrieved and one column per metric.

    \b
    With --baseline B: per metric the run's mean, the baseline's, their difference and the
    p-value of a paired two-sided test (--test), `*` where p <= --alpha, and how many judged
    queries each run has rows for (a run with none is refused); --json prints {metric: {run,
    baseline, difference, p_value, p_value_below, significant, judged_queries, run_covers,
    baseline_covers}}. With no permutation as extreme as observed, p < 1/(permutations + 1):
    the table prints `< 0.0001`, the JSON p_value 0 and p_value_below 1/(permutations + 1).
    JSON never holds NaN or Infinity (null instead).

    \b
    With --loc FILE --gold GOLD (code localization): the code-localization benchmarks'
    metrics, as LocAgent's evaluation defines them, per level (file, module, function):
    Acc@k (every gold location among the first k, at most k of them), NDCG@k, P@k,
    Recall@k (over min(gold, largest k)) and MAP@k (divided by k). A table per level;
    --json prints {"file": {"Acc@1": …}, "module": {…}, "function": {…}}; --per-query FILE
    writes instance_id, level, n_gold, n_predicted and one column per metric.
    docs/metrics.md#code-localization-eval---loc has the rules.

    \b
    With --answers-quality FILE --scored DIR [--scored DIR2 …] (seed 000 §11): per policy
    version and confidence level, the mean faithfulness and answer relevancy (t interval at
    1 - --alpha), the shares routed to the web and to a human; side by side over the queries
    every version scored; per version, whether `high` answers are more faithful than `low`
    ones (one-sided permutation test, --permutations, --seed) and, given needed_web or
    needed_clarification, the routing's precision and recall against them. --json prints
    the report as JSON; --out FILE writes it (.json or .md).
    """
    if quality_path is not None:
        _refuse_given(ctx, NOT_QUALITY, "cannot be used with --answers-quality")
        if not scored_paths:
            raise click.UsageError("--answers-quality needs --scored (a scored output folder)")
        _answer_quality(quality_path, scored_paths, report_path, as_json,
                        (alpha, permutations, seed), settings)  # fmt: skip
        return
    _refuse_given(ctx, QUALITY_OPTIONS, "needs --answers-quality")
    if loc_path is not None:
        _refuse_given(ctx, RETRIEVAL_OPTIONS, "cannot be used with --loc")
        if gold_path is None:
            raise click.UsageError("--loc needs --gold (the gold locations)")
        _localization(loc_path, gold_path, levels, k_specs, merge_init, entities_path,
                      as_json, per_query_path, settings)  # fmt: skip
        return
    _refuse_given(ctx, LOC_OPTIONS, "needs --loc")
    for value, option in ((run_path, "--run"), (qrels_path, "--qrels")):
        if value is None:
            raise click.UsageError(
                f"Missing option '{option}' (or --loc and --gold to evaluate code localization)"
            )
    assert run_path is not None and qrels_path is not None
    if baseline_path is not None:
        if per_query_path is not None:
            raise click.UsageError("--per-query is not supported with --baseline")
        _compare(baseline_path, run_path, qrels_path, metrics, as_json,
                 (test, alpha, permutations, seed), settings)  # fmt: skip
        return
    _refuse_given(ctx, ("test", "alpha", "permutations", "seed"), "needs --baseline")
    from ..metrics.retrieval import (
        format_table,
        refuse_no_shared_query,
        run_evaluation,
        write_per_query,
    )

    if per_query_path is not None:
        _check_output(per_query_path, "--per-query", {"--run": run_path, "--qrels": qrels_path})
    result = run_evaluation(run_path, qrels_path, metrics, settings)
    refuse_no_shared_query(result)
    if per_query_path is not None:
        write_per_query(result.per_query, per_query_path, result.inputs)
    if as_json:
        click.echo(json_line(result.means))
    else:
        click.echo(format_table(result))
    logger.info(f"done: {result.queries:,} queries evaluated")


def _refuse_given(ctx: click.Context, names: tuple[str, ...], why: str) -> None:
    """A usage error when any option of `names` (parameter names) was given: `--x, --y why`."""
    given = [
        p.opts[0]
        for p in ctx.command.params
        if p.name in names
        and ctx.get_parameter_source(p.name) not in (None, click.core.ParameterSource.DEFAULT)
    ]
    if given:
        raise click.UsageError(f"{', '.join(given)} {why}")


def _localization(
    loc_path: str,
    gold_path: str,
    levels: str,
    k_specs: tuple[str, ...],
    merge_init: bool,
    entities_path: str | None,
    as_json: bool,
    per_query_path: Path | None,
    settings: EngineSettings,
) -> None:
    """`eval --loc`: the code-localization metrics, printed and (--per-query) written."""
    from ..metrics.localization import evaluate_localization, format_tables, write_per_query

    if per_query_path is not None:
        _check_output(per_query_path, "--per-query", {"--loc": loc_path, "--gold": gold_path})
    result = evaluate_localization(loc_path, gold_path, levels, k_specs, merge_init,
                                   entities_path, settings)  # fmt: skip
    if per_query_path is not None:
        write_per_query(result, per_query_path)
    click.echo(json_line(result.means) if as_json else format_tables(result))
    evaluated = ", ".join(f"{s.evaluated:,} at {level}" for level, s in result.summaries.items())
    logger.info(f"done: instances evaluated {evaluated}")


def _answer_quality(
    quality_path: str,
    scored_paths: tuple[str, ...],
    report_path: Path | None,
    as_json: bool,
    test_options: tuple[float, int, int],
    settings: EngineSettings,
) -> None:
    """`eval --answers-quality`: the report printed and (--out) written."""
    from ..core.outputs import atomic_output_file, check_output_file
    from ..metrics.answer_quality import evaluate_answer_quality
    from ..metrics.answer_quality_report import (
        format_markdown,
        format_text,
        report_document,
        report_tables,
    )

    inputs = {"--answers-quality": quality_path} | {
        f"--scored {path}": path for path in scored_paths
    }
    if report_path is not None:
        check_output_file(report_path, "--out", inputs)
        if report_path.suffix.lower() not in REPORT_SUFFIXES:
            raise click.UsageError(f"--out {report_path}: use .json or .md")
    alpha, permutations, seed = test_options
    report = evaluate_answer_quality(quality_path, scored_paths, permutations, seed, alpha,
                                     settings)  # fmt: skip
    tables = report_tables(report)
    if report_path is not None:
        markdown = REPORT_SUFFIXES[report_path.suffix.lower()] == "markdown"
        with atomic_output_file(report_path, "--out", inputs) as staging:
            staging.write_text(
                format_markdown(tables, report.ignored_queries) if markdown
                else json.dumps(report_document(report), indent=2, allow_nan=False) + "\n",
                encoding="utf-8",
            )  # fmt: skip
    if as_json:
        click.echo(json_line(report_document(report)))
    else:
        click.echo(format_text(tables, report.ignored_queries))
    logger.info(f"done: {len(report.versions)} versions regressed against answer quality")


def json_line(value: Any) -> str:
    """One line of JSON: NaN and ±inf, which JSON has no words for (Python would print `NaN`),
    written as null."""

    def finite(item: Any) -> Any:
        if isinstance(item, float) and not math.isfinite(item):
            return None
        if isinstance(item, dict):
            return {key: finite(entry) for key, entry in item.items()}
        if isinstance(item, (list, tuple)):
            return [finite(entry) for entry in item]
        return item

    return json.dumps(finite(value), ensure_ascii=False, allow_nan=False)


def _compare(
    baseline_path: str,
    run_path: str,
    qrels_path: str,
    metrics: str,
    as_json: bool,
    test_options: tuple[str, float, int, int],
    settings: EngineSettings,
) -> None:
    from ..metrics.significance import compare_runs, format_comparison

    test, alpha, permutations, seed = test_options
    result = compare_runs(run_path, baseline_path, qrels_path, metrics, test, alpha,
                          permutations, seed, settings)  # fmt: skip
    if as_json:
        click.echo(json_line({m.metric: {"run": m.run, "baseline": m.baseline,
                                         "difference": m.difference, "p_value": m.p_value,
                                         "p_value_below": m.p_value_below,
                                         "significant": m.significant,
                                         "judged_queries": result.queries,
                                         "run_covers": result.run_covers,
                                         "baseline_covers": result.baseline_covers}
                              for m in result.metrics}))  # fmt: skip
    else:
        click.echo(format_comparison(result))


@cli.command(name="labels")
@run_and_qrels_options
@out_file_option(
    "the labels: Parquet, CSV, TSV or JSON Lines as its suffix says (.parquet, .pq, .csv, "
    ".tsv, .json, .jsonl, .ndjson)"
)
@click.option(
    "--k",
    "k",
    default=DEFAULT_LABEL_K,
    show_default=True,
    type=click.IntRange(min=1, max=MAX_K),
    help="Cutoff: a query with no relevant document in the top k is bad.",
)
@engine_options
def labels_command(
    run_path: str,
    qrels_path: str,
    out_path: Path,
    k: int,
    settings: EngineSettings,
) -> None:
    """Label each judged query good, ambiguous or bad from a run and relevance judgments.

    \b
    good       the top-1 document of the run is relevant (relevance > 0)
    bad        no relevant document in the top k (also: a judged query
               absent from the run, or with no relevant judgment)
    ambiguous  otherwise: the first relevant document is at rank 2..k

    \b
    Order within a query, as in `duckscore eval`: rank ascending when the run has a
    rank column, else score descending; ties by document id ascending (as text).
    Each (query_id, document) appears at most once in the run and in the qrels.

    \b
    Queries: a query is labelled when the qrels judge one of its documents. Run
    queries without any judgment get no label (they are counted in the summary).

    \b
    Output (--out, one row per labelled query, ordered by query_id):
      query_id, label, top1_doc_id (null when absent from the run),
      first_relevant_rank (position of the first relevant document in the whole
      run; null if none), n_relevant (relevant judgments of the query).
    Prints one summary line of the counts per label on stdout.
    """
    from ..metrics.labels import format_summary, run_labels, write_labels

    _check_output(out_path, "--out", {"--run": run_path, "--qrels": qrels_path})
    result = run_labels(run_path, qrels_path, k, settings)
    write_labels(result.labels, out_path, result.inputs)
    click.echo(format_summary(result))
    logger.info(f"done: {result.queries:,} queries labelled -> {out_path}")


def _check_output(path: Path, option: str, inputs: dict[str, str]) -> None:
    """Before any work: the output file is none of `inputs` (option -> path; nor inside, nor
    matched by them), and its suffix names a table format (docs/outputs.md)."""
    from ..core.outputs import check_output_file

    check_output_file(path, option, inputs, "table")
