"""duckscore from Python, every result a DuckDB relation.

    import duckscore as ds
    ran = ds.run("fixtures/scifact/retrieval_log.parquet")
    ran.queries.df()                      # or .pl(), .arrow(), or more SQL: ran.queries.filter(…)

Inputs are paths (a file, glob or folder of Parquet, CSV or JSON) or objects DuckDB scans where
they lie: a pandas or Polars DataFrame, an Arrow table or dataset, a DuckDB relation. Each is
checked against its contract exactly as the command line checks it. Without `out` nothing is
written: the results are temp tables of the connection (`con`, else one this module keeps). With
`out` the outputs are written exactly as the command writes them, and the relations read them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ..answering.pipeline import score_answers
from ..answering.policy import AnswerPolicy
from ..common.defaults import DEFAULT_POLICY, DEFAULT_RECIPE
from ..core.inputs import Table
from ..core.policy import load_policy
from ..core.session import Relations
from ..fusion.code_plan import code_target
from ..fusion.code_stages import LOC_FILE
from ..fusion.pipeline import fuse as fuse_log
from ..fusion.policy_recipe import check_features_recipe
from ..fusion.recipe_view import Recipe
from ..fusion.traces import TraceLog
from ..metrics.catalog import DEFAULT_METRICS
from ..metrics.localization import DEFAULT_LEVELS, LevelSummary, LocMeans, evaluate_localization
from ..metrics.localization_inputs import Lines
from ..metrics.retrieval import refuse_no_shared_query, run_evaluation
from ..pack.install import pack_script
from ..runner.dispatch import run_log
from ..runner.incremental import PartitionedResult
from ..runner.job import Engine, Job
from ..runner.partitions import LEDGER
from ..runner.pipeline import RunResult
from ..scoring.pipeline import score as score_features
from ..scoring.policy import SCORE_POLICY
from ..scoring.policy_view import ScorePolicy

if TYPE_CHECKING:
    from ..runner.spark import SparkRunResult

_results = itertools.count(1)
_shared: list[duckdb.DuckDBPyConnection] = []


def connect(db: str | Path | None = None, **pack: Any) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection — in memory, or the database file `db` — with the macro pack loaded
    (ds_rrf, ds_fuse, ds_queries … see docs/in-sql.md); `pack` takes pack_script's options
    (policy, recipe, prefix, sources …)."""
    con = duckdb.connect(":memory:" if db is None else str(db))
    con.execute(pack_script(**pack))
    return con


def connection(con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
    """`con`, or the connection this module keeps for calls that name none."""
    if con is not None:
        return con
    if not _shared:
        _shared.append(connect())
    return _shared[0]


def _as_format(log: Table, log_format: str) -> Table:
    return log if log_format == "retrieval_log" else TraceLog(str(log), log_format)


class _Outputs:
    """Where one call's outputs go, and the relations over them afterwards."""

    def __init__(self, con: duckdb.DuckDBPyConnection, out: str | Path | None, kind: str) -> None:
        self.con = con
        self.folder = None if out is None else Path(out)
        self.kept = Relations(f"duckscore_{kind}_{next(_results)}")

    @property
    def destination(self) -> str | Path | Relations:
        return self.kept if self.folder is None else self.folder

    def records(self, name: str) -> list[dict[str, Any]] | None:
        """A document of JSON Lines (loc_outputs.jsonl), None when the call wrote none."""
        if self.folder is None:
            return self.kept.documents.get(name)
        path = self.folder / name
        if not path.is_file():
            return None
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def relation(self, name: str) -> duckdb.DuckDBPyRelation:
        if self.folder is None:
            return self.con.table(self.kept.tables[name])
        path = str(self.folder / name)
        return self.con.read_json(path) if name.endswith(".jsonl") else self.con.read_parquet(path)


@dataclass(frozen=True)
class Fused:
    """`fuse`: fused.parquet's and parent_features.parquet's rows (None with features=False)."""

    fused: duckdb.DuckDBPyRelation
    parent_features: duckdb.DuckDBPyRelation | None
    recipe: Recipe
    manifest: dict[str, Any]
    loc_outputs: list[dict[str, Any]] | None = None  # a code run's (entities=): docs/code.md


@dataclass(frozen=True)
class Scored:
    """`score`: parents.parquet's, queries.parquet's and contract.jsonl's rows."""

    parents: duckdb.DuckDBPyRelation
    queries: duckdb.DuckDBPyRelation
    contract: duckdb.DuckDBPyRelation
    policy: ScorePolicy
    manifest: dict[str, Any]


@dataclass(frozen=True)
class Ran:
    """`run`: what `fuse` and `score` return, from one call."""

    fused: duckdb.DuckDBPyRelation
    parent_features: duckdb.DuckDBPyRelation
    parents: duckdb.DuckDBPyRelation
    queries: duckdb.DuckDBPyRelation
    contract: duckdb.DuckDBPyRelation
    recipe: Recipe
    policy: ScorePolicy
    manifest: dict[str, Any]
    loc_outputs: list[dict[str, Any]] | None = None  # a code run's (entities=): docs/code.md


@dataclass(frozen=True)
class Evaluated:
    """`eval`: the mean of each metric (keyed as named), and one row per evaluated query."""

    means: dict[str, float]
    per_query: duckdb.DuckDBPyRelation


@dataclass(frozen=True)
class LocEvaluated:
    """`eval_loc`: the means of each level (`means.as_record()` is what `eval --loc --json`
    prints), one row per evaluated instance and level, and each level's counts."""

    means: LocMeans
    per_query: duckdb.DuckDBPyRelation
    summaries: dict[str, LevelSummary]
    ignored: int  # predicted instances the gold does not name


@dataclass(frozen=True)
class Answered:
    """`answers`: answers.parquet's and contract.jsonl's rows."""

    answers: duckdb.DuckDBPyRelation
    contract: duckdb.DuckDBPyRelation
    policy: AnswerPolicy
    manifest: dict[str, Any]


def fuse(
    log: Table,
    recipe: str = DEFAULT_RECIPE,
    set_recipe: Sequence[str] = (),
    *,
    explain: bool = True,
    features: bool = True,
    log_format: str = "retrieval_log",
    out: str | Path | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    rerank_scores: Table | None = None,
    entities: Table | None = None,
    loc_top_k: Sequence[str] = (),
) -> Fused:
    """Fuse a retrieval log (seed 003) as `duckscore fuse` does; `log_format="openinference"`
    reads trace spans (docs/traces.md); `rerank_scores` is --rerank-scores, `entities` and
    `loc_top_k` (`"files=20"` …) --entities and --loc-top-k (docs/code.md)."""
    outputs = _Outputs(connection(con), out, "fuse")
    done = fuse_log(
        _as_format(log, log_format),
        outputs.destination,
        recipe,
        list(set_recipe),
        explain=explain,
        connection=outputs.con,
        features=features,
        rerank_scores=rerank_scores,
        code=code_target(entities, loc_top_k),
    )
    return Fused(
        outputs.relation("fused.parquet"),
        outputs.relation("parent_features.parquet") if features else None,
        done.recipe,
        done.manifest,
        outputs.records(LOC_FILE),
    )


def score(
    features: Table,
    policy: str = DEFAULT_POLICY,
    set: Sequence[str] = (),
    *,
    queries: Table | None = None,
    top_n: int = 5,
    out: str | Path | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    allow_recipe_mismatch: bool = False,
) -> Scored:
    """Score parent features (seed 000) as `duckscore score` does (features that `fuse` wrote
    with another recipe than the policy's are refused, unless allowed)."""
    check_features_recipe(
        load_policy(SCORE_POLICY, policy, list(set)), features, allow_recipe_mismatch
    )
    outputs = _Outputs(connection(con), out, "score")
    done = score_features(
        features, outputs.destination, policy, list(set), queries, top_n, connection=outputs.con
    )
    return Scored(
        outputs.relation("parents.parquet"),
        outputs.relation("queries.parquet"),
        outputs.relation("contract.jsonl"),
        done.policy,
        done.manifest,
    )


def run(
    log: Table,
    recipe: str | None = None,
    policy: str = DEFAULT_POLICY,
    set_recipe: Sequence[str] = (),
    set: Sequence[str] = (),
    *,
    queries: Table | None = None,
    top_n: int = 5,
    explain: bool = True,
    log_format: str = "retrieval_log",
    out: str | Path | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    allow_recipe_mismatch: bool = False,
    rerank_scores: Table | None = None,
    unsorted: bool = False,
    engine: str = "duckdb",
    spark_master: str | None = None,
    shards: int = 8,
    partition_by: str | None = None,
    incremental: bool = False,
    force: bool = False,
    entities: Table | None = None,
    loc_top_k: Sequence[str] = (),
) -> Ran:
    """Fuse a retrieval log and score its parents, as `duckscore run` does (`recipe` None: the
    recipe the policy was calibrated on, else the default); `rerank_scores` is
    --rerank-scores, the keywords from `unsorted` on are run's options of those names.
    `engine="spark"` and `partition_by` write to `out` (a path log only); the relations read
    the datasets written there, the partitions' key as a column."""
    how = Engine(
        engine=engine, spark_master=spark_master, shards=shards, partition_by=partition_by,
        incremental=incremental, force=force,
    )  # fmt: skip
    outputs = _Outputs(connection(con), out, "run")
    job = Job(
        recipe=recipe, policy=policy, recipe_overrides=tuple(set_recipe),
        policy_overrides=tuple(set), top_n=top_n, explain=explain,
        allow_recipe_mismatch=allow_recipe_mismatch, sorted_outputs=not unsorted,
    )  # fmt: skip
    done = run_log(
        _as_format(log, log_format), outputs.destination, job, how, queries=queries,
        connection=outputs.con, rerank_scores=rerank_scores,
        code=code_target(entities, loc_top_k),
    )  # fmt: skip
    if not isinstance(done, RunResult):
        return _ran_from_datasets(outputs, job, done)
    return Ran(
        outputs.relation("fused.parquet"),
        outputs.relation("parent_features.parquet"),
        outputs.relation("parents.parquet"),
        outputs.relation("queries.parquet"),
        outputs.relation("contract.jsonl"),
        done.recipe,
        done.policy,
        done.manifest,
        outputs.records(LOC_FILE),
    )


def _ran_from_datasets(
    outputs: _Outputs, job: Job, done: PartitionedResult | SparkRunResult
) -> Ran:
    """The outputs of a partitioned or Spark run, read where they were written: hive partitions
    (`fused/dt=…/part.parquet`) or Spark's folders of parts (`fused.parquet/part-….parquet`);
    the manifest is Spark's, or the partitioned output's ledger."""
    folder = done.out_dir
    partitioned = isinstance(done, PartitionedResult)

    def table(name: str) -> duckdb.DuckDBPyRelation:
        where = f"{name}/*/*.parquet" if partitioned else f"{name}.parquet/*.parquet"
        return outputs.con.read_parquet(str(folder / where), hive_partitioning=partitioned)

    contract = outputs.con.read_json(
        str(folder / ("contract/*/part*" if partitioned else "contract.jsonl/part-*")),
        hive_partitioning=partitioned,
    )
    recipe, policy = job.resolved().load()
    manifest = (
        json.loads((folder / LEDGER).read_text(encoding="utf-8"))
        if isinstance(done, PartitionedResult)
        else done.manifest
    )
    return Ran(
        table("fused"), table("parent_features"), table("parents"), table("queries"), contract,
        recipe, policy, manifest,
    )  # fmt: skip


def eval(
    run: Table,
    qrels: Table,
    metrics: str | Sequence[str] = DEFAULT_METRICS,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> Evaluated:
    """Retrieval metrics of a run against judgments, as `duckscore eval` computes them."""
    used = connection(con)
    done = run_evaluation(run, qrels, metrics, connection=used)
    refuse_no_shared_query(done)
    name = f"duckscore_eval_{next(_results)}_per_query"
    used.register(name, done.per_query)
    return Evaluated(done.means, used.table(name))


def eval_loc(
    loc: Lines,
    gold: Table,
    *,
    entities: Table | None = None,
    levels: str = DEFAULT_LEVELS,
    k: Sequence[str] = (),
    merge_init: bool = True,
    con: duckdb.DuckDBPyConnection | None = None,
) -> LocEvaluated:
    """Code-localization metrics of loc_outputs.jsonl `loc` (a path, or its lines as dicts: a
    code run's `loc_outputs`) against `gold`, as `duckscore eval --loc` computes them (`k`: its
    --k, "file=1,3,5" …; `entities`: its --entities)."""
    used = connection(con)
    done = evaluate_localization(loc, gold, levels, k, merge_init, entities)
    name = f"duckscore_eval_loc_{next(_results)}_per_query"
    used.register(name, done.per_query)
    return LocEvaluated(LocMeans(**done.means), used.table(name), done.summaries, done.ignored)


def answers(
    answers: Table,
    citations: Table,
    chunks: Table,
    events: Table | None = None,
    policy: str = "answer_v1",
    set: Sequence[str] = (),
    *,
    logprobs: Table | None = None,
    feedback: Table | None = None,
    as_of: str | None = None,
    out: str | Path | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> Answered:
    """Score logged answers (seed 001) as `duckscore answers` does; `logprobs`, `feedback` and
    `as_of` as its --logprobs, --feedback and --as-of (a policy that reads them: answer_v2)."""
    outputs = _Outputs(connection(con), out, "answers")
    done = score_answers(
        answers,
        citations,
        chunks,
        outputs.destination,
        policy,
        events,
        list(set),
        connection=outputs.con,
        logprobs=logprobs,
        feedback=feedback,
        as_of=as_of,
    )
    return Answered(
        outputs.relation("answers.parquet"),
        outputs.relation("contract.jsonl"),
        done.policy,
        done.manifest,
    )
