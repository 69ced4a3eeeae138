"""`duckscore answers`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..core.reporting import module_logger
from .app import cli
from .options import answer_input_options, engine_options, out_dir_option, policy_options
from .summary import written

if TYPE_CHECKING:
    from ..core.connection import EngineSettings

logger = module_logger(__name__)


@cli.command()
@answer_input_options
@out_dir_option()
@policy_options("answer_v1", "levels.high_at_least=80")
@engine_options
def answers(
    answers: str,
    citations: str,
    chunks: str,
    events: str | None,
    out_dir: Path,
    policy: str,
    overrides: tuple[str, ...],
    settings: EngineSettings,
) -> None:
    """Score logged answers (seed 001): citation quality, answer quality, retrieval recall and
    language certainty into a 0–10 total, a percentage and a level; contradiction events lower
    the level.

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
        answers, citations, chunks, out_dir, policy, events, list(overrides), settings
    )
    logger.info(f"done: {result.answers:,} answers -> {out_dir}")
    written(f"scored {result.answers:,} answers", out_dir, result.manifest)
