"""One option factory per concept, so an option is spelled and explained the same on every command.

Nothing here imports a capability's machinery or DuckDB: building the command line stays fast.
The options of a setting declared with its field (core/setting.py: a run's `Job`) are made in
declared.py. Values a capability owns (stage names) are read through LazyChoice only when a
command needs them.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..common.defaults import DEFAULT_POLICY, DEFAULT_RECIPE
from ..engines import DIALECTS
from ..fusion import LOG_FORMATS
from ..runner.job import (
    POLICY_HELP,
    RECIPE_HELP,
    RECIPE_OVERRIDE_HELP,
    SCORED_RECIPE_OVERRIDE_HELP,
    policy_override_help,
)

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    pass


class LazyChoice(click.Choice[str]):
    """A Choice whose values come from `load`, called when they are first needed (the command's
    own --help, or checking a value), not when the command line is built."""

    def __init__(self, load: Callable[[], Sequence[str]]) -> None:
        self._load = load
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._load())

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:
        """click.Choice sets its choices when built; these are loaded instead."""


def engine_options(command: F) -> F:
    """--threads / --memory-limit / --temp-dir, passed to the command as `settings`."""

    @click.option(
        "--threads", type=click.IntRange(min=1), help="DuckDB worker threads (default: all cores)."
    )
    @click.option(
        "--memory-limit",
        metavar="SIZE",
        help="DuckDB memory limit, e.g. 1GB; larger work spills to --temp-dir.",
    )
    @click.option(
        "--temp-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Where DuckDB spills when over the memory limit.",
    )
    @functools.wraps(command)
    def wrapper(
        *args: Any,
        threads: int | None,
        memory_limit: str | None,
        temp_dir: Path | None,
        **kwargs: Any,
    ) -> Any:
        from ..core.connection import EngineSettings

        settings = EngineSettings(threads=threads, memory_limit=memory_limit, temp_dir=temp_dir)
        return command(*args, settings=settings, **kwargs)

    return wrapper  # type: ignore[return-value]


def code_options(command: F) -> F:
    """--entities and --loc-top-k: a code run (docs/code.md), passed as `code` (None without
    --entities)."""

    @click.option(
        "--entities",
        metavar="PATH",
        help="The entities table of the log's repository (duckscore entities): its blocks are "
        "mapped to files, modules and entities, fused at the recipe's target_granularity "
        "(file, module, entity), and loc_outputs.jsonl is written (docs/code.md).",
    )
    @click.option(
        "--loc-top-k",
        "loc_top_k",
        multiple=True,
        metavar="LEVEL=N",
        help="With --entities: the length of loc_outputs.jsonl's lists, LEVEL files (default "
        "5), modules (10) or entities (10). Repeatable.",
    )
    @functools.wraps(command)
    def wrapper(*args: Any, entities: str | None, loc_top_k: tuple[str, ...], **kwargs: Any) -> Any:
        from ..fusion.code_plan import code_target

        return command(*args, code=code_target(entities, loc_top_k), **kwargs)

    return wrapper  # type: ignore[return-value]


def policy_options(default: str, example: str) -> Callable[[F], F]:
    """--policy (a packaged name or a YAML file) and --set KEY=VALUE (`overrides`); `example`
    is an override of that capability's policy, shown in --help."""

    def decorate(command: F) -> F:
        command = click.option(
            "--set",
            "overrides",
            multiple=True,
            metavar="KEY=VALUE",
            help=policy_override_help(example),
        )(command)
        return click.option(
            "--policy",
            default=default,
            show_default=True,
            metavar="NAME|PATH",
            help=POLICY_HELP,
        )(command)

    return decorate


def _refuses_mismatch(command: Callable[..., Any]) -> bool:
    """Whether `command` has --allow-recipe-mismatch (declared below --recipe's decorator, so
    click has recorded it already)."""
    params = getattr(command, "__click_params__", [])
    return any(param.name == "allow_recipe_mismatch" for param in params)


def recipe_options(default: str | None = DEFAULT_RECIPE) -> Callable[[F], F]:
    """--recipe (a packaged fusion recipe or a YAML file) and --set-recipe KEY=VALUE
    (`recipe_overrides`). `default` None: the recipe the command's --policy was calibrated on,
    else the default recipe (the command resolves it)."""

    def decorate(command: F) -> F:
        command = click.option(
            "--set-recipe",
            "recipe_overrides",
            multiple=True,
            metavar="KEY=VALUE",
            help=SCORED_RECIPE_OVERRIDE_HELP
            if _refuses_mismatch(command)
            else RECIPE_OVERRIDE_HELP,
        )(command)
        if default is None:
            return click.option(
                "--recipe",
                metavar="NAME|PATH",
                help=f"{RECIPE_HELP} Default: the recipe the policy was calibrated on, else "
                f"{DEFAULT_RECIPE}.",
            )(command)
        return click.option(
            "--recipe",
            default=default,
            show_default=True,
            metavar="NAME|PATH",
            help=RECIPE_HELP,
        )(command)

    return decorate


def sources_option(what: str) -> Callable[[F], F]:
    """--sources a,b,c: the source names a fusion SQL names one by one (`sources`, sorted)."""
    return click.option(
        "--sources",
        default="dense,sparse,summary",
        show_default=True,
        callback=lambda ctx, param, value: sorted(
            {s.strip() for s in value.split(",") if s.strip()}
        ),
        help=f"Comma-separated source names {what} (the SQL names each one).",
    )


def _policy_file_option(flag: str, default: str, what: str) -> Callable[[F], F]:
    return click.option(
        flag, default=default, show_default=True, metavar="NAME|PATH", help=f"The {what}."
    )


def pack_options(command: F) -> F:
    """The policies whose values become the macros' defaults and the names' prefix, passed to
    the command as `script`: the macro pack they make."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        policy: str,
        overrides: tuple[str, ...],
        recipe: str,
        recipe_overrides: tuple[str, ...],
        instinct_policy: str,
        prefix: str,
        sources: list[str],
        answer_policy: str,
        **kwargs: Any,
    ) -> Any:
        from ..pack.install import pack_script

        script = pack_script(
            policy,
            overrides,
            recipe,
            recipe_overrides,
            instinct_policy,
            prefix,
            sources,
            answer_policy,
        )
        return command(*args, script=script, **kwargs)

    decorated: Any = sources_option("the fusion macros fuse")(wrapper)
    decorated = click.option(
        "--prefix",
        default="ds_",
        show_default=True,
        help="Prefix of every macro name (letters, digits and _).",
    )(decorated)
    decorated = _policy_file_option("--answer-policy", "answer_v1", "answer policy (ds_answers)")(
        decorated
    )
    decorated = _policy_file_option(
        "--instinct-policy", "instinct_v1", "instinct policy (the Wilson z)"
    )(decorated)
    decorated = recipe_options()(decorated)
    return policy_options(DEFAULT_POLICY, "normalization.eps=1e-6")(decorated)  # type: ignore[no-any-return]


class OutputPath(click.Path):
    """A click.Path that refuses an empty value (Path("") would be the current folder)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("is empty: give the output a name", param, ctx)
        return super().convert(value, param, ctx)


def out_dir_option(default: str | None = None) -> Callable[[F], F]:
    """--out: the output folder (`out_dir`), replaced as a whole only when everything succeeds."""
    return click.option(
        "--out",
        "out_dir",
        required=default is None,
        default=default,
        show_default=default is not None,
        type=OutputPath(path_type=Path),
        help="Output folder (created, or replaced as a whole when everything succeeded).",
    )


def out_file_option(what: str) -> Callable[[F], F]:
    """--out: one output file (`out_path`), replaced atomically."""
    return click.option(
        "--out",
        "out_path",
        required=True,
        metavar="FILE",
        type=OutputPath(dir_okay=False, path_type=Path),
        help=f"Where to write {what} (replaced atomically).",
    )


def log_options(required: bool = True, purpose: str = "") -> Callable[[F], F]:
    """--log and --log-format: the command gets `log` as a path, or as trace spans to normalise
    (None when an optional --log is not given)."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(
            *args: Any,
            log: str | None,
            log_format: str,
            doc_id: str | None,
            parent_id: str | None,
            allow_empty: bool,
            query_key: str | None,
            **kwargs: Any,
        ) -> Any:
            if log is not None and log_format != "retrieval_log":
                from ..fusion.traces import TraceLog

                traced = TraceLog(log, log_format, doc_id, parent_id, allow_empty, query_key)
                return command(*args, log=traced, **kwargs)
            for given, flag in ((doc_id, "--doc-id"), (parent_id, "--parent-id"),
                                (allow_empty or None, "--allow-empty"),
                                (query_key, "--query-key")):  # fmt: skip
                if given is not None:
                    raise click.UsageError(f"{flag} needs a --log-format of trace spans")
            return command(*args, log=log, **kwargs)

        decorated: Any = click.option(
            "--query-key",
            metavar="KEY",
            help="With a --log-format of spans: a trace's query_id — `trace` (its trace id, "
            "the default), `input` (its root span's input), or a span attribute (session.id, "
            "metadata.query_id …) on its root span, else its first span that has it; traces "
            "of one value are one query (docs/traces.md#queries-labels-and-judgments).",
        )(wrapper)
        decorated = click.option(
            "--allow-empty",
            is_flag=True,
            help="With a --log-format of spans: `run` decides an export none of whose "
            "retrievals returned a document (every trace low, web fallback) instead of "
            "refusing it.",
        )(decorated)
        decorated = click.option(
            "--parent-id",
            metavar="KEY",
            help="With a --log-format of spans: the document metadata's key that is each "
            "document's parent (default parent_id; a document without it is its own parent).",
        )(decorated)
        decorated = click.option(
            "--doc-id",
            metavar="KEY",
            help="With a --log-format of spans: the document metadata's key (dotted, a.b, or a "
            "JSON pointer, /a/b) that is each document's id, its document.id or not. Without "
            "it a document without an id gets one by a rule (docs/traces.md#documents-without-"
            "an-id).",
        )(decorated)
        decorated = click.option(
            "--log-format",
            type=click.Choice(LOG_FORMATS),
            default="retrieval_log",
            show_default=True,
            help="What --log holds: the retrieval_log table; OpenInference trace spans (Arize "
            "Phoenix's span export, or OTLP JSON of them); or OTLP JSON of GenAI retrieval spans "
            "(the OpenTelemetry conventions', OpenLLMetry's). A span log gives one hit per "
            "retrieved document of each retrieval span (docs/traces.md).",
        )(decorated)
        return click.option(  # type: ignore[no-any-return]
            "--log",
            required=required,
            metavar="PATH",
            help=f"{purpose}retrieval_log table: one row per hit (query_id, source, item_id, "
            "parent_id, score and/or rank). Parquet/CSV/JSON file, glob, or (hive) folder.",
        )(decorated)

    return decorate


log_option = log_options()


def given_and_format(log: Any) -> tuple[str, str]:
    """What `--log` named and its `--log-format`, from the `log` the option gives a command."""
    return (log, "retrieval_log") if isinstance(log, str) else (log.given, log.format)


def queries_option(command: F) -> F:
    return click.option(
        "--queries",
        metavar="PATH",
        help="Optional table with a query_id column: listed queries without "
        "candidates get an empty-result decision (web fallback).",
    )(command)


def rerank_scores_option(command: F) -> F:
    return click.option(
        "--rerank-scores",
        metavar="PATH",
        help="A re-ranker's scores (query_id, item_id, rerank_score), read by the recipe's "
        "rerank block: its top_n fused items re-scored (docs/fuse.md, Re-ranking).",
    )(command)


def stage_option(load: Callable[[], Sequence[str]], default: str) -> Callable[[F], F]:
    """--stage: the CTE of a template to select (each stage of a policy runs on its own)."""
    return click.option(
        "--stage",
        type=LazyChoice(load),
        default=default,
        show_default=True,
        help="The CTE to select: each stage of the policy can be run on its own.",
    )


def dialect_option(command: F) -> F:
    """--dialect: the rendered SQL as is (duckdb) or transpiled."""
    return click.option(
        "--dialect",
        type=click.Choice(("duckdb",) + DIALECTS),
        default="duckdb",
        show_default=True,
        help="Write the SQL for this engine (spark and postgres are tested by execution "
        "against DuckDB; a construct a dialect cannot express exactly is refused).",
    )(command)


def qrels_option(command: F, required: bool = True) -> F:
    """--qrels (`qrels_path`): the relevance judgments `eval`, `labels` and `tune` read."""
    return click.option(
        "--qrels",
        "qrels_path",
        required=required,
        metavar="PATH",
        help="Relevance judgments: query_id, doc_id (or parent_id), relevance (> 0 is relevant).",
    )(command)


def judged_recipe_options(command: F) -> F:
    """What `tune` and `learn` fit a recipe on: --log, --qrels, --recipe and --set-recipe, and
    --folds (cross-validation by query)."""
    command = click.option(
        "--folds", default=5, show_default=True, type=int, help="Cross-validation folds (>= 2)."
    )(command)
    return log_option(qrels_option(recipe_options()(command)))


def run_and_qrels_options(command: F, required: bool = True) -> F:
    """--run / --qrels as `eval` and `labels` read them (run_path, qrels_path)."""
    return click.option(
        "--run",
        "run_path",
        required=required,
        metavar="PATH",
        help="The run: query_id, doc_id (or parent_id, or item_id), and rank and/or score. "
        "Parquet/CSV/JSON file, glob, or (hive) folder.",
    )(qrels_option(command, required))


def optional_run_and_qrels_options(command: F) -> F:
    """`eval`'s --run / --qrels: not required, as its --loc mode reads neither."""
    return run_and_qrels_options(command, required=False)


class StoreLocation(click.ParamType):  # type: ignore[type-arg]
    """An instinct store: a postgresql:// (or postgres://) URL, kept as given, or a DuckDB file."""

    name = "FILE|URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        text = str(value)
        if text.startswith(("postgresql://", "postgres://")):
            return text
        if Path(text).is_dir():
            self.fail(f"{text!r} is a folder, not a DuckDB database file", param, ctx)
        return Path(text)


def db_option(command: F) -> F:
    """--db: the instinct store."""
    return click.option(
        "--db",
        required=True,
        type=StoreLocation(),
        help="The store: a DuckDB database file (one writer process), or a PostgreSQL "
        "database, postgresql://[user[:password]@][host][:port]/dbname[?param=value…] "
        "(many writers).",
    )(command)


class Moment(click.ParamType):  # type: ignore[type-arg]
    """An ISO 8601 date or time, as `date -I`/`date -Is` print it: with an offset or `Z` it is
    converted to UTC, without one it is taken as UTC."""

    name = "ISO 8601 time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, dt.datetime):
            moment = value
        else:
            try:
                moment = dt.datetime.fromisoformat(str(value).strip())
            except ValueError:
                self.fail(
                    f"{value!r} is not an ISO 8601 date or time (e.g. 2026-11-22, "
                    "2026-11-22T08:00:00+01:00, 2026-11-22T07:00:00Z)",
                    param,
                    ctx,
                )
        if moment.tzinfo is None:
            return moment.replace(tzinfo=dt.UTC)
        return moment.astimezone(dt.UTC)


def now_option(command: F) -> F:
    """--now: the moment a store job runs at (UTC), for reproducible runs."""
    return click.option(
        "--now",
        type=Moment(),
        help="The time the job runs at: ISO 8601, converted to UTC; without an offset it is "
        "UTC (default: now). Makes runs reproducible.",
    )(command)
