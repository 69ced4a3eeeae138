"""`score_answers()`: logged answers, citations, chunks (and events) in; answers.parquet and
contract.jsonl out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ..core.connection import EngineSettings
from ..core.inputs import Table
from ..core.outputs import check_output_dir
from ..core.reporting import module_logger
from ..core.session import Relations, Session, folder_of
from ..core.validate import check_references
from .policy import AnswerPolicy, load_answer_policy
from .stages import render_answers, render_contract
from .tables import ANSWERS, CHUNKS, CITATIONS, EVENTS

logger = module_logger(__name__)


@dataclass(frozen=True)
class AnswersResult:
    out_dir: Path | None  # None: the outputs are tables of the connection (Relations)
    policy: AnswerPolicy
    answers: int
    manifest: dict[str, Any]


def score_answers(
    answers: Table,
    citations: Table,
    chunks: Table,
    out_dir: str | Path | Relations,
    policy: str = "answer_v1",
    events: Table | None = None,
    overrides: list[str] | None = None,
    settings: EngineSettings | None = None,
    connection: duckdb.DuckDBPyConnection | None = None,
) -> AnswersResult:
    """Score logged answers into `out_dir`: answers.parquet, contract.jsonl, manifest.json and the
    rendered SQL. Nothing is written unless everything succeeds."""
    loaded = load_answer_policy(policy, overrides)
    check_output_dir(
        out_dir,
        "--out",
        {"--answers": answers, "--citations": citations, "--chunks": chunks, "--events": events},
    )
    with Session(settings, connection=connection) as session:
        logger.info(f"checking inputs (policy {loaded.version})")
        open_answer_inputs(session, loaded, answers, citations, chunks, events)
        logger.info(f"scoring {session.inputs['answers'].rows:,} answers")
        with_events = events is not None
        answers_sql = render_answers(loaded, with_events, ordered=False)
        session.create("scored_answers", answers_sql)
        contract_sql = render_contract(loaded, with_events, standalone=False)
        session.check(contract_sql)
        logger.info("writing outputs")
        with session.publish(out_dir) as out:
            out.copy(
                "answers.parquet", "SELECT * FROM scored_answers ORDER BY answer_id", answers_sql
            )
            out.copy("contract.jsonl", contract_sql.text, contract_sql)
            manifest = out.manifest("answers", loaded.as_record(), session.settings.record())
    return AnswersResult(folder_of(out_dir), loaded, out.counts["answers.parquet"], manifest)


def open_answer_inputs(
    session: Session,
    policy: AnswerPolicy,
    answers: Table,
    citations: Table,
    chunks: Table,
    events: Table | None,
) -> None:
    """The typed views answers, citations, chunks (and events), checked: contracts, the policy's
    rerank score range, and every answer_id known to --answers."""
    lo, hi = policy.score_range
    ranged = dataclasses.replace(CHUNKS.column("rerank_score"), min=lo, max=hi)
    chunks_contract = dataclasses.replace(
        CHUNKS, columns=tuple(ranged if c.name == "rerank_score" else c for c in CHUNKS.columns)
    )
    opened = {
        "answers": session.open("answers", ANSWERS, answers, "--answers"),
        "citations": session.open("citations", CITATIONS, citations, "--citations"),
        "chunks": session.open("chunks", chunks_contract, chunks, "--chunks"),
    }
    if events is not None:
        opened["events"] = session.open("events", EVENTS, events, "--events")
    for name in ("citations", "chunks", "events"):
        if name in opened:
            check_references(session.con, opened[name], "answer_id", opened["answers"], "answer_id")
