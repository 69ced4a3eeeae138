"""The `duckscore` command line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import click

from . import __version__
from .engine import EngineSettings
from .options import dialect_option, engine_options
from .errors import DuckscoreError
from .policy import available_policies, canonical_json
from .progress import Progress

SCORE_STAGES = ("features", "bounds", "normalized", "subscores", "combined", "ranked", "top_two",
                "flagged", "scored_parents", "per_query", "all_queries", "decisions", "contract")


class DuckscoreGroup(click.Group):
    """Every failure is one line, `duckscore: error: …`, on stderr, with exit status 2:
    DuckscoreError from the runner and click's own usage errors alike."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DuckscoreError as exc:
            _fail(str(exc))
        except Exception as exc:  # duckdb is imported lazily (a fast --help), so match its module
            if not type(exc).__module__.lstrip("_").startswith("duckdb"):
                raise
            _fail(f"DuckDB failed: {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            _fail("aborted", status=130)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.format_message(), err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            command = exc.ctx.command_path if isinstance(exc, click.UsageError) and exc.ctx else "duckscore"
            _fail(f"{exc.format_message()} (see `{command} --help`)", status=exc.exit_code)
        sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, status: int = 2) -> None:
    click.echo(f"duckscore: error: {' '.join(message.split())}", err=True)
    sys.exit(status)


def policy_options(default: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        command = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                               help="Override a policy parameter (dotted for nested keys, e.g. "
                                    "risk_flags.single_spike.max_score_norm_at_least=0.9). Repeatable.")(command)
        command = click.option("--policy", default=default, show_default=True, metavar="NAME|PATH",
                               help="A packaged policy name or a policy YAML file.")(command)
        return command

    return decorate


@click.group(cls=DuckscoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="duckscore")
@click.option("--progress/--no-progress", default=None,
              help="Progress lines on stderr (default: only when stderr is a terminal).")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines (same as --no-progress).")
@click.pass_context
def cli(ctx: click.Context, progress: bool | None, quiet: bool) -> None:
    """SQL-first confidence scoring for RAG retrieval logs, on DuckDB.

    Every decision comes from a versioned policy rendered to SQL; every output folder carries a
    manifest.json with the policy, its parameters, the SQL hash and the input fingerprints.
    """
    if progress is None:
        progress = sys.stderr.isatty()
    ctx.obj = Progress(enabled=progress and not quiet)


@cli.command()
@click.option("--features", required=True, metavar="PATH",
              help="parent_features table: Parquet/CSV/JSON file, glob, or (hive) folder.")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Output folder (created; files in it are replaced atomically).")
@click.option("--queries", metavar="PATH",
              help="Optional table with a query_id column: listed queries without candidates get "
                   "an empty-result decision (web fallback).")
@click.option("--top-n", default=5, show_default=True, type=click.IntRange(min=1),
              help="Parents per query in contract.jsonl.")
@policy_options("overall_v1")
@engine_options
@click.pass_obj
def score(progress: Progress, features: str, out_dir: Path, queries: str | None, top_n: int,
          policy: str, overrides: tuple[str, ...], settings: EngineSettings) -> None:
    """Score candidate parents (seed 000): OverallScore, confidence, risk flags, HITL, web fallback.

    \b
    Writes to --out:
      parents.parquet   one row per (query_id, parent_id): normalised inputs, sub-scores,
                        overall_score, rank, risk flags
      queries.parquet   one row per query: best parent, confidence level, top2_ratio,
                        need_hitl, web_fallback
      contract.jsonl    one JSON object per query (seed 000 §10)
      manifest.json     policy version and parameters, SQL hashes, input fingerprints
      sql/              the rendered SQL that produced them
    """
    from .score import score as run_score

    result = run_score(features, out_dir, policy, list(overrides), queries, top_n, settings, progress)
    progress.step(f"done: {result.queries:,} queries, {result.parents:,} parents -> {out_dir}")


@cli.command()
@click.option("--answers", required=True, metavar="PATH",
              help="answers table: answer_id, query_id, answer_text, retrieved_count.")
@click.option("--citations", required=True, metavar="PATH",
              help="citations table: answer_id, chunk_id (zero rows allowed, e.g. a header-only CSV).")
@click.option("--chunks", required=True, metavar="PATH",
              help="reranked chunks: answer_id, chunk_id, rerank_score (zero rows allowed).")
@click.option("--events", metavar="PATH",
              help="Optional streaming contradiction events: answer_id, severity (high / medium / low).")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Output folder (created; files in it are replaced atomically).")
@policy_options("answer_v1")
@engine_options
@click.pass_obj
def answers(progress: Progress, answers: str, citations: str, chunks: str, events: str | None,
            out_dir: Path, policy: str, overrides: tuple[str, ...], settings: EngineSettings) -> None:
    """Score logged answers (seed 001): citation quality, answer quality, retrieval recall and
    language certainty into a 0–10 total, a percentage and a level; contradiction events lower
    the level.

    \b
    Writes to --out:
      answers.parquet   one row per answer: every factor and sub-factor, the lexicon hits,
                        total, percentage, score_level and level (after contradictions)
      contract.jsonl    one JSON object per answer: level, percentage, the four factors, why
      manifest.json     policy version and parameters, SQL hashes, input fingerprints
      sql/              the rendered SQL that produced them
    """
    from .answers import score_answers

    result = score_answers(answers, citations, chunks, out_dir, policy, events, list(overrides),
                           settings, progress)
    progress.step(f"done: {result.answers:,} answers -> {out_dir}")


def recipe_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option("--set-recipe", "recipe_overrides", multiple=True, metavar="KEY=VALUE",
                           help="Override a recipe key (dotted, e.g. fusion.k=20 or "
                                "sources.dense.weight=0.7). Repeatable.")(command)
    command = click.option("--recipe", default="hybrid_v1", show_default=True, metavar="NAME|PATH",
                           help="A packaged fusion recipe (hybrid_v1, canonical_rrf) or a recipe YAML file.")(command)
    return command


@cli.command()
@click.option("--log", required=True, metavar="PATH",
              help="retrieval_log table: one row per hit (query_id, source, item_id, parent_id, score and/or rank).")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--recipe", default="hybrid_v1", show_default=True, metavar="NAME|PATH",
              help="A packaged fusion recipe (hybrid_v1, canonical_rrf) or a recipe YAML file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a recipe key (dotted: fusion.k=20, sources.dense.weight=0.7). Repeatable.")
@engine_options
@click.pass_obj
def fuse(progress: Progress, log: str, out_dir: Path, recipe: str, overrides: tuple[str, ...],
         settings: EngineSettings) -> None:
    """Fuse a multi-source retrieval log (seed 003): align, normalise, fuse, rank.

    \b
    Writes to --out:
      fused.parquet            query_id, item_id (target granularity), fused_score, rank,
                               n_sources, contributions (per source: original id, raw and
                               normalised score, rank, weight, contribution), best_provenance
      parent_features.parquet  the seed-000 inputs of every candidate parent
      manifest.json            recipe_id, sources, fusion, target granularity, SQL hashes, inputs
      sql/                     the rendered SQL
    """
    from .fuse import fuse as run_fuse

    result = run_fuse(log, out_dir, recipe, list(overrides), settings, progress)
    progress.step(f"done: {result.fused_rows:,} fused items -> {out_dir}")


@cli.command()
@click.option("--log", required=True, metavar="PATH", help="retrieval_log table (see `duckscore fuse --help`).")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path), help="Output folder.")
@click.option("--queries", metavar="PATH", help="Optional query_id table: listed queries without hits get an empty-result decision.")
@click.option("--top-n", default=5, show_default=True, type=click.IntRange(min=1), help="Parents per query in contract.jsonl.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb", show_default=True,
              help="spark: shard the log by query_id and run the same DuckDB SQL per shard on Spark "
                   "executors (mapInArrow); outputs are Parquet datasets (folders of parts).")
@click.option("--spark-master", metavar="URL",
              help="Spark master for --engine spark (default: $DUCKSCORE_SPARK_MASTER, the one "
                   "spark-submit gives, else local[*]).")
@click.option("--shards", default=8, show_default=True, type=click.IntRange(min=1),
              help="Query_id shards (Spark tasks) for --engine spark.")
@recipe_options
@policy_options("overall_v1")
@engine_options
@click.pass_obj
def run(progress: Progress, log: str, out_dir: Path, queries: str | None, top_n: int, engine: str,
        spark_master: str | None, shards: int, recipe: str, recipe_overrides: tuple[str, ...],
        policy: str, overrides: tuple[str, ...], settings: EngineSettings) -> None:
    """Fuse a retrieval log, then score its parents: every output of `fuse` and `score`."""
    from .pipeline import run as run_pipeline

    if engine == "spark":
        if queries is not None:
            raise click.UsageError("--queries is not supported with --engine spark yet")
        from .spark_engine import run_on_spark

        spark_result = run_on_spark(log, out_dir, recipe, policy, list(recipe_overrides), list(overrides),
                                    top_n, shards, spark_master, progress)
        progress.step(f"done on Spark: {spark_result.rows['queries']:,} queries, "
                      f"{spark_result.rows['parents']:,} parents -> {out_dir}")
        return
    result = run_pipeline(log, out_dir, recipe, policy, list(recipe_overrides), list(overrides),
                          queries, top_n, settings, progress)
    progress.step(f"done: {result.queries:,} queries, {result.parents:,} parents -> {out_dir}")


@cli.group(cls=DuckscoreGroup)
def sql() -> None:
    """Print the rendered SQL of a capability, to read or to paste into DuckDB — or, with
    --dialect, transpiled for Spark, PostgreSQL, BigQuery, Snowflake or Trino."""


def echo_sql(rendered: Any, dialect: str) -> None:
    from .transpile import to_dialect
    click.echo(rendered.text if dialect == "duckdb" else to_dialect(rendered, dialect), nl=False)


@sql.command("score")
@click.option("--stage", type=click.Choice(SCORE_STAGES), default="contract", show_default=True,
              help="The CTE to select: each stage of the policy can be run on its own.")
@click.option("--top-n", default=5, show_default=True, type=click.IntRange(min=1))
@policy_options("overall_v1")
@dialect_option
def sql_score(stage: str, top_n: int, policy: str, overrides: tuple[str, ...], dialect: str) -> None:
    """The score SQL over a table or view named parent_features.

    \b
    duckscore sql score > score.sql
    duckdb -c "CREATE VIEW parent_features AS FROM 'features.parquet'; $(cat score.sql)"
    """
    from .policy import load_policy
    from .score import SCORE_POLICY, render_parents, render_queries

    loaded = load_policy(SCORE_POLICY, policy, list(overrides))
    if SCORE_STAGES.index(stage) <= SCORE_STAGES.index("scored_parents"):
        rendered = render_parents(loaded, final=stage)
    else:
        rendered = render_queries(loaded, top_n, standalone=True, with_query_ids=False, final=stage)
    echo_sql(rendered, dialect)


# Stages every recipe has (candidates and grid exist only for borda and the full-grid missing policies).
FUSE_STAGES = ("source_settings", "log_rows", "cut", "entries", "lists", "stats", "list_stats",
               "normalized", "per_source", "source_pivot", "fused", "ranked", "fused_items")


@sql.command("fuse")
@click.option("--stage", type=click.Choice(FUSE_STAGES), default="fused_items", show_default=True,
              help="The CTE to select.")
@click.option("--sources", default="dense,sparse,summary", show_default=True,
              help="Comma-separated source names the log holds (the SQL names each one).")
@click.option("--no-rank", is_flag=True, help="The log has no rank column (ranks derived from scores).")
@click.option("--recipe", default="hybrid_v1", show_default=True, metavar="NAME|PATH")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a recipe key.")
@dialect_option
def sql_fuse(stage: str, sources: str, no_rank: bool, recipe: str, overrides: tuple[str, ...],
             dialect: str) -> None:
    """The fusion SQL over a table or view named retrieval_log."""
    from .fuse import FUSE_RECIPE, plan, render_fused
    from .policy import load_policy

    names = sorted({s.strip() for s in sources.split(",") if s.strip()})
    fuse_plan = plan(load_policy(FUSE_RECIPE, recipe, list(overrides)), names, has_rank=not no_rank)
    echo_sql(render_fused(fuse_plan, final=stage), dialect)


ANSWER_STAGES = ("answer_rows", "citation_counts", "ranked_chunks", "relevance", "text_features",
                 "lexicon_hits", "sub_factors", "certainty_parts", "factors", "totals", "percentages",
                 "score_levels", "adjusted_levels", "scored_answers", "contract")


@sql.command("answers")
@click.option("--stage", default="scored_answers", show_default=True,
              type=click.Choice(ANSWER_STAGES),
              help="The CTE to select (contract: the JSON contract rows).")
@click.option("--events", "with_events", is_flag=True, help="Read a table named events too.")
@policy_options("answer_v1")
@dialect_option
def sql_answers(stage: str, with_events: bool, policy: str, overrides: tuple[str, ...], dialect: str) -> None:
    """The answers SQL over tables or views named answers, citations, chunks (and events).

    \b
    duckscore sql answers > answers.sql
    duckdb -c "CREATE VIEW answers AS FROM 'answers.parquet'; CREATE VIEW citations AS ...; $(cat answers.sql)"
    """
    from .answers import ANSWER_POLICY, render_answers, render_contract
    from .policy import load_policy

    loaded = load_policy(ANSWER_POLICY, policy, list(overrides))
    if stage == "contract":
        rendered = render_contract(loaded, with_events, standalone=True)
    else:
        rendered = render_answers(loaded, with_events, final=stage)
    echo_sql(rendered, dialect)


@cli.group(cls=DuckscoreGroup)
def policy() -> None:
    """List and show versioned policies."""


CAPABILITIES = ("score", "fuse", "answers", "evaluate")


def _kind(capability: str):
    from .answers import ANSWER_POLICY
    from .bid_evaluate import EVAL_POLICY
    from .fuse import FUSE_RECIPE
    from .score import SCORE_POLICY

    return {"score": SCORE_POLICY, "fuse": FUSE_RECIPE, "answers": ANSWER_POLICY,
            "evaluate": EVAL_POLICY}[capability]


@policy.command("list")
@click.argument("capability", type=click.Choice(CAPABILITIES), default="score")
def policy_list(capability: str) -> None:
    """The packaged policies (score, answers) or recipes (fuse)."""
    for name in available_policies(_kind(capability)):
        click.echo(name)


@policy.command("show")
@click.argument("name")
@click.option("--capability", type=click.Choice(CAPABILITIES), default="score", show_default=True)
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Apply overrides first.")
def policy_show(name: str, capability: str, overrides: tuple[str, ...]) -> None:
    """The effective, validated parameters of policy NAME (or a YAML path), as JSON."""
    from .policy import load_policy

    loaded = load_policy(_kind(capability), name, list(overrides))
    click.echo(canonical_json(loaded.as_record()))


@cli.group(cls=DuckscoreGroup, invoke_without_command=True)
@click.option("--out", "out_dir", default="duckscore-demo", show_default=True,
              type=click.Path(path_type=Path), help="Output folder.")
@engine_options
@click.pass_context
def demo(ctx: click.Context, out_dir: Path, settings: EngineSettings) -> None:
    """Score the bundled SciFact hybrid-retrieval log (300 queries, 3 retrievers) and summarise.

    Derives seed-000 parent features from the log (sql/features/parent_features_from_log.sql),
    scores them with policy overall_v1, and checks the decisions against the human relevance
    judgments. `duckscore demo evaluate` runs the bid-evaluation demo instead.
    """
    if ctx.invoked_subcommand is not None:
        return
    from .demo import run_demo

    click.echo(run_demo(out_dir, settings, ctx.obj))


@demo.command("evaluate")
@click.option("--out", "out_dir", default="duckscore-evaluate-demo", show_default=True,
              type=click.Path(path_type=Path), help="Output folder.")
@engine_options
@click.pass_obj
def demo_evaluate(progress: Progress, out_dir: Path, settings: EngineSettings) -> None:
    """Evaluate the bundled tender (fixtures/evaluate/tender: two tenants, several suppliers)
    with policy eval_v1 and its rules.yaml, and print one line per supplier."""
    from .demo import run_evaluate_demo

    click.echo(run_evaluate_demo(out_dir, settings, progress))


@cli.command()
@click.option("--input", "input_dir", required=True, type=click.Path(path_type=Path),
              help="Folder of tables: evaluations, criteria, queries, chunks, hits, bid_fields "
                   "(required); rerank, soft_scores, claims, claim_citations, synonyms (optional). "
                   "Each <name>.csv|.parquet|.json|.jsonl or a folder <name>/.")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Output folder (created; files in it are replaced atomically).")
@click.option("--rules", type=click.Path(dir_okay=False, path_type=Path),
              help="Rules file (redline, required, formula). Default: rules.yaml in --input, if any.")
@click.option("--strict-gates", is_flag=True,
              help="Exit with status 1 (after writing everything) when an acceptance gate fails.")
@policy_options("eval_v1")
@engine_options
@click.pass_obj
def evaluate(progress: Progress, input_dir: Path, out_dir: Path, rules: Path | None, strict_gates: bool,
             policy: str, overrides: tuple[str, ...], settings: EngineSettings) -> None:
    """Score supplier bids (seed 002): tenant-safe retrieval with the SQL whitelist branch, rerank
    with degradation, evidence packing, the rule engine, weighted totals, confidence, HITL
    triggers, citation checks and the acceptance gates.

    \b
    Writes to --out:
      contract.jsonl      one object per (evaluation, supplier): total, confidence, risk level,
                          criteria results, citations, human review and why, recommendation
      evaluations.parquet the same with every flag; criteria.parquet per criterion
      queries.parquet     normalised query, constraints, query type, retrieval mode
      candidates.parquet  merged, filtered, reranked candidates (filter_log.parquet: the dropped)
      evidence.parquet    packing order and budgets; rules.parquet; claims.parquet
      degradation_events.parquet, consistency.parquet, gates.json, manifest.json, sql/
    """
    from .bid_evaluate import evaluate_bids

    result = evaluate_bids(input_dir, out_dir, policy, rules, list(overrides), settings, progress)
    failed = result.gates_failed
    progress.step(f"done: {result.evaluations:,} supplier evaluations -> {out_dir}"
                  + (f"; gates failed: {', '.join(failed)}" if failed else ""))
    if strict_gates and failed:
        click.echo(f"duckscore: gates failed: {', '.join(failed)} (see {out_dir}/gates.json)", err=True)
        sys.exit(1)


@cli.group("filter", cls=DuckscoreGroup)
def filter_group() -> None:
    """User-supplied conditions over the whitelisted bid fields (seed 002 §5.3)."""


@filter_group.command("check")
@click.argument("expression")
@click.option("--formula", is_flag=True,
              help="Check a rule formula (arithmetic, least/greatest/abs/round, min/max/avg) "
                   "instead of a condition.")
def filter_check(expression: str, formula: bool) -> None:
    """Validate EXPRESSION without running it: exit 0 with its normalised form, the SQL with
    `$name` placeholders and the bound values; exit 2 with the reason.

    \b
    Fields: supplier_code, qualification_level, registered_capital, bid_price,
            delivery_period, warranty_period.
    Conditions: = <> != < <= > >=, IN (...), NOT IN, BETWEEN, IS [NOT] NULL, AND, OR, NOT,
                + - * / between numbers, parentheses, 'text' and number literals.
    """
    from .whitelist import parse_condition, parse_formula

    click.echo((parse_formula if formula else parse_condition)(expression).describe())


def _db_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--db", required=True, type=click.Path(dir_okay=False, path_type=Path),
                        help="The store: a DuckDB database file.")(command)


def _now_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--now", type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"]),
                        help="The time the job runs at, UTC (default: now). Makes runs reproducible.")(command)


def _utc(moment: Any) -> Any:
    import datetime as dt

    return None if moment is None else moment.replace(tzinfo=dt.timezone.utc)


@cli.group(cls=DuckscoreGroup)
def instincts() -> None:
    """Seed 004: composite confidence of learned behaviours in a DuckDB store — update rules,
    weekly decay, tiers, dashboard."""


@instincts.command("init")
@_db_option
@click.option("--policy", default="instinct_v1", show_default=True, metavar="NAME|PATH",
              help="The instinct policy the store is bound to (its composite column uses its weights).")
def instincts_init(db: Path, policy: str) -> None:
    """Create the store (the seed's four tables) or check an existing one is up to date."""
    from .instincts import init_store

    click.echo(f"{db}: {init_store(db, policy)}")


@instincts.command("ingest")
@_db_option
@click.option("--instincts", "new_instincts", metavar="PATH",
              help="New instincts: id, trigger_text, action_text, domain, user_id [, project_id, source].")
@click.option("--events", metavar="PATH",
              help="Events: event_id, instinct_id, event_type (an update rule), occurred_at "
                   "[, session_id, outcome, description, signals]. Already ingested event ids are skipped.")
@_now_option
def instincts_ingest(db: Path, new_instincts: str | None, events: str | None, now: Any) -> None:
    """Add instincts and apply events in event order, in one transaction (UPDATE_RULES deltas,
    clamped to [0, 1] after each event; a history row per event)."""
    from .instincts import ingest

    if new_instincts is None and events is None:
        raise click.UsageError("give --instincts and/or --events")
    counts = ingest(db, events, new_instincts, _utc(now))
    click.echo(", ".join(f"{value:,} {name.replace('_', ' ')}" for name, value in counts.items()))


@instincts.command("recompute")
@_db_option
@_now_option
def instincts_recompute(db: Path, now: Any) -> None:
    """Overwrite the three scores with their values from the counts (frequency bins, Wilson lower
    bound, the human score's loop); a history row for each instinct that changes."""
    from .instincts import recompute

    counts = recompute(db, _utc(now))
    click.echo(f"{counts['changed']:,} of {counts['instincts']:,} instincts changed")


@instincts.command("decay")
@_db_option
@_now_option
def instincts_decay(db: Path, now: Any) -> None:
    """The weekly job: decay the inactive, deprecate below the threshold, delete the deprecated
    after 30 days. Once per ISO week of --now; transactional."""
    from .instincts import decay

    result = decay(db, _utc(now))
    if result.already_ran:
        click.echo(f"Decay job already ran for the week of {result.week_start}: nothing changed")
    else:
        click.echo(f"Decay job complete: {result.decayed} decayed, {result.deprecated} deprecated, "
                   f"{result.deleted} deleted")


@instincts.command("top")
@_db_option
@click.option("--tier", help="Only this tier (core, strong, moderate, tentative, deprecated).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1))
@click.option("--format", "fmt", type=click.Choice(["table", "jsonl"]), default="table", show_default=True)
def instincts_top(db: Path, tier: str | None, limit: int, fmt: str) -> None:
    """Active instincts by composite confidence, with tier and injection method."""
    from .instincts import top

    frame = top(db, tier, limit)
    if fmt == "jsonl":
        for line in frame.to_json(orient="records", lines=True, force_ascii=False).splitlines():
            click.echo(line)
    else:
        click.echo(frame.to_string(index=False) if len(frame) else "no instincts")


@instincts.command("report")
@_db_option
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--limit", default=12, show_default=True, type=click.IntRange(min=1))
def instincts_report(db: Path, out_dir: Path, limit: int) -> None:
    """The dashboard: radar charts of the three scores and confidence trends, in report.html."""
    from .instincts_report import write_report

    write_report(db, out_dir, limit)
    click.echo(f"{out_dir / 'report.html'}")


from .evaluate import eval_command  # noqa: E402 - heavy modules load on first use

cli.add_command(eval_command)

from .labels import labels_command  # noqa: E402


@cli.command()
@click.option("--features", metavar="PATH", help="parent_features table (as written by `duckscore fuse`).")
@click.option("--log", metavar="PATH", help="Or a retrieval log, fused with --recipe first.")
@click.option("--recipe", default="canonical_rrf", show_default=True, metavar="NAME|PATH",
              help="Fusion recipe for --log.")
@click.option("--labels", required=True, metavar="PATH",
              help="query_id, label (good / ambiguous / bad), e.g. from `duckscore labels`.")
@click.option("--qrels", metavar="PATH",
              help="Optional relevance judgments (query_id, parent_id, relevance): adds the figures "
                   "of 'best parent is relevant'.")
@click.option("--base", default="overall_v2", show_default=True, metavar="NAME|PATH",
              help="The score policy to calibrate (its parameters are the starting point).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Where to write the calibrated policy YAML (replaced atomically).")
@click.option("--version", "version", metavar="NAME",
              help="score_policy_version of the new policy (default: <base>_cal_<label hash>).")
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write report.html, report.json and the plots to this folder.")
@click.option("--thresholds", type=click.Choice(["quantile", "precision"]), default="quantile",
              show_default=True, help="§9.2 quantiles (the seed), or T_high by --target-precision.")
@click.option("--target-precision", default=0.85, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="precision method: the share of good queries wanted at and above T_high.")
@click.option("--hitl-quantile", default=0.7, show_default=True, type=click.FloatRange(0.5, 0.7),
              help="R_hitl = this quantile of the ambiguous top-2 ratios (seed: P50–P70).")
@click.option("--folds", default=5, show_default=True, type=click.IntRange(min=2),
              help="Cross-validation folds (by query, stratified by label).")
@click.option("--passes", default=2, show_default=True, type=click.IntRange(min=1),
              help="Rounds of the coordinate-wise ablation.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, 2**32 - 1),
              help="Seed of the fold assignment and the bootstrap.")
@engine_options
@click.pass_obj
def calibrate(progress: Progress, features: str | None, log: str | None, recipe: str, labels: str,
              qrels: str | None, base: str, out_path: Path, version: str | None, report_dir: Path | None,
              thresholds: str, target_precision: float, hitl_quantile: float, folds: int, passes: int,
              seed: int, settings: EngineSettings) -> None:
    """Calibrate a score policy on labelled queries (seed 000 §9): reference quantiles,
    cross-validated ablation of alpha, beta and the weights, §9.2 thresholds, and a new
    versioned policy file carrying the label-set hash, counts and validation metrics.

    
    Refuses (exit 2, one line) when a class has too few labels to estimate its quantile
    (29 bad for P90, 29 good for P10, 9 ambiguous for P70) or when T_low >= T_high.
    Prints the cross-validated figures against the issue-4 targets on stdout.
    """
    from .calibrate import CalibrationSettings
    from .calibrate import calibrate as run_calibrate

    chosen = CalibrationSettings(folds=folds, seed=seed, passes=passes, thresholds=thresholds,
                                 target_precision=target_precision, hitl_quantile=hitl_quantile)
    result = run_calibrate(labels, out_path, features=features, log=log, recipe=recipe, qrels=qrels,
                           base=base, version=version, settings=chosen, report_dir=report_dir,
                           engine=settings, progress=progress)
    for name, check in result.document["metadata"]["validation"]["targets"].items():
        value = "n/a" if check["value"] is None else f"{check['value']:.3f}"
        state = {True: "met", False: "NOT met", None: "n/a"}[check["met"]]
        pooled = "" if check["pooled_held_out"] is None else f"; pooled held-out {check['pooled_held_out']:.3f}"
        click.echo(f"{name:28s} {value:>7s}  (target {check['target']:g}: {state}{pooled})")
    progress.step(f"done: policy {result.document['score_policy_version']} -> {out_path}")

cli.add_command(labels_command)


def main() -> None:
    cli(prog_name="duckscore")


if __name__ == "__main__":
    sys.exit(main())
