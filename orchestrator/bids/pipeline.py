"""`score_bids()`: seed 002's bid evaluation — tenant-safe retrieval, rules, scores, HITL.

It opens the tables of an --input folder, checks them and their references, compiles the user's
SQL-branch conditions and the rules file through the whitelist, renders the stages
(sql/bids/_bid_stages.sql) with those fragments, checks the SQL with sqlglot, runs it with the
literals bound as parameters, and writes every stage table, the contract and the gates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.connection import EngineSettings
from ..core.ctes import create_each
from ..core.errors import InputError, PolicyError, WhitelistError
from ..core.inputs import Table
from ..core.outputs import check_output_dir
from ..core.render import RenderedSQL, ident, render
from ..core.reporting import module_logger
from ..core.session import Session
from ..core.tables import OpenedInput
from .gates import RAGAS_METRICS, GatesReport, gates_report
from .policy import (
    DATE_PATTERN,
    FULL_WIDTH,
    HALF_WIDTH,
    NUMBER_PATTERN,
    NUMERIC_FIELDS,
    PIECE_PATTERN,
    SEPARATOR_ENDS,
    SEPARATOR_RUN,
    SEPARATOR_SPACED,
    SEPARATOR_SQUEEZE,
    TOKEN_PATTERN,
    BidPolicy,
    keyword_pattern,
    load_bid_policy,
)
from .rules import Rule, check_rules_match_criteria, load_rules, rule_record
from .tables import check_synonym_conflicts, check_synonyms, open_bid_inputs, open_ragas
from .tender_fields import refuse_unread_fields
from .whitelist import Compiled, parse_condition

logger = module_logger(__name__)

# output file -> (stage, sort keys)
STAGE_OUTPUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "queries.parquet": ("typed_queries", ("query_id",)),
    "filter_log.parquet": ("filter_log", ("query_id", "chunk_id", "dropped_by")),
    "candidates.parquet": ("candidates", ("query_id", "chunk_id")),
    "degradation_events.parquet": ("degradation_events", ("query_id", "chunk_id")),
    "evidence.parquet": ("evidence", ("query_id", "keep_order")),
    "rules.parquet": ("rule_results", ("tenant_id", "project_id", "supplier_id", "rule_id")),
    "criteria.parquet": ("criteria_results", ("evaluation_id", "supplier_id", "criteria_id")),
    "consistency.parquet": ("run_totals", ("evaluation_id", "supplier_id", "run_id")),
    "claims.parquet": ("claim_results", ("claim_id",)),
    "evaluations.parquet": ("evaluation_results", ("evaluation_id", "supplier_id")),
}
CALIBRATION_KEYS = ("evaluation_id", "supplier_id", "criteria_id", "run_id")


@dataclass(frozen=True)
class SqlBranch:
    text_parameter: str
    text: str
    condition: Compiled


@dataclass(frozen=True)
class BidsResult:
    out_dir: Path
    policy: BidPolicy
    evaluations: int
    gates: GatesReport
    manifest: dict[str, Any]

    @property
    def gates_failed(self) -> list[str]:
        return [g.name for g in self.gates.failed]


def score_bids(
    input_dir: str | Path,
    out_dir: str | Path,
    policy: str = "bid_v1",
    rules: str | Path | None = None,
    overrides: list[str] | None = None,
    settings: EngineSettings | None = None,
    ragas: Table | None = None,
) -> BidsResult:
    """Evaluate the bids of `input_dir` into `out_dir` (nothing is written unless all succeeds).
    `ragas`: §12.1's precomputed per-query RAGAS values (a file or a DataFrame), which decide
    the RAGAS gates of a policy that sets their thresholds."""
    loaded = load_bid_policy(policy, overrides)
    if ragas is not None:
        check_ragas_thresholds(loaded)
    input_dir = Path(input_dir)
    if not input_dir.is_dir():
        raise InputError(f"--input: no such folder: {input_dir}")
    rules_path = Path(rules) if rules is not None else input_dir / "rules.yaml"
    rule_list = load_rules(rules_path) if rules is not None or rules_path.is_file() else []
    check_output_dir(out_dir, "--out", {"--input": input_dir, "--rules": rules, "--ragas": ragas})
    with Session(settings) as session:
        logger.info(f"checking inputs in {input_dir} (policy {loaded.version})")
        opened = open_bid_inputs(session, input_dir)
        refuse_unread_fields(opened.get("tender_fields"), loaded.version, loaded.reads_fields)
        check_rules_match_criteria(session, rule_list, rules_path)
        branches = sql_branches(session, opened["queries"])
        check_synonyms(session, opened)
        if ragas is not None:
            open_ragas(session, ragas, opened["queries"])
        context = _context(loaded, rule_list, branches, ragas is not None)
        params = {
            name: value for branch in branches for name, value in _branch_params(branch).items()
        }
        params.update(
            {
                name: value
                for rule in rule_list
                if rule.expression
                for name, value in rule.expression.params.items()
            }
        )
        if "synonyms" in opened:
            by_term = ("tenant_id", "project_id", "term_norm", "term")
            conflicts = render(
                "bids/bids.sql", final="synonym_conflicts", order_by=by_term, **context
            )
            check_synonym_conflicts(session, opened, conflicts, params)
        logger.info(f"scoring {opened['evaluations'].rows:,} supplier evaluations")
        # the stages, checked as one statement and run one at a time (core/ctes.py); recorded
        # as the statement selecting the last, evaluation_results
        stages = render("bids/bids.sql", final="evaluation_results", order_by=(), **context)
        session.check(stages)
        create_each(session, stages, params)
        if loaded.calibration is not None:
            calibrate(session, stages, params)
        elif "anchors" in opened:
            raise PolicyError(
                f"{opened['anchors'].label} ({opened['anchors'].given}): policy "
                f"{loaded.version} does not calibrate "
                "(no calibration.method; bid_v2 calibrates by anchor samples)"
            )
        contract_sql = render("bids/contract.sql", **context)
        gates_sql = render("bids/gates.sql", **context)
        session.check(contract_sql)
        session.check(gates_sql)
        logger.info("writing outputs")
        with session.publish(out_dir) as out:
            for name, (stage, keys) in STAGE_OUTPUTS.items():
                check_finite(session, stage, keys, name)
                out.copy(name, f"SELECT * FROM {ident(stage)} ORDER BY {_order(keys)}", stages)
            if loaded.calibration is not None:
                sql = render("bids/calibration.sql", final="calibration", order_by=CALIBRATION_KEYS)
                out.copy("calibration.parquet", sql.text, sql)
            out.copy("contract.jsonl", contract_sql.text, contract_sql)
            gates = gates_report(session, gates_sql, loaded, ragas is not None)
            out.json("gates.json", gates.as_record())
            manifest = out.manifest(
                "bids",
                loaded.as_record(),
                session.settings.record(),
                rules={
                    "path": str(rules_path) if rule_list else None,
                    "rules": [rule_record(r) for r in rule_list],
                },
            )
    return BidsResult(Path(out_dir), loaded, out.counts["evaluations.parquet"], gates, manifest)


def calibrate(session: Session, stages: RenderedSQL, params: dict[str, Any]) -> None:
    """§8.4: the first pass's flags choose the soft scores to calibrate (sql/bids/calibration.sql);
    the stages then run again over the calibrated scores, which replace the input's."""
    for table, stage in (
        ("calibration_before", "calibration_runs"),
        ("calibrated_scores", "calibrated_scores"),
    ):
        session.create(table, render("bids/calibration.sql", final=stage, order_by=()))
    # the second pass reads the calibrated scores where it read the input's typed view
    session.con.execute("CREATE OR REPLACE TEMP VIEW soft_scores AS FROM calibrated_scores")
    create_each(session, stages, params)


def check_finite(session: Session, table: str, keys: tuple[str, ...], output: str) -> None:
    """Every number of `table` is finite: inputs whose products or sums pass a double's range
    (a criterion weight of 1e308 times a score of 50) stop the run, naming the first such row
    of `output`, before JSON could hold `Infinity` or `NaN`."""
    numbers = [name for name, kind in session.schema(table).items() if kind in ("DOUBLE", "FLOAT")]
    if not numbers:
        return
    found = session.first_row(
        f"SELECT {', '.join(ident(name) for name in (*keys, *numbers))} FROM {ident(table)} "
        f"WHERE {' OR '.join(f'NOT isfinite({ident(name)})' for name in numbers)} "
        f"ORDER BY {_order(keys)} LIMIT 1"
    )
    if found is None:
        return
    where = ", ".join(f"{key}={value!r}" for key, value in zip(keys, found))
    column, value = next(
        (name, value)
        for name, value in zip(numbers, found[len(keys) :])
        if value is not None and not math.isfinite(value)
    )
    raise InputError(
        f"{output} ({where}): {column} is {value}: the inputs' numbers overflow a double "
        "(criteria weights, max_score, scores or a formula's fields too large)"
    )


def _order(keys: tuple[str, ...]) -> str:
    return ", ".join(f"{ident(k)} ASC NULLS LAST" for k in keys)


def check_ragas_thresholds(policy: BidPolicy) -> None:
    """A --ragas table needs the policy's thresholds for the gates it decides."""
    unset = [name for name in RAGAS_METRICS if name not in policy.gates]
    if unset:
        raise PolicyError(
            f"--ragas: policy {policy.version} sets no threshold for "
            f"{', '.join(f'gates.{name}' for name in unset)} "
            "(bid_v2 sets §12.1's: --policy bid_v2, or --set gates.<name>=VALUE)"
        )


def _context(
    policy: BidPolicy, rules: list[Rule], branches: list[SqlBranch], ragas: bool = False
) -> dict[str, Any]:
    return dict(
        ragas_metrics=list(RAGAS_METRICS.values()) if ragas else [],
        policy=policy.parameters,
        policy_version=policy.version,
        rules=rules,
        sql_branches=branches,
        aggregate_columns=[(fn, f) for f in NUMERIC_FIELDS for fn in ("min", "max", "avg")],
        full_width=FULL_WIDTH,
        half_width=HALF_WIDTH,
        date_pattern=DATE_PATTERN,
        number_pattern=NUMBER_PATTERN,
        token_pattern=TOKEN_PATTERN,
        filler_pattern=keyword_pattern(policy.fillers) if policy.fillers else None,
        piece_pattern=PIECE_PATTERN,
        separator_run=SEPARATOR_RUN,
        separator_spaced=SEPARATOR_SPACED,
        separator_squeeze=SEPARATOR_SQUEEZE,
        separator_ends=SEPARATOR_ENDS,
        type_patterns=[
            {"type": entry.type, "pattern": keyword_pattern(entry.keywords)}
            for entry in policy.query_types
        ],
    )


def _branch_params(branch: SqlBranch) -> dict[str, Any]:
    return {branch.text_parameter: branch.text, **branch.condition.params}


def sql_branches(session: Session, queries: OpenedInput) -> list[SqlBranch]:
    """Each distinct sql_condition of the queries, compiled; a bad one names its first query."""
    conditions = [
        row[0]
        for row in session.con.execute(
            "SELECT DISTINCT sql_condition FROM queries WHERE sql_condition IS NOT NULL ORDER BY 1"
        ).fetchall()
    ]
    branches = []
    for number, text in enumerate(conditions, start=1):
        try:
            compiled = parse_condition(text, prefix=f"c{number}_")
        except WhitelistError as exc:
            first = session.first_row(
                "SELECT min(query_id) FROM queries WHERE sql_condition = ?", [text]
            )
            assert first is not None
            raise WhitelistError(
                f"{queries.label} ({queries.given}, query_id={first[0]!r}), "
                f"column 'sql_condition': {exc}"
            ) from None
        branches.append(SqlBranch(f"c{number}_text", text, compiled))
    return branches
