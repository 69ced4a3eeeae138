"""`duckscore answers`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..core.reporting import module_logger
from .app import cli
from .options import F, engine_options, out_dir_option, policy_options
from .summary import written

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)


# the inputs of `duckscore answers` (seed 001): option, required, help
ANSWER_INPUTS = (
    (
        "--answers",
        True,
        "answers table: answer_id, query_id, answer_text, retrieved_count (answer_v2: an "
        "optional streaming column, true or false).",
    ),
    (
        "--citations",
        True,
        "citations table: answer_id, chunk_id (zero rows allowed, e.g. a header-only CSV).",
    ),
    ("--chunks", True, "reranked chunks: answer_id, chunk_id, rerank_score (zero rows allowed)."),
    (
        "--events",
        False,
        "Optional streaming contradiction events: answer_id, severity (high / medium / low).",
    ),
)


def answer_input_options(command: F) -> F:
    """--answers, --citations, --chunks and --events, in that order in --help."""
    for name, required, text in reversed(ANSWER_INPUTS):
        command = click.option(name, required=required, metavar="PATH", help=text)(command)
    return command


@cli.command()
@answer_input_options
@click.option(
    "--logprobs",
    metavar="PATH",
    help="Optional model logprobs (answer_v2): answer_id, token_index, logprob <= 0, a row per "
    "token; they blend into the certainty factor.",
)
@click.option(
    "--feedback",
    metavar="PATH",
    help="Optional user ratings (answer_v2): answer_id, rating in [-1, 1], given_at; their "
    "decayed mean moves the percentage.",
)
@click.option(
    "--as-of",
    metavar="TIMESTAMP",
    help="When the ratings are read (ISO timestamp): a rating given later is an error. "
    "Default: the latest given_at of --feedback.",
)
@out_dir_option()
@policy_options("answer_v1", "levels.high_at_least=80")
@engine_options
def answers(
    answers: str,
    citations: str,
    chunks: str,
    events: str | None,
    logprobs: str | None,
    feedback: str | None,
    as_of: str | None,
    out_dir: Path,
    policy: str,
    overrides: tuple[str, ...],
    settings: EngineSettings,
) -> None:
    """Score logged answers (seed 001): citation quality, answer quality, retrieval recall and
    language certainty into a 0–10 total, a percentage and a level; contradiction events lower
    the level. answer_v2 also reads the model's logprobs, users' ratings and streaming answers.

    \b
    Writes to --out:
      answers.parquet   one row per answer: every factor and sub-factor, the lexicon hits,
                        total, percentage, score_level and level (after contradictions)
      contract.jsonl    one JSON object per answer: level, percentage, the four factors, why
      manifest.json     policy version and parameters, SQL hashes, input fingerprints
      sql/              the rendered SQL that produced them
    """
    from ..answering.pipeline import score_answers

    result = score_answers(
        answers,
        citations,
        chunks,
        out_dir,
        policy,
        events,
        list(overrides),
        settings,
        logprobs=logprobs,
        feedback=feedback,
        as_of=as_of,
    )
    logger.info(f"done: {result.answers:,} answers -> {out_dir}")
    written(f"scored {result.answers:,} answers", out_dir, result.manifest)
