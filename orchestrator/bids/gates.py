"""§12 acceptance gates: pass / fail / no_data per gate, from sql/bids/gates.sql's one row."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..core.records import OMITTED_WHEN_NONE, Report
from ..core.render import RenderedSQL
from ..core.session import Session
from .policy import RAGAS_GATES, BidPolicy

GATES = (  # name, comparison
    ("citation_resolution_rate", ">="),
    ("unsupported_claim_rate", "<="),
    ("retrieval_p95_ms", "<="),
    ("scoring_p95_ms", "<="),
    ("rerank_degradation_ratio", "<="),
)
# §12.1's RAGAS gates: the --ragas column each is the mean of, all compared with >=
RAGAS_METRICS = dict(
    zip(RAGAS_GATES, ("context_precision", "context_recall", "faithfulness"), strict=True)
)


@dataclass(frozen=True, kw_only=True)
class Gate(Report):
    """One gate: pass, fail, no_data (no value), or not_computed (and why)."""

    name: str
    value: float | None
    threshold: float | None
    comparison: str | None  # >= or <=
    status: str
    why: str | None = field(default=None, metadata=OMITTED_WHEN_NONE)
    measured: int | None = field(
        default=None, metadata=OMITTED_WHEN_NONE
    )  # RAGAS: queries with a value


@dataclass(frozen=True, kw_only=True)
class GatesReport(Report):
    """§12's acceptance gates (gates.json)."""

    policy_version: str
    gates: list[Gate]
    passed: bool  # no gate failed

    @property
    def failed(self) -> list[Gate]:
        return [g for g in self.gates if g.status == "fail"]


def describe_failures(report: GatesReport) -> str:
    """The failed gates of a gates_report, each with its value against its threshold:
    `retrieval_p95_ms 4200 (needs <= 4000)`."""
    return ", ".join(_needs(g) for g in report.failed)


def _needs(gate: Gate) -> str:
    assert gate.value is not None and gate.threshold is not None  # a failed gate has both
    return f"{gate.name} {_short(gate.value)} (needs {gate.comparison} {_short(gate.threshold)})"


def _short(number: float) -> str:
    return f"{round(number, 4):g}"


def gates_report(
    session: Session, gates_sql: RenderedSQL, policy: BidPolicy, ragas: bool = False
) -> GatesReport:
    """§12: pass / fail / no_data per gate, with the value, threshold and comparison; the RAGAS
    gates from the --ragas table's means when `ragas`, else not_computed."""
    session.create("__gates", gates_sql)
    values = session.first_row("SELECT * FROM __gates")
    assert values is not None
    gates = [
        _decided(name, comparison, value, policy.gates[name])
        for (name, comparison), value in zip(GATES, values)
    ]
    if ragas:
        measured = values[len(GATES) :]
        gates += [
            _decided(name, ">=", mean, policy.gates[name], count)
            for name, mean, count in zip(RAGAS_GATES, measured[::2], measured[1::2], strict=True)
        ]
    else:
        gates += [
            Gate(
                name=name,
                value=None,
                threshold=None,
                comparison=None,
                status="not_computed",
                why="needs an LLM judge over the answers; not in the logs",
            )
            for name in RAGAS_GATES
        ]
    return GatesReport(
        policy_version=policy.version,
        gates=gates,
        passed=all(g.status != "fail" for g in gates),
    )


def _decided(
    name: str, comparison: str, value: float | None, threshold: float, measured: int | None = None
) -> Gate:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        status = "no_data"
    else:
        ok = value >= threshold if comparison == ">=" else value <= threshold
        status = "pass" if ok else "fail"
    return Gate(
        name=name,
        value=None if value is None else float(value),
        threshold=threshold,
        comparison=comparison,
        status=status,
        measured=measured,
    )
