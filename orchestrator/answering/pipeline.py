"""`score_answers()`: logged answers, citations, chunks (and events, logprobs, feedback) in;
answers.parquet and contract.jsonl out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from ..core.connection import EngineSettings, first_row
from ..core.errors import OptionError, PolicyError
from ..core.inputs import Table
from ..core.outputs import check_output_dir
from ..core.render import lit
from ..core.reporting import module_logger
from ..core.session import Relations, Session, folder_of
from ..core.validate import check_references, check_rows, typed_column
from .policy import AnswerPolicy, load_answer_policy
from .stages import render_answers, render_contract
from .tables import CHUNKS, CITATIONS, EVENTS, FEEDBACK, LOGPROBS, answers_contract

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
    logprobs: Table | None = None,
    feedback: Table | None = None,
    as_of: str | None = None,
) -> AnswersResult:
    """Score logged answers into `out_dir`: answers.parquet, contract.jsonl, manifest.json and the
    rendered SQL. Nothing is written unless everything succeeds. `logprobs`, `feedback` and
    `as_of` (default: the latest rating's given_at) need a policy that reads them (answer_v2)."""
    loaded = load_answer_policy(policy, overrides)
    refuse_unread(loaded, logprobs, feedback, as_of)
    check_output_dir(
        out_dir,
        "--out",
        {
            "--answers": answers,
            "--citations": citations,
            "--chunks": chunks,
            "--events": events,
            "--logprobs": logprobs,
            "--feedback": feedback,
        },
    )
    with Session(settings, connection=connection) as session:
        logger.info(f"checking inputs (policy {loaded.version})")
        open_answer_inputs(session, loaded, answers, citations, chunks, events, logprobs)
        extra = open_feedback(session, feedback, as_of)
        logger.info(f"scoring {session.inputs['answers'].rows:,} answers")
        with_events = events is not None
        with_logprobs, with_feedback = logprobs is not None, feedback is not None
        answers_sql = render_answers(
            loaded, with_events, ordered=False, logprobs=with_logprobs, feedback=with_feedback
        )
        session.create("scored_answers", answers_sql)
        contract_sql = render_contract(
            loaded, with_events, standalone=False, logprobs=with_logprobs, feedback=with_feedback
        )
        session.check(contract_sql)
        logger.info("writing outputs")
        with session.publish(out_dir) as out:
            out.copy(
                "answers.parquet", "SELECT * FROM scored_answers ORDER BY answer_id", answers_sql
            )
            out.copy("contract.jsonl", contract_sql.text, contract_sql)
            manifest = out.manifest(
                "answers", loaded.as_record(), session.settings.record(), **extra
            )
    return AnswersResult(folder_of(out_dir), loaded, out.counts["answers.parquet"], manifest)


def open_answer_inputs(
    session: Session,
    policy: AnswerPolicy,
    answers: Table,
    citations: Table,
    chunks: Table,
    events: Table | None,
    logprobs: Table | None = None,
) -> None:
    """The typed views answers, citations, chunks (and events, logprobs), checked: contracts, the
    policy's rerank score range, and every answer_id known to --answers."""
    lo, hi = policy.score_range
    ranged = dataclasses.replace(CHUNKS.column("rerank_score"), min=lo, max=hi)
    chunks_contract = dataclasses.replace(
        CHUNKS, columns=tuple(ranged if c.name == "rerank_score" else c for c in CHUNKS.columns)
    )
    answers_table = answers_contract(policy.has("streaming"))
    opened = {
        "answers": session.open("answers", answers_table, answers, "--answers"),
        "citations": session.open("citations", CITATIONS, citations, "--citations"),
        "chunks": session.open("chunks", chunks_contract, chunks, "--chunks"),
    }
    if events is not None:
        opened["events"] = session.open("events", EVENTS, events, "--events")
    if logprobs is not None:
        opened["logprobs"] = session.open("logprobs", LOGPROBS, logprobs, "--logprobs")
    for name in ("citations", "chunks", "events", "logprobs"):
        if name in opened:
            check_references(session.con, opened[name], "answer_id", opened["answers"], "answer_id")


def refuse_unread(
    policy: AnswerPolicy, logprobs: Table | None, feedback: Table | None, as_of: str | None
) -> None:
    """An input the policy has no block for would be read for nothing: refused by name."""
    for option, given, block in (
        ("--logprobs", logprobs, "logprob_certainty"),
        ("--feedback", feedback, "feedback"),
    ):
        if given is not None and not policy.has(block):
            raise PolicyError(
                f"{option} needs a policy with parameters.{block} (answer_v2); "
                f"{policy.version} has none"
            )
    if as_of is not None and feedback is None:
        raise OptionError("--as-of dates the ratings of --feedback; give --feedback too")


def open_feedback(session: Session, feedback: Table | None, as_of: str | None) -> dict[str, Any]:
    """The typed view feedback, checked: its answers known, no rating after `as_of` (default:
    the latest given_at). What the manifest records: the as_of used."""
    if feedback is None:
        return {}
    opened = session.open("feedback", FEEDBACK, feedback, "--feedback")
    check_references(session.con, opened, "answer_id", session.inputs["answers"], "answer_id")
    used = _as_of(session, as_of)
    if used is not None:
        given_at = typed_column(opened, "given_at")
        check_rows(
            session.con,
            opened,
            f"{given_at} > CAST({lit(used)} AS TIMESTAMP)",
            f"given_at {{value}} is after --as-of {used}",
            shown=given_at,
        )
    return {"feedback_as_of": used}


def _as_of(session: Session, as_of: str | None) -> str | None:
    """`as_of` as a timestamp's text, or the latest given_at (None without ratings)."""
    if as_of is None:
        row = first_row(session.con, "SELECT CAST(max(given_at) AS VARCHAR) FROM feedback")
    else:
        row = first_row(session.con, f"SELECT CAST(TRY_CAST({lit(as_of)} AS TIMESTAMP) AS VARCHAR)")
        if row is None or row[0] is None:
            raise OptionError(f"--as-of {as_of!r}: not a timestamp (e.g. 2024-05-01T12:00:00)")
    return None if row is None or row[0] is None else str(row[0])
