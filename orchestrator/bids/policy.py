"""What a bid policy (sql/bids/policies/*.yaml, seed 002) may say, the query-typing patterns
built from it, and BidPolicy, its typed view."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..common.patterns import term_regex
from ..core.errors import PolicyError
from ..core.policy import (
    Choice,
    Flag,
    ListOf,
    MapOf,
    Number,
    Omissible,
    Policy,
    PolicyKind,
    Text,
    Words,
    load_policy,
)
from ..core.policy_view import PolicyView
from .tables import QUERY_TYPES
from .whitelist import FIELD_TYPES

MODES = ("local", "global", "hybrid", "mix")
CALIBRATION_METHODS = ("anchor_offset",)
# §3.2's constraint kinds a tender's own field may become (bid_v4's constraints.tender_fields)
CONSTRAINT_KINDS = ("entity", "must_include", "must_exclude")
RAGAS_GATES = ("ragas_precision", "ragas_recall", "faithfulness")
UNIT = Number(0.0, 1.0)
NUMERIC_FIELDS = tuple(f for f, kind in FIELD_TYPES.items() if kind == "number")
# §3.1: full-width ASCII (U+FF01…U+FF5E) and the ideographic space fold to their ASCII forms
FULL_WIDTH = "".join(chr(code) for code in range(0xFF01, 0xFF5F)) + "\u3000"
HALF_WIDTH = "".join(chr(code - 0xFEE0) for code in range(0xFF01, 0xFF5F)) + " "
DATE_PATTERN = (
    r"[0-9]{4}年[0-9]{1,2}月[0-9]{1,2}日|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
    r"|[0-9]{4}/[0-9]{1,2}/[0-9]{1,2}|[0-9]{4}\.[0-9]{1,2}\.[0-9]{1,2}"
)
NUMBER_PATTERN = r"[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?[万亿]?"
TOKEN_PATTERN = f"(?:{DATE_PATTERN})|(?:{NUMBER_PATTERN})|[\\s\\S]"
# §3.3's compression: a term is a run between spaces and these separators (the full-width forms
# fold to them first); ASCII '.', ':' and '-' stay inside terms (3.5, 9001:2015, 2026-03-05)
SEPARATORS = ",;!?、。"
_SEPARATOR = f"[\\s{SEPARATORS}]"
PIECE_PATTERN = f"[^\\s{SEPARATORS}]+|{_SEPARATOR}+"
SEPARATOR_RUN = f"{_SEPARATOR}+"
# a run of spaces and separators becomes its first separator, and one space if it held a space
SEPARATOR_SPACED = (
    f"\\s+([{SEPARATORS}]){_SEPARATOR}*|([{SEPARATORS}])[{SEPARATORS}]*\\s{_SEPARATOR}*"
)
SEPARATOR_SQUEEZE = f"([{SEPARATORS}])[{SEPARATORS}]*"
SEPARATOR_ENDS = f"^{_SEPARATOR}+|{_SEPARATOR}+$"


def _types_known(p: dict[str, Any]) -> None:
    types = [entry["type"] for entry in p["query_types"]]
    if len(set(types)) != len(types):
        raise PolicyError("parameters.query_types: a type is listed twice")
    unknown = sorted(set(types) - set(QUERY_TYPES))
    if unknown:
        raise PolicyError(
            f"parameters.query_types: unknown type {unknown[0]!r} (types: {', '.join(QUERY_TYPES)})"
        )
    pk = p["packing"]
    if pk["min_items"] > pk["max_items"]:
        raise PolicyError("parameters.packing.min_items must not exceed max_items")
    total = sum(p["confidence"]["weights"].values())
    if abs(total - 1.0) > 1e-9:
        # confidence is the weighted sum itself (§8.3), compared with hitl.min_confidence: weights
        # of 0.9 each gave confidences of 2.47
        raise PolicyError(f"parameters.confidence.weights must sum to 1, got {total:.12g}")


def _term_patterns_compile(p: dict[str, Any]) -> None:
    for kind in ("must_include", "must_exclude"):
        for pattern in p.get("constraints", {}).get(kind, []):
            try:
                groups = re.compile(pattern).groups
            except re.error as exc:
                raise PolicyError(f"parameters.constraints.{kind}: {pattern!r}: {exc}") from None
            if groups != 1:
                raise PolicyError(
                    f"parameters.constraints.{kind}: {pattern!r} needs exactly one capturing "
                    f"group (the term), has {groups}"
                )


def _compression_guarded(p: dict[str, Any]) -> None:
    if "compression" not in p:
        return
    if "constraints" not in p:
        # the compression guard keeps the constraints §3.2's rules produce: without them it
        # could not tell a filler from a term
        raise PolicyError("parameters.compression needs parameters.constraints (bid_v3's rules)")
    if not p["compression"]["fillers"]:
        raise PolicyError("parameters.compression.fillers: expected at least one phrase")
    for filler in p["compression"]["fillers"]:
        if not folded(filler):
            raise PolicyError(f"parameters.compression.fillers: {filler!r} is only spaces")


def folded(text: str) -> str:
    """§3.1's first steps: full width folded, lower case, single spaces, trimmed."""
    return " ".join(text.translate(str.maketrans(FULL_WIDTH, HALF_WIDTH)).lower().split())


BID_POLICY = PolicyKind(
    capability="bids",
    version_key="bid_policy_version",
    spec={
        "query_types": ListOf({"type": Text(), "keywords": Words()}),
        "modes": {t: Choice(MODES) for t in QUERY_TYPES},
        "fallback_mode": Choice(MODES),
        "high_risk_mode": Choice(MODES),
        "retrieval": {
            "top_k": Number(1, integer=True),
            "chunk_top_k": Number(1, integer=True),
            "include_references": Flag(),
            "enable_rerank": Flag(),
            "max_entity_tokens": Number(0, integer=True),
            "max_relation_tokens": Number(0, integer=True),
            "sql_branch_score": UNIT,
        },
        "rerank": {"alert_ratio": UNIT},
        "packing": {
            "min_items": Number(1, integer=True),
            "max_items": Number(1, integer=True),
            "criterion_tokens": Number(0, integer=True),
            "report_tokens": Number(0, integer=True),
            "low_relevance": UNIT,
        },
        "confidence": {
            "weights": dict.fromkeys(
                ("evidence_quality", "retrieval_agreement", "model_stability"), UNIT
            ),
            "agreement_when_unavailable": UNIT,
            "single_run_stability": UNIT,
        },
        "hitl": {
            "min_confidence": UNIT,
            "min_citation_coverage": UNIT,
            "max_score_deviation_pct": Number(0.0),
            # bid_v2: §6.2's evidence minimum and §10.1's one-to-one mapping as HITL reasons
            "insufficient_evidence": Omissible(Flag()),
            "citation_mapping": Omissible(Flag()),
        },
        # §3.2's term patterns (one capturing group: the term) and §3.3's rewrite guard (bid_v3);
        # the tender's own fields, each by its declared kind (bid_v4)
        "constraints": Omissible(
            {
                "must_include": Words(),
                "must_exclude": Words(),
                "tender_fields": Omissible(MapOf(Choice(CONSTRAINT_KINDS))),
            }
        ),
        # §3.3's expression compression (bid_v4): filler phrases removed, guarded like a rewrite
        "compression": Omissible({"fillers": Words()}),
        # §8.4 (bid_v2): a deviation above hitl.max_score_deviation_pct runs this calibration
        "calibration": Omissible({"method": Choice(CALIBRATION_METHODS)}),
        "gates": {
            "citation_resolution_rate": UNIT,
            "unsupported_claim_rate": UNIT,
            "retrieval_p95_ms": Number(0.0),
            "scoring_p95_ms": Number(0.0),
            "rerank_degradation_ratio": UNIT,
            # §12.1's RAGAS gates, decided from a --ragas table (bid_v2 on): a policy without
            # them, bid_v1, keeps the three not_computed and refuses the table
            **{name: Omissible(UNIT) for name in RAGAS_GATES},
        },
    },
    cross_checks=(_types_known, _term_patterns_compile, _compression_guarded),
)


def keyword_pattern(keywords: Sequence[str]) -> str:
    """Any of the keywords, normalised like a query (folded, lower case, single spaces)."""
    terms = sorted({folded(k) for k in keywords}, key=lambda t: (-len(t), t))
    return "(?:" + "|".join(term_regex(t) for t in terms if t) + ")"


@dataclass(frozen=True)
class QueryType:
    type: str
    keywords: tuple[str, ...]


@dataclass(frozen=True)
class BidPolicy(PolicyView):
    """A bid policy, read once from its validated parameters: the keys Python reads (the
    templates render the plain `parameters`, core/policy_view.py)."""

    query_types: tuple[QueryType, ...]  # in the file's order: the first whose keywords match
    gates: Mapping[str, float]  # §12's thresholds, by gate
    calibration: str | None  # §8.4's method; None: calibration_needed is only flagged
    reads_fields: bool  # §3.2: the tender_fields table becomes constraints (bid_v4)
    fillers: tuple[str, ...]  # §3.3's compression; empty: the rewrite is not compressed

    @classmethod
    def of(cls, policy: Policy) -> BidPolicy:
        p = policy.parameters
        return cls(
            policy=policy,
            query_types=tuple(QueryType(e["type"], tuple(e["keywords"])) for e in p["query_types"]),
            gates=p["gates"],
            calibration=p["calibration"]["method"] if "calibration" in p else None,
            reads_fields="tender_fields" in p.get("constraints", {}),
            fillers=tuple(p["compression"]["fillers"]) if "compression" in p else (),
        )


def load_bid_policy(name_or_path: str, overrides: list[str] | None = None) -> BidPolicy:
    return BidPolicy.of(load_policy(BID_POLICY, name_or_path, overrides))
