"""The score stages of the graph (core/graph.py): sql/score/parents.sql scores every candidate
parent (scored_parents), sql/score/queries.sql decides per query (score_contract); each CTE of
the two templates is one that `duckscore sql score --stage` shows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core.errors import InputError, PolicyError
from ..core.graph import Graph, Publication, Render, Stage
from ..core.render import ColumnParameter, RenderedSQL, ident, render
from ..core.reporting import module_logger
from ..core.session import Session
from .policy import BETA_CLIP
from .policy_view import ScorePolicy
from .scale import scale_warning
from .tables import PARENT_FEATURES, QUERY_IDS

logger = module_logger(__name__)

# the relations the score stages make, and what they read
SCORED_PARENTS = "scored_parents"
SCORE_CONTRACT = "score_contract"
FEATURES = PARENT_FEATURES.name  # the parent features: an input, or the fusion stage so named
QUERY_LIST = QUERY_IDS.name  # the queries each of which gets a row, candidates or not (an input)
PARENTS_FILE, QUERIES_FILE, CONTRACT_FILE = "parents.parquet", "queries.parquet", "contract.jsonl"

# every CTE of the two templates, in order: parents.sql up to scored_parents, then queries.sql
STAGES = (
    "features",
    "bounds",
    "normalized",
    "subscores",
    "combined",
    "ranked",
    "flagged",
    "scored_parents",
    "per_query",
    "all_queries",
    "query_actions",  # only with diagnostics (issue 50)
    "probabilities",  # only with a probability map (issue 24)
    "decisions",
    "contract",
)


def query_columns(policy: ScorePolicy) -> tuple[str, ...]:
    """queries.parquet's columns: the contract's flat ones, p_good when the policy maps to it,
    actions when it has diagnostics."""
    with_probability = ("p_good",) if policy.probability is not None else ()
    with_actions = ("actions",) if policy.diagnostics else ()
    return (
        "query_id",
        "best_parent_id",
        "best_overall_score",
        *with_probability,
        "confidence_level",
        "top2_ratio",
        "need_hitl",
        "web_fallback",
        *with_actions,
    )


def score_graph(
    policy: ScorePolicy,
    top_n: int | ColumnParameter = 5,
    *,
    with_query_ids: bool = False,
    where: str = "--features",
    sorted_outputs: bool = True,
) -> Graph:
    """The score stages of a policy, reading the parent features (an input, or the fusion
    stage of that name) and, `with_query_ids`, the queries every one of which gets a row:
    scored_parents (parents.parquet) and score_contract (queries.parquet, contract.jsonl).
    `where` names the features in a refusal; `sorted_outputs=False` publishes parents.parquet
    in the engine's order."""

    def guarded(session: Session, inputs: Mapping[str, str]) -> Stage:
        check_evidence_columns(session, policy, where, inputs["parent_features"])
        return parents

    parents = Stage(
        SCORED_PARENTS,
        "score/parents.sql",
        (("parent_features", FEATURES),),
        _parents(policy),
        publications=(
            Publication(PARENTS_FILE, order=("query_id", "rank") if sorted_outputs else ()),
        ),
        step="scoring parents",
        before=guarded,
    )
    contract = Stage(
        SCORE_CONTRACT,
        "score/queries.sql",
        (
            ("scored_parents", SCORED_PARENTS),
            *((("query_ids", QUERY_LIST),) if with_query_ids else ()),
        ),
        _contract(policy, top_n),
        publications=(
            Publication(QUERIES_FILE, query_columns(policy), ("query_id",)),
            Publication(CONTRACT_FILE, order=("query_id",)),
        ),
        step="deciding per query",
        parameters=((top_n.name, "BIGINT"),) if isinstance(top_n, ColumnParameter) else (),
    )
    return Graph((parents, contract), (FEATURES, QUERY_LIST) if with_query_ids else (FEATURES,))


def _parents(policy: ScorePolicy) -> Render:
    def rendered(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        return render_parents(policy, final or SCORED_PARENTS, inputs["parent_features"], ordered)

    return rendered


def _contract(policy: ScorePolicy, top_n: int | ColumnParameter) -> Render:
    def rendered(
        inputs: Mapping[str, str], *, final: str | None = None, ordered: bool = False
    ) -> RenderedSQL:
        return render_queries(
            policy,
            top_n,
            standalone=False,
            with_query_ids="query_ids" in inputs,
            final=final or "contract",
            scored_parents=inputs["scored_parents"],
            query_ids=inputs.get("query_ids"),
        )

    return rendered


def render_parents(
    policy: ScorePolicy,
    final: str = SCORED_PARENTS,
    features_table: str = FEATURES,
    ordered: bool = True,
) -> RenderedSQL:
    """parents.sql alone (the graph's stage renders it; `sql score` and tests read its CTEs)."""
    return render(
        "score/parents.sql",
        policy=policy.parameters,
        inputs={"parent_features": features_table},
        final=final,
        ordered=ordered,
    )


def render_queries(
    policy: ScorePolicy,
    top_n: int | ColumnParameter,
    standalone: bool,
    with_query_ids: bool,
    final: str = "contract",
    *,
    scored_parents: str = SCORED_PARENTS,
    query_ids: str | None = None,
) -> RenderedSQL:
    """queries.sql alone: over scored_parents, or `standalone` from the parent features, its
    parent stages computed in the same statement (`sql score`)."""
    return render(
        "score/queries.sql",
        policy=policy.parameters,
        policy_version=policy.version,
        beta_clip=BETA_CLIP,
        top_n=top_n,
        standalone=standalone,
        final=final,
        inputs={
            "parent_features": FEATURES,
            "scored_parents": SCORED_PARENTS if standalone else scored_parents,
            "query_ids": (query_ids or QUERY_LIST) if with_query_ids else None,
        },
    )


def render_stage(policy: ScorePolicy, stage: str, top_n: int = 5) -> RenderedSQL:
    """One CTE of STAGES as a query over a table or view named parent_features."""
    if stage == "probabilities" and policy.probability is None:
        raise PolicyError(
            f"stage probabilities: policy {policy.version} has no probability map "
            "(`duckscore calibrate` fits one)"
        )
    if stage == "query_actions" and not policy.diagnostics:
        raise PolicyError(
            f"stage query_actions: policy {policy.version} has no diagnostics block "
            "(docs/score.md#diagnostics-that-act-13)"
        )
    if STAGES.index(stage) <= STAGES.index("scored_parents"):
        return render_parents(policy, final=stage)
    return render_queries(policy, top_n, standalone=True, with_query_ids=False, final=stage)


def check_evidence_columns(
    session: Session, policy: ScorePolicy, where: str, features_table: str = FEATURES
) -> None:
    """An optional column the input lacks reads as NULL in the typed view: require values."""
    for name in policy.evidence_columns:
        nulls = session.first_row(
            f"SELECT count(*) FILTER (WHERE {ident(name)} IS NULL) FROM {ident(features_table)}"
        )
        if nulls and nulls[0]:
            raise InputError(
                f"{where}: policy {policy.version} needs column {name!r} (missing, or "
                f"null in {nulls[0]:,} rows), which `duckscore fuse` writes to "
                f"parent_features.parquet"
            )


@dataclass(frozen=True)
class DecisionCounts:
    """How a policy decided the queries of one run, and the thresholds that decided it."""

    queries: int
    levels: dict[str, int]
    need_hitl: int
    web_fallback: int
    level_rule: str  # the thresholds behind the levels
    hitl_rule: str  # what raises need_hitl

    def summary(self) -> str:
        """One line: the levels, HITL and web fallback, each beside the threshold behind it."""
        levels = ", ".join(f"{level} {self.levels[level]:,}" for level in LEVELS)
        return (
            f"{self.queries:,} quer{'y' if self.queries == 1 else 'ies'}: {levels} "
            f"({self.level_rule}); need_hitl "
            f"{self.need_hitl:,} ({self.hitl_rule}); web_fallback "
            f"{self.web_fallback:,} (low without HITL, or no candidate)"
        )

    def warnings(self, policy: ScorePolicy, off_scale: str | None = None) -> list[str]:
        """What looks wrong in the decisions: a log on another score scale than the policy's
        calibration (`off_scale`: its warning, which names that cause and the remedy), else one
        level for every query; most sent to a human."""
        found = [off_scale] if off_scale else []
        one_level = next((lvl for lvl in LEVELS if self.levels[lvl] == self.queries), None)
        if not off_scale and self.queries >= WARN_FROM and one_level is not None:
            remedy = (
                "`duckscore recalibrate` moves them to this log"
                if policy.probability is not None
                else "`duckscore calibrate` fits a policy to labelled queries of this log, and "
                "the default overall_v3 is calibrated"
            )
            found.append(
                f"policy {policy.version} rates all {self.queries:,} queries {one_level}: its "
                f"thresholds do not separate this log's queries ({remedy})"
            )
        if self.queries >= WARN_FROM and self.need_hitl > HITL_WARN_SHARE * self.queries:
            found.append(
                f"policy {policy.version} asks a human about {self.need_hitl:,} of "
                f"{self.queries:,} queries ({self.hitl_rule})"
            )
        return found


LEVELS = ("high", "medium", "low")
WARN_FROM = 10  # queries: fewer say little about a policy's thresholds
HITL_WARN_SHARE = 0.5


def decided(session: Session, policy: ScorePolicy, table: str = SCORE_CONTRACT) -> DecisionCounts:
    """The decisions of `table` counted, and what looks wrong in them warned about."""
    counts = decision_counts(session, policy, table)
    off_scale = (
        scale_warning(session, policy, table, counts.levels)
        if counts.queries >= WARN_FROM
        else None
    )
    for warning in counts.warnings(policy, off_scale):
        logger.warning(warning)
    return counts


def decision_counts(
    session: Session, policy: ScorePolicy, table: str = SCORE_CONTRACT
) -> DecisionCounts:
    """The decisions in `table` (score_contract, or a run's queries.parquet read back: one row a
    query with confidence_level, need_hitl and web_fallback), counted."""
    row = session.first_row(
        "SELECT count(*), "
        + ", ".join(f"count(*) FILTER (WHERE confidence_level = '{lvl}')" for lvl in LEVELS)
        + ", count(*) FILTER (WHERE need_hitl), count(*) FILTER (WHERE web_fallback) "
        f"FROM {table}"
    )
    assert row is not None  # an aggregate has one row
    probability = policy.probability
    if probability is not None and probability.levels_by == "probability":
        rule = f"by p_good: p_low {probability.p_low:.4g}, p_high {probability.p_high:.4g}"
    else:
        rule = f"by best score: T_low {policy.t_low:.4g}, T_high {policy.t_high:.4g}"
    return DecisionCounts(
        int(row[0]),
        dict(zip(LEVELS, (int(v) for v in row[1:4]))),
        int(row[4]),
        int(row[5]),
        rule,
        f"top-2 ratio >= R_hitl {policy.r_hitl:.4g}"
        + "".join(f", or {flag}" for flag in policy.hitl_flags),
    )
