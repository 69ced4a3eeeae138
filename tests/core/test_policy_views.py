"""The typed, frozen views of the score, answer, bid and instinct policies (core/policy_view.py):
built from every packaged policy of their kind, their attributes are what the YAML file says,
read here by plain `yaml.safe_load` (not by duckscore's loader), and nothing in them can be
changed."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from duckscore.answering.policy import AnswerPolicy, Band, load_answer_policy
from duckscore.bids.policy import BidPolicy, QueryType, load_bid_policy
from duckscore.core.policy_view import PolicyView
from duckscore.instincts.policy import (
    Composite,
    Decay,
    InstinctPolicy,
    Tier,
    load_instinct_policy,
)
from duckscore.scoring.policy_view import (
    Normalization,
    Probability,
    ScorePolicy,
    load_score_policy,
)

SQL = Path(__file__).resolve().parents[2] / "sql"


def packaged(capability: str) -> list[Path]:
    return sorted((SQL / capability / "policies").glob("*.yaml"))


def file_parameters(path: Path) -> dict[str, Any]:
    """The file's parameters over those of the file it extends (a sibling), merged by key."""
    written = yaml.safe_load(path.read_text(encoding="utf-8"))
    base = written.get("extends")
    inherited = file_parameters(path.with_name(f"{base}.yaml")) if base else {}
    return merged(inherited, written.get("parameters") or {})


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    both = {**base, **over}
    for key in base.keys() & over.keys():
        if isinstance(base[key], dict) and isinstance(over[key], dict):
            both[key] = merged(base[key], over[key])
    return both


def check_score(view: ScorePolicy, p: dict[str, Any]) -> None:
    assert (view.alpha, view.beta, view.strength_evidence) == (
        p["alpha"],
        p["beta"],
        p["strength_evidence"],
    )
    weights = ("w1", "w2", "w3", "w_agreement", "w_separation")
    assert list(view.weights.items()) == [(w, p[w]) for w in weights]
    assert view.combination == {"alpha": p["alpha"], "beta": p["beta"]} | {w: p[w] for w in weights}
    assert (view.t_low, view.t_high, view.r_hitl) == (p["T_low"], p["T_high"], p["R_hitl"])
    assert view.thresholds == {k: p[k] for k in ("T_low", "T_high", "R_hitl")}
    assert view.subscore_floor == p["subscore_floor"]
    nz = p["normalization"]
    assert view.normalization == Normalization(
        nz["mode"], nz["p_lo"], nz["p_hi"], nz["eps"], nz["zero_spread_value"], nz["coverage"]
    )
    given = p.get("probability")
    expected = (
        None
        if given is None
        else Probability(
            given["method"], given["levels_by"], given["p_low"], given["p_high"], given
        )
    )
    assert view.probability == expected


def check_answers(view: AnswerPolicy, p: dict[str, Any]) -> None:
    assert dict(view.weights) == p["weights"]
    assert view.score_range == tuple(p["citation_relevance"]["score_range"])
    assert view.bands["length"] == tuple(Band(b["at_least"], b["points"]) for b in p["length"])
    assert sorted(view.bands) == sorted(
        ("citation_count", "length", "retrieved_count", "citation_rate")
    )
    assert list(view.lexicons["conclusion"]) == p["lexicons"]["conclusion"]


def check_bids(view: BidPolicy, p: dict[str, Any]) -> None:
    assert view.query_types == tuple(
        QueryType(entry["type"], tuple(entry["keywords"])) for entry in p["query_types"]
    )
    assert dict(view.gates) == p["gates"]
    assert view.calibration == p.get("calibration", {}).get("method")


def check_instincts(view: InstinctPolicy, p: dict[str, Any]) -> None:
    assert dict(view.weights) == p["weights"]
    assert view.composite == Composite(**p["composite"])
    assert view.tiers == tuple(Tier(**t) for t in p["tiers"])
    assert view.decay == Decay(**p["decay"])
    assert list(view.weekly_decay) == p["update_rules"]["weekly_decay"]
    assert view.wilson_z == p["effectiveness"]["z"]
    lifecycle, signals = p.get("lifecycle"), p.get("outcome_signals")
    assert (view.lifecycle is None) == (lifecycle is None)
    if view.lifecycle is not None:
        assert dataclasses.asdict(view.lifecycle.evolve) == lifecycle["evolve"]
        assert view.lifecycle.archive_evolved_after_days == lifecycle["archive_evolved_after_days"]
    assert (view.outcome_signals is None) == (signals is None)
    if view.outcome_signals is not None:
        assert {k: list(v) if isinstance(v, tuple) else v
                for k, v in dataclasses.asdict(view.outcome_signals).items()} == signals  # fmt: skip


KINDS: dict[str, tuple[Callable[[str], PolicyView], Callable[[Any, dict[str, Any]], None]]] = {
    "score": (load_score_policy, check_score),
    "answers": (load_answer_policy, check_answers),
    "bids": (load_bid_policy, check_bids),
    "instincts": (load_instinct_policy, check_instincts),
}
CASES = [(kind, path) for kind in KINDS for path in packaged(kind)]


@pytest.mark.parametrize(("kind", "path"), CASES, ids=[f"{k}-{p.stem}" for k, p in CASES])
def test_a_view_reads_as_its_packaged_file_says(kind: str, path: Path) -> None:
    load, check = KINDS[kind]
    view = load(path.stem)
    check(view, file_parameters(path))
    assert (view.version, view.policy.version, view.source) == (
        path.stem,
        path.stem,
        f"{kind} policy {path.stem}",
    )
    # the templates' plain mapping and the record are the loaded policy's, unchanged
    assert view.parameters is view.policy.parameters
    assert view.as_record() == view.policy.as_record()
    assert view.parameters_sha256 == view.policy.parameters_sha256


def test_every_kind_has_a_packaged_policy() -> None:
    assert {kind for kind, _ in CASES} == set(KINDS)


@pytest.mark.parametrize(
    ("view", "attribute", "mapping"),
    [
        (load_score_policy("overall_v3"), "t_low", "weights"),
        (load_answer_policy("answer_v1"), "score_range", "weights"),
        (load_bid_policy("bid_v1"), "query_types", "gates"),
        (load_instinct_policy("instinct_v1"), "wilson_z", "weights"),
    ],
    ids=["score", "answers", "bids", "instincts"],
)
def test_a_view_is_frozen(view: PolicyView, attribute: str, mapping: str) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(view, attribute, None)
    with pytest.raises(TypeError):
        getattr(view, mapping)["w1"] = 0.0


def test_a_score_view_s_nested_parts_are_frozen() -> None:
    view = load_score_policy("overall_v3")
    assert view.probability is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.normalization.p_lo = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        view.probability.block["method"] = "platt"  # type: ignore[index]


def test_evidence_columns_follow_the_weights_and_the_strength_evidence() -> None:
    assert load_score_policy("overall_v1").evidence_columns == []
    both = load_score_policy(
        "overall_v1",
        ["strength_evidence=parent_rrf", "w_agreement=0.1", "w_separation=0.1", "w3=0.0"],
    )
    assert both.evidence_columns == ["parent_rrf", "source_agreement", "score_lead"]


def test_a_view_gives_its_policys_other_fields_as_a_policy_did() -> None:
    view = load_score_policy("overall_v3")
    assert (view.metadata, view.overrides) == (view.policy.metadata, view.policy.overrides)
    assert (view.base_version, view.description) == ("overall_v3", view.policy.description)
    with pytest.raises(AttributeError):
        view.no_such_field  # noqa: B018
    assert copy.deepcopy(view) == view and pickle.loads(pickle.dumps(view)) == view
