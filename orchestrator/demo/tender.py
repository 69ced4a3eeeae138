"""`duckscore demo bids`: the bundled tender (two tenants, several suppliers) through
`duckscore bids`, summarised one line per supplier."""

from __future__ import annotations

from pathlib import Path

from ..bids.pipeline import score_bids
from ..core.connection import EngineSettings
from ..core.render import lit
from ..core.resources import fixtures_dir
from ..core.session import Session


def run_tender_demo(out_dir: Path, settings: EngineSettings | None) -> str:
    tender = fixtures_dir() / "bids" / "tender"
    result = score_bids(tender, out_dir, settings=settings)
    with Session(settings) as session:
        rows = session.con.execute(
            f"SELECT evaluation_id, supplier_id, total_score, confidence, risk_level, recommendation_status, "
            f"coalesce(recommendation, '-'), array_to_string(hitl_reasons, ', ') "
            f"FROM read_parquet({lit(str(Path(out_dir) / 'evaluations.parquet'))}) "
            f"ORDER BY evaluation_id, rank NULLS LAST, supplier_id"
        ).fetchall()
    lines = [
        f"Tender demo: {result.evaluations} supplier evaluations, policy {result.policy.version}",
        f"{'evaluation':<14}{'supplier':<10}{'total':>8}{'conf.':>7}  {'risk':<7}{'status':<14}"
        f"{'recommendation':<15}human review because",
    ]
    for evaluation, supplier, total, confidence, risk, status, recommendation, reasons in rows:
        lines.append(
            f"{evaluation:<14}{supplier:<10}{total:>8.2f}{confidence:>7.3f}  {risk:<7}{status:<14}"
            f"{recommendation:<15}{reasons or '-'}"
        )
    gates = ", ".join(f"{g.name} {g.status}" for g in result.gates.gates)
    lines.append(f"gates: {gates}")
    lines.append(f"outputs in {out_dir}/ (contract.jsonl, evaluations.parquet, gates.json, …)")
    return "\n".join(lines)
