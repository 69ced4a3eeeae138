"""What an answer policy (sql/answers/policies/*.yaml, seed 001) may say, the RE2 patterns
built from its word lists (values reach the SQL through `lit`), and AnswerPolicy, its typed view."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..common.patterns import term_regex
from ..core.errors import PolicyError
from ..core.frozen import FrozenMap
from ..core.policy import (
    Bounds,
    Choice,
    ListOf,
    Number,
    Omissible,
    Policy,
    PolicyKind,
    Words,
    load_policy,
)
from ..core.policy_view import PolicyView

UNIT = Number(0.0, 1.0)
BAND_LISTS = ("citation_count", "length", "retrieved_count", "citation_rate")
LEXICONS = ("uncertain", "vague", "assertive")
LEVELS = ("low", "medium", "high")
LEVEL_CHANGES = ("low", "medium", "warn")  # the level a contradiction lowers to, or a warning only
GAP = "…"  # in a conclusion phrase: any text between its parts (综合…来看)
# RE2 (DuckDB's regex engine): a blank line ends a paragraph; \s there is [\t\n\f\r ]
PARAGRAPH_SEPARATOR = r"\n[\t\n\f\r ]*\n"
VISIBLE_CHARACTER = r"[^\t\n\f\r ]"


def _bands_descend_to_zero(p: dict[str, Any]) -> None:
    for name in BAND_LISTS:
        thresholds = [band["at_least"] for band in p[name]]
        if not thresholds:
            raise PolicyError(f"parameters.{name} needs at least one band")
        if any(a <= b for a, b in itertools.pairwise(thresholds)):
            raise PolicyError(
                f"parameters.{name}: at_least must strictly decrease from band to band"
            )
        if thresholds[-1] != 0:
            raise PolicyError(f"parameters.{name}: the last band must start at 0 (it is the floor)")


def _factors_within_one(p: dict[str, Any]) -> None:
    def best(name: str) -> float:
        return float(max(band["points"] for band in p[name]))

    s = p["structure"]
    sums = {
        "citation quality (citation_count + citation_relevance.max_points)": best("citation_count")
        + p["citation_relevance"]["max_points"],
        "answer quality (length + structure points)": best("length")
        + s["paragraph_points"]
        + s["conclusion_points"],
        "retrieval (retrieved_count + citation_rate)": best("retrieved_count")
        + best("citation_rate"),
    }
    for factor, total in sums.items():
        if total > 1 + 1e-12:
            raise PolicyError(
                f"the best points of {factor} add up to {total:g}; a factor is at most 1"
            )


def _ranges_and_cuts(p: dict[str, Any]) -> None:
    score_range = p["citation_relevance"]["score_range"]
    if score_range is None or score_range[0] >= score_range[1]:
        raise PolicyError("parameters.citation_relevance.score_range must be [lo, hi] with lo < hi")
    if p["levels"]["medium_at_least"] > p["levels"]["high_at_least"]:
        raise PolicyError("parameters.levels.medium_at_least must not exceed high_at_least")
    if sum(p["weights"].values()) <= 0:
        raise PolicyError("parameters.weights must not all be 0")


def _lexicons_disjoint(p: dict[str, Any]) -> None:
    owner: dict[str, str] = {}
    for name in LEXICONS:
        for term in p["lexicons"][name]:
            other = owner.setdefault(term.lower(), name)
            if other != name:
                raise PolicyError(f"parameters.lexicons: {term!r} is in both {other} and {name}")
    for phrase in p["lexicons"]["conclusion"]:
        if any(not part for part in gap_parts(phrase)):
            raise PolicyError(
                f"parameters.lexicons.conclusion: {phrase!r} has an empty part around {GAP!r}"
            )


BANDS = ListOf({"at_least": Number(0.0), "points": UNIT})
HITS = {"per_hit": Number(0.0), "cap": Number(0.0)}

ANSWER_POLICY = PolicyKind(
    capability="answers",
    version_key="answer_policy_version",
    spec={
        "weights": {
            f: Number(0.0) for f in ("citation_quality", "answer_quality", "retrieval", "certainty")
        },
        "levels": {"high_at_least": Number(0.0, 100.0), "medium_at_least": Number(0.0, 100.0)},
        "citation_count": BANDS,
        "citation_relevance": {
            "top_k": Number(1, 50, integer=True),
            "max_points": UNIT,
            "score_range": Bounds(),
        },
        "length": BANDS,
        "structure": {
            "min_paragraphs": Number(1, integer=True),
            "paragraph_points": UNIT,
            "conclusion_points": UNIT,
        },
        "retrieved_count": BANDS,
        "citation_rate": BANDS,
        "certainty": {"base": UNIT, "uncertain": HITS, "vague": HITS, "assertive": HITS},
        "contradictions": {s: Choice(LEVEL_CHANGES) for s in ("high", "medium", "low")},
        "lexicons": {name: Words() for name in (*LEXICONS, "conclusion")},
        # answer_v2 (seed 001 §未来改进 1, 2 and §使用方式's streaming start): absent, v1's rules
        "logprob_certainty": Omissible({"weight": UNIT}),
        "feedback": Omissible(
            {"weight": Number(0.0, 100.0), "half_life_days": Number(0.0, lo_open=True)}
        ),
        "streaming": Omissible({"start_level": Choice(LEVELS)}),
    },
    cross_checks=(
        _bands_descend_to_zero,
        _factors_within_one,
        _ranges_and_cuts,
        _lexicons_disjoint,
    ),
)


def gap_parts(phrase: str) -> list[str]:
    """The parts of a conclusion phrase around its gaps; spaces beside "…" are layout, so
    "taking … into account" also matches "taking into account"."""
    return [part.strip() for part in phrase.split(GAP)]


def lexicon_pattern(lexicons: Mapping[str, Sequence[str]]) -> str | None:
    """One alternation of every lexicon term, longest first: RE2 takes the first alternative
    that matches at the leftmost position, so the scan takes the longest term there."""
    terms = sorted(
        {t.lower() for name in LEXICONS for t in lexicons[name]}, key=lambda t: (-len(t), t)
    )
    return "(?:" + "|".join(term_regex(t) for t in terms) + ")" if terms else None


def conclusion_pattern(phrases: Sequence[str]) -> str | None:
    """Any conclusion phrase; the parts of a phrase with a gap match in order, anything between."""
    if not phrases:
        return None
    alternatives = [
        ".*?".join(term_regex(part) for part in gap_parts(phrase.lower())) for phrase in phrases
    ]
    return "(?s)(?:" + "|".join(alternatives) + ")"


@dataclass(frozen=True)
class Band:
    at_least: float
    points: float


@dataclass(frozen=True)
class AnswerPolicy(PolicyView):
    """An answer policy, read once from its validated parameters: the keys Python reads (the
    templates render the plain `parameters`, core/policy_view.py)."""

    weights: Mapping[
        str, float
    ]  # by factor: citation_quality, answer_quality, retrieval, certainty
    bands: Mapping[str, tuple[Band, ...]]  # by BAND_LISTS name, highest band first
    score_range: tuple[float, float]  # citation_relevance.score_range: the chunks' rerank_score
    lexicons: Mapping[str, tuple[str, ...]]  # by LEXICONS name, and conclusion

    @classmethod
    def of(cls, policy: Policy) -> AnswerPolicy:
        p = policy.parameters
        low, high = p["citation_relevance"]["score_range"]
        return cls(
            policy=policy,
            weights=p["weights"],
            bands=FrozenMap(
                {
                    name: tuple(Band(b["at_least"], b["points"]) for b in p[name])
                    for name in BAND_LISTS
                }
            ),
            score_range=(low, high),
            lexicons=p["lexicons"],
        )

    def has(self, block: str) -> bool:
        """Whether the policy holds an optional block (logprob_certainty, feedback, streaming)."""
        return block in self.parameters


def load_answer_policy(name_or_path: str, overrides: list[str] | None = None) -> AnswerPolicy:
    return AnswerPolicy.of(load_policy(ANSWER_POLICY, name_or_path, overrides))
