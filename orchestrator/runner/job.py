"""`Job`: what a run decides with — recipe, policy, their overrides, top-n, explanations, engine
settings — built once by whoever is asked (`duckscore run`, its partitions and Spark shards,
`ds.run`, `ds.scorer`, `duckscore serve`) and handed down whole (issue 33, item 5)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from ..common.defaults import DEFAULT_POLICY, DEFAULT_RECIPE
from ..core.setting import check_settings, setting

if TYPE_CHECKING:
    from ..core.connection import EngineSettings
    from ..fusion.recipe_view import Recipe
    from ..scoring.policy_view import ScorePolicy

# The examples work as printed (tests/cli/test_help_examples.py runs each on its command); a
# command that scores with a policy calibrated on a recipe (it has --allow-recipe-mismatch)
# refuses a changed one without the flag, and its help says so.
RECIPE_HELP = (
    "A packaged fusion recipe (canonical_rrf, hybrid_v1, or an engine's preset such as "
    "qdrant_rrf: duckscore policy list fuse) or a recipe YAML file."
)
RECIPE_OVERRIDE_HELP = (
    "Override a recipe key (dotted, e.g. fusion.k=20, or sources.<source>.weight=0.7 for one "
    "of the sources fused). Repeatable."
)
SCORED_RECIPE_OVERRIDE_HELP = (
    "Override a recipe key (dotted, e.g. fusion.k=20, or sources.<source>.weight=0.7 for one "
    "of the sources fused), with --allow-recipe-mismatch when --policy was calibrated on the "
    "recipe unchanged (the default policy was). Repeatable."
)
POLICY_HELP = "A packaged policy name or a policy YAML file."


def policy_override_help(example: str) -> str:
    """--set's help, with an override of the command's policy as its example."""
    return f"Override a policy parameter (dotted for nested keys, e.g. {example}). Repeatable."


class Loaded(NamedTuple):
    recipe: Recipe
    policy: ScorePolicy

    @property
    def cross_query(self) -> tuple[str, ...]:
        """Why a query's numbers may depend on the other queries scored with it (runner/
        per_query.py); () when the job is per query."""
        from .per_query import cross_query_reasons

        return cross_query_reasons(self.recipe, self.policy)

    @property
    def per_query(self) -> bool:
        """Every number of a query depends only on its own rows: requests may share a
        statement (the live scorer's batches)."""
        return not self.cross_query


@dataclass(frozen=True, kw_only=True)
class Job:
    """`recipe` None: the recipe the policy was calibrated on, else the default recipe; a
    recipe that is not the policy's is refused unless `allow_recipe_mismatch`. Each field is
    declared with its flag (core/setting.py): `cli/declared.py: job_options` builds them."""

    recipe: str | None = setting(
        None,
        "--recipe",
        f"{RECIPE_HELP} Default: the recipe the policy was calibrated on, else {DEFAULT_RECIPE}.",
        metavar="NAME|PATH",
    )
    policy: str = setting(DEFAULT_POLICY, "--policy", POLICY_HELP, metavar="NAME|PATH")
    recipe_overrides: tuple[str, ...] = setting(
        (), "--set-recipe", SCORED_RECIPE_OVERRIDE_HELP, metavar="KEY=VALUE", repeated=True
    )
    policy_overrides: tuple[str, ...] = setting(
        (),
        "--set",
        policy_override_help("risk_flags.single_spike.max_score_norm_at_least=0.9"),
        metavar="KEY=VALUE",
        repeated=True,
    )
    top_n: int = setting(5, "--top-n", "Parents per query in contract.jsonl.", minimum=1)
    explain: bool = setting(
        True,
        "--explain/--no-explain",
        "Per-source contributions and the best provenance of every fused item in "
        "fused.parquet. --no-explain leaves both NULL: the same scores and ranks, for about "
        "a fifth less CPU in a whole run (1M-10M rows, docs/performance.md).",
    )
    allow_recipe_mismatch: bool = setting(
        False,
        "--allow-recipe-mismatch",
        "Score features of another recipe than the one the policy was calibrated on "
        "(its thresholds and p_good then do not hold as calibrated).",
    )
    settings: EngineSettings | None = None  # --threads, --memory-limit, --temp-dir
    sorted_outputs: bool = setting(
        True,
        "--unsorted",
        "Write fused.parquet, parent_features.parquet and parents.parquet in the engine's "
        "order, not sorted by query: the same rows, about a tenth less CPU at 10M log rows "
        "(docs/performance.md). queries.parquet and contract.jsonl stay sorted.",
        inverted=True,
    )

    def __post_init__(self) -> None:
        check_settings(self)

    def load(self) -> Loaded:
        """The recipe and the policy, loaded and checked: one line naming what is wrong."""
        from ..fusion.policy_recipe import recipe_for_policy
        from ..scoring.policy_view import load_score_policy

        policy = load_score_policy(self.policy, list(self.policy_overrides))
        recipe = recipe_for_policy(
            policy.policy, self.recipe, list(self.recipe_overrides), self.allow_recipe_mismatch
        )
        return Loaded(recipe, policy)

    def resolved(self) -> Job:
        """The job with its recipe named (checked against the policy once, here): for the
        paths that hand it on to partitions and Spark executors."""
        from ..fusion.policy_recipe import recipe_name_for

        name = recipe_name_for(self.load().policy.policy, self.recipe)
        return replace(self, recipe=name, allow_recipe_mismatch=True)


ENGINES = ("duckdb", "spark")


@dataclass(frozen=True, kw_only=True)
class Engine:
    """Where a run computes — DuckDB here, or Spark executors — and whether the log is
    hive-partitioned, each partition scored on its own (runner/dispatch.py decides by it)."""

    engine: str = setting(
        "duckdb",
        "--engine",
        "spark: shard the log by query_id and run the same DuckDB SQL per shard on Spark "
        "executors (mapInArrow); outputs are Parquet datasets (folders of parts).",
        choices=ENGINES,
    )
    spark_master: str | None = setting(
        None,
        "--spark-master",
        "Spark master for --engine spark (default: $DUCKSCORE_SPARK_MASTER, the one "
        "spark-submit gives, else local[*]).",
        metavar="URL",
    )
    shards: int = setting(
        8,
        "--shards",
        "Query_id shards (Spark tasks) for --engine spark (with --partition-by: for all "
        "the partitions to compute, in one Spark job).",
        minimum=1,
    )
    partition_by: str | None = setting(
        None,
        "--partition-by",
        "The log is hive-partitioned by KEY (logs/KEY=VALUE/…): score each partition on its "
        "own into KEY=VALUE folders of every output, with a ledger.json (docs/partitions.md).",
        metavar="KEY",
    )
    incremental: bool = setting(
        False,
        "--incremental",
        "With --partition-by: compute only partitions whose files changed or whose outputs "
        "are damaged since the ledger's run; leave the others byte for byte.",
    )
    force: bool = setting(
        False,
        "--force",
        "With --partition-by --incremental: compute every partition again when the recipe, "
        "policy or options are not those of the ledger (refused without it).",
    )

    def __post_init__(self) -> None:
        check_settings(self)


DEFAULT_JOB = Job()  # the default policy, its recipe, top 5, explanations, DuckDB's settings
