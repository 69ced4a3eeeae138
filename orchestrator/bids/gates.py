"""§12 acceptance gates: pass / fail / no_data per gate, from sql/bids/gates.sql's one row."""

from __future__ import annotations

import math
from typing import Any

from ..core.policy import Policy
from ..core.render import RenderedSQL
from ..core.session import Session

GATES = (  # name, comparison
    ("citation_resolution_rate", ">="),
    ("unsupported_claim_rate", "<="),
    ("retrieval_p95_ms", "<="),
    ("scoring_p95_ms", "<="),
    ("rerank_degradation_ratio", "<="),
)
NOT_COMPUTED = ("ragas_precision", "ragas_recall", "faithfulness")


def describe_failures(report: dict[str, Any]) -> str:
    """The failed gates of a gates_report, each with its value against its threshold:
    `retrieval_p95_ms 4200 (needs <= 4000)`."""
    return ", ".join(
        f"{g['name']} {_short(g['value'])} (needs {g['comparison']} {_short(g['threshold'])})"
        for g in report["gates"]
        if g["status"] == "fail"
    )


def _short(number: float) -> str:
    return f"{round(number, 4):g}"


def gates_report(session: Session, gates_sql: RenderedSQL, policy: Policy) -> dict[str, Any]:
    """§12: pass / fail / no_data per gate, with the value, threshold and comparison."""
    session.create("__gates", gates_sql)
    values = session.first_row("SELECT * FROM __gates")
    assert values is not None
    thresholds = policy.parameters["gates"]
    gates = []
    for (name, comparison), value in zip(GATES, values):
        threshold = thresholds[name]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            status = "no_data"
        else:
            ok = value >= threshold if comparison == ">=" else value <= threshold
            status = "pass" if ok else "fail"
        gates.append(
            {
                "name": name,
                "value": None if value is None else float(value),
                "threshold": threshold,
                "comparison": comparison,
                "status": status,
            }
        )
    for name in NOT_COMPUTED:
        gates.append(
            {
                "name": name,
                "value": None,
                "threshold": None,
                "comparison": None,
                "status": "not_computed",
                "why": "needs an LLM judge over the answers; not in the logs",
            }
        )
    return {
        "policy_version": policy.version,
        "gates": gates,
        "passed": all(g["status"] != "fail" for g in gates),
    }
