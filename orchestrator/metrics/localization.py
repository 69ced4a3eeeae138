"""`evaluate_localization()`: the code-localization benchmarks' metrics of loc_outputs.jsonl
against gold locations (`duckscore eval --loc`), computed in SQL (sql/metrics/localization.sql).

The metrics are LocAgent's (its published evaluation code, docs/metrics.md#code-localization-eval
---loc): Acc@k, NDCG@k, P@k, Recall@k and MAP@k per level (file, module, function), each the mean
over the instances whose gold has a location at that level.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.connection import EngineSettings
from ..core.errors import InputError
from ..core.inputs import Table
from ..core.outputs import write_frame
from ..core.records import OMITTED_WHEN_NONE, Report
from ..core.render import RenderedSQL, lit, render
from ..core.reporting import module_logger
from ..core.session import Session
from .catalog import LOC_METRICS, parse_loc_levels
from .localization_inputs import Lines, LocInputs, load_inputs, open_entity_files

if TYPE_CHECKING:
    import pandas as pd

logger = module_logger(__name__)

DEFAULT_LEVELS = "file,module,function"


@dataclass(frozen=True)
class LevelSummary:
    evaluated: int  # instances whose gold has a location at the level
    without_predictions: int  # of those, with no prediction there (no line, or an empty list)
    skipped: int  # gold instances with no location at the level


@dataclass(frozen=True)
class LocMeans(Report):
    """The means of each level evaluated (a metric, Acc@1 … in LocAgent's order, -> its mean);
    a level not evaluated is None. Its record is what `eval --loc --json` prints."""

    file: dict[str, float] | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    module: dict[str, float] | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    function: dict[str, float] | None = field(default=None, metadata=OMITTED_WHEN_NONE)


@dataclass(frozen=True)
class LocResult:
    means: dict[str, dict[str, float]]  # level -> metric name (Acc@1, …) -> mean
    per_query: pd.DataFrame
    levels: dict[str, tuple[int, ...]]
    summaries: dict[str, LevelSummary]
    ignored: int  # predicted instances the gold does not name
    inputs: LocInputs


def metric_columns(levels: dict[str, tuple[int, ...]]) -> list[dict[str, Any]]:
    """The template's `metrics`: LocAgent's metrics in its order, each at every k some level
    asks, with the levels asking it."""
    cutoffs = sorted({k for ks in levels.values() for k in ks})
    return [
        {"kind": kind, "k": k, "column": f"{name}@{k}",
         "levels": [level for level, ks in levels.items() if k in ks]}
        for kind, name in LOC_METRICS.items()
        for k in cutoffs
    ]  # fmt: skip


def render_localization(
    levels: dict[str, tuple[int, ...]], merge_init: bool = True, final: str = "per_query"
) -> RenderedSQL:
    """sql/metrics/localization.sql over loc_predictions and loc_gold."""
    return render(
        "metrics/localization.sql",
        levels=[{"name": level, "max_k": max(ks)} for level, ks in levels.items()],
        cutoffs=sorted({k for ks in levels.values() for k in ks}),
        metrics=metric_columns(levels),
        merge_init=merge_init,
        final=final,
        inputs={"predictions": "loc_predictions", "gold": "loc_gold"},
    )


def evaluate_localization(
    loc: Lines,
    gold: Table,
    levels: str = DEFAULT_LEVELS,
    k: Sequence[str] = (),
    merge_init: bool = True,
    entities: Table | None = None,
    settings: EngineSettings | None = None,
) -> LocResult:
    """Evaluate loc_outputs.jsonl `loc` (a path, or its lines' values) against `gold` (a table
    of instance_id, level, location, or the benchmarks' JSONL) at `levels`, each at its k (`k`:
    "file=1,3,5" …, else the defaults). With `entities` (the table of `duckscore entities`), a gold location whose file
    is not one of its files at the instance's revision is refused. The tables may be paths or
    objects DuckDB scans (a DataFrame …). Raises a DuckscoreError naming the problem."""
    cutoffs = parse_loc_levels(levels, k)
    with Session(settings) as session:
        inputs = load_inputs(session, loc, gold, list(cutoffs))
        _refuse_no_shared_instance(session, inputs)
        per_query_sql = render_localization(cutoffs, merge_init)
        session.check(per_query_sql)  # once: the renderings differ only in their final SELECT
        if entities is not None:
            stage = render_localization(cutoffs, merge_init, "gold_sets")
            session.create("loc_gold_sets", stage, check=False)
            _refuse_unknown_files(session, inputs, entities)
        session.create("loc_per_query", per_query_sql, check=False)
        session.create("loc_means", render_localization(cutoffs, merge_init, "means"), check=False)
        means = session.frame("SELECT * FROM loc_means")
        order = f"list_position({lit(list(cutoffs))}, level)"
        per_query = session.frame(f"SELECT * FROM loc_per_query ORDER BY instance_id, {order}")
        ignored = session.first_row(
            "SELECT count(*) FROM loc_predicted ANTI JOIN loc_gold_instances USING (instance_id)"
        )
    rows = {str(row["level"]): row for row in means.to_dict("records")}
    _refuse_levels_without_gold(inputs, [level for level in cutoffs if level not in rows])
    return LocResult(
        means={level: _level_means(rows[level], level, cutoffs) for level in cutoffs},
        per_query=per_query,
        levels=cutoffs,
        summaries={
            level: LevelSummary(
                evaluated=int(rows[level]["n_instances"]),
                without_predictions=int(rows[level]["n_without_predictions"]),
                skipped=inputs.gold_instances - int(rows[level]["n_instances"]),
            )
            for level in cutoffs
        },
        ignored=int(ignored[0]) if ignored else 0,
        inputs=inputs,
    )


def _level_means(
    row: Mapping[Hashable, Any], level: str, levels: dict[str, tuple[int, ...]]
) -> dict[str, float]:
    """The means row of one level: its own metrics, in LocAgent's order."""
    return {
        c["column"]: float(row[c["column"]]) for c in metric_columns(levels) if level in c["levels"]
    }


def _refuse_no_shared_instance(session: Session, inputs: LocInputs) -> None:
    shared = session.first_row(
        "SELECT count(*) FROM loc_predicted SEMI JOIN loc_gold_instances USING (instance_id)"
    )
    if shared and shared[0]:
        return
    raise InputError(
        f"--loc ({inputs.loc}) and --gold ({inputs.gold}) share no instance: none of the "
        f"{inputs.predicted_instances:,} predicted instances is among the "
        f"{inputs.gold_instances:,} of the gold, so every metric would be 0 (are its "
        "instance ids the gold's?)"
    )


def _refuse_unknown_files(session: Session, inputs: LocInputs, entities: Table) -> None:
    """A gold location whose file part (before the first `:`) is not a file of --entities at
    its instance's revision, or, when the gold gives none, at any revision of the table."""
    entities = open_entity_files(session, entities).given
    unknown = session.first_row(
        "SELECT g.instance_id, g.location_id, r.revision, count(*) OVER () "
        "FROM loc_gold_sets AS g JOIN loc_gold_instances AS r USING (instance_id) "
        "ANTI JOIN loc_entities AS e ON e.file_path = split_part(g.location_id, ':', 1) "
        "AND (r.revision IS NULL OR e.revision IS NOT DISTINCT FROM r.revision) "
        "ORDER BY g.instance_id, g.location_id LIMIT 1"
    )
    if unknown is None:
        return
    instance, location, revision, count = unknown
    at = "" if revision is None else f" at revision {revision!r}"
    more = f" (and {count - 1:,} more)" if count > 1 else ""
    raise InputError(
        f"--gold ({inputs.gold}): instance {instance!r}: location {location!r} names no file "
        f"of --entities ({entities}){at}{more}"
    )


def _refuse_levels_without_gold(inputs: LocInputs, levels: list[str]) -> None:
    if levels:
        raise InputError(
            f"--gold ({inputs.gold}): no instance has a {' or '.join(levels)} location, so "
            "there is nothing to evaluate there (choose the levels with --levels)"
        )


def write_per_query(result: LocResult, path: Path) -> None:
    """instance_id, level, n_gold, n_predicted and one column per metric (empty where the level
    does not ask it), in the format the suffix of `path` names."""
    write_frame(
        result.per_query, path, "--per-query",
        inputs={"--loc": result.inputs.loc, "--gold": result.inputs.gold},
    )  # fmt: skip


def format_tables(result: LocResult) -> str:
    """One (metric, mean) table per level, each under a line of its counts; then the predicted
    instances the gold does not name."""
    blocks = []
    for level, means in result.means.items():
        summary = result.summaries[level]
        width = max(len("metric"), *(len(name) for name in means)) + 2
        lines = [
            f"{level}: {summary.evaluated:,} instances evaluated ({summary.without_predictions:,} "
            f"without predictions); {summary.skipped:,} gold instances without a {level} "
            "location skipped",
            f"{'metric':<{width}}{'mean':>10}",
        ]
        lines += [f"{name:<{width}}{value:>10.6f}" for name, value in means.items()]
        blocks.append("\n".join(lines))
    blocks.append(f"{result.ignored:,} predicted instances without gold ignored")
    return "\n\n".join(blocks)
