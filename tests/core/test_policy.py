"""Policy loading, validation, overrides and bases (`extends`); the audited literal filter."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from duckscore.answering.policy import ANSWER_POLICY
from duckscore.bids.policy import BID_POLICY
from duckscore.cli import cli
from duckscore.core.errors import PolicyError, TemplateError
from duckscore.core.policy import canonical_json, load_policy
from duckscore.core.render import ident, lit
from duckscore.instincts.policy import INSTINCT_POLICY
from duckscore.scoring.policy import SCORE_POLICY


def v1(*overrides: str):
    return load_policy(SCORE_POLICY, "overall_v1", list(overrides))


def test_overall_v1_is_the_seed_defaults() -> None:
    p = v1().parameters
    # seed 000 §5.1, §5.2, §6.1, §7.2, §8.1, §4.2 (P10/P90), §6.2 (0.01)
    assert (p["alpha"], p["beta"]) == (0.6, 0.5)
    assert (p["w1"], p["w2"], p["w3"]) == (0.5, 0.3, 0.2)
    assert (p["T_low"], p["T_high"], p["R_hitl"]) == (0.35, 0.68, 0.92)
    assert (p["normalization"]["p_lo"], p["normalization"]["p_hi"]) == (0.1, 0.9)
    assert p["normalization"]["mode"] == "per_query"
    assert p["subscore_floor"] == 0.01
    assert (p["stability_base"], p["stability_size_weight"]) == (0.5, 0.5)
    assert v1().version == "overall_v1"


def test_overrides_change_parameters_and_mark_the_version() -> None:
    policy = v1(
        "alpha=0.7",
        "parameters.risk_flags.single_spike.max_score_norm_at_least=0.9",
        "normalization.reference.rrf_sum=[0.01, 0.05]",
    )
    assert policy.parameters["alpha"] == 0.7
    assert policy.parameters["risk_flags"]["single_spike"]["max_score_norm_at_least"] == 0.9
    assert policy.parameters["normalization"]["reference"]["rrf_sum"] == [0.01, 0.05]
    assert (
        policy.version.startswith("overall_v1+") and len(policy.version) == len("overall_v1+") + 8
    )
    assert policy.overrides["alpha"] == 0.7
    assert v1("alpha=0.7").version == v1("alpha=0.7").version != v1("alpha=0.71").version


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("alpah=0.7", "unknown key 'alpah' (did you mean 'alpha'?)"),
        ("risk_flags.single_spike=1", "is a group; give a mapping"),
        ("risk_flags.single_spike={nope: 1}", "unknown key 'risk_flags.single_spike.nope'"),
        ("risk_flags.single_spyke.x=1", "did you mean 'risk_flags.single_spike'"),
        ("alpha=1.5", "parameters.alpha: 1.5 is outside [0, 1]"),
        ("alpha=high", "parameters.alpha: expected a number, got 'high'"),
        ("alpha", "expected key=value"),
        ("w1=0.6", "w1 + w2 + w3 + w_agreement + w_separation must sum to 1, got 1.1"),
        ("w1=0", "parameters.w1: 0 is outside (0, 1]"),
        ("T_low=0.7", "T_low (0.7) must not exceed T_high (0.68)"),
        ("normalization.mode=absolute", "'absolute' is not one of per_query, reference"),
        (
            "normalization.mode=reference",
            "normalization.reference.rrf_sum is required by mode: reference",
        ),
        (
            "normalization.coverage=divide_by_max",
            "coverage_max is required by coverage: divide_by_max",
        ),
        ("normalization.reference.rrf_sum=[0.5, 0.1]", "lo (0.5) must not exceed hi (0.1)"),
        ("normalization.p_lo=0.95", "p_lo must be below normalization.p_hi"),
        ("normalization.eps=0", "outside (0, 1]"),
    ],
)
def test_bad_overrides_name_the_key(override: str, message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        v1(override)
    assert message in str(raised.value)


def test_exponent_floats_without_a_dot_are_numbers() -> None:
    assert v1("normalization.eps=1e-12").parameters["normalization"]["eps"] == 1e-12
    assert v1("normalization.eps=2E-7").parameters["normalization"]["eps"] == 2e-07


def test_equal_thresholds_are_allowed() -> None:
    assert v1("T_low=0.68").parameters["T_low"] == 0.68


def _policy_file(tmp_path: Path, mutate) -> Path:
    from duckscore.core.resources import policies_dir

    document = yaml.safe_load((policies_dir("score") / "overall_v1.yaml").read_text())
    mutate(document)
    path = tmp_path / "custom.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_policy_file_by_path(tmp_path: Path) -> None:
    def mutate(d):
        d["score_policy_version"] = "overall_custom"
        d["parameters"]["alpha"] = 0.8

    policy = load_policy(SCORE_POLICY, str(_policy_file(tmp_path, mutate)))
    assert policy.version == "overall_custom" and policy.parameters["alpha"] == 0.8


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(extra=1), "unknown key 'extra'"),
        (lambda d: d["parameters"].pop("beta"), "missing key parameters.beta"),
        (
            lambda d: d["parameters"]["risk_flags"]["low_coverage"].update(strenght_at_least=1),
            "unknown key 'parameters.risk_flags.low_coverage.strenght_at_least' (did you mean "
            "'parameters.risk_flags.low_coverage.strength_at_least'?)",
        ),
        (lambda d: d.pop("score_policy_version"), "score_policy_version must be a version name"),
        (lambda d: d.update(score_policy_version="bad version!"), "must be a version name"),
        (lambda d: d.update(parameters=[1, 2]), "`parameters` must be a mapping"),
        (lambda d: d.update(metadata=[1, 2]), "`metadata` must be a mapping"),
        (lambda d: d.update(parent_version=[1]), "parent_version must be a version name"),
    ],
)
def test_bad_policy_files(tmp_path: Path, mutate, message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        load_policy(SCORE_POLICY, str(_policy_file(tmp_path, mutate)))
    assert message in str(raised.value)
    assert str(tmp_path / "custom.yaml") in str(raised.value)


def test_invalid_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("score_policy_version: x\nparameters:\n  alpha: [1,\n")
    with pytest.raises(PolicyError, match=r"broken.yaml:\d+: not valid YAML"):
        load_policy(SCORE_POLICY, str(path))


def test_a_key_given_twice_is_refused_not_last_wins(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    packaged = (Path(__file__).parents[2] / "sql/score/policies/overall_v1.yaml").read_text()
    path.write_text(packaged.replace("parameters:\n", "parameters:\n  alpha: 0.1\n", 1))
    assert packaged.count("\n  alpha:") == 1
    with pytest.raises(
        PolicyError, match=r"twice.yaml:\d+: not valid YAML \(key 'alpha' is given twice\)"
    ):
        load_policy(SCORE_POLICY, str(path))
    with pytest.raises(PolicyError, match="the value is not valid YAML"):
        load_policy(SCORE_POLICY, "overall_v1", ["weights={a: 1, a: 2}"])


def test_unknown_policy_lists_the_packaged_ones() -> None:
    with pytest.raises(
        PolicyError, match=r"unknown score policy 'overall_v9' \(packaged: overall_v1"
    ):
        load_policy(SCORE_POLICY, "overall_v9")


def test_packaged_policies_are_found_from_any_directory(tmp_path: Path) -> None:
    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert v1().parameters["alpha"] == 0.6
    finally:
        os.chdir(here)


@pytest.mark.parametrize(
    ("value", "sql"),
    [
        (0.1, "CAST(0.1 AS DOUBLE)"),
        (1e-09, "CAST(1e-09 AS DOUBLE)"),
        (0.30000000000000004, "CAST(0.30000000000000004 AS DOUBLE)"),
        (3, "3"),
        (True, "TRUE"),
        (None, "NULL"),
        ("it's", "'it''s'"),
        (["a", 1.5], "['a', CAST(1.5 AS DOUBLE)]"),
    ],
)
def test_lit_renders_exact_literals(value, sql: str) -> None:
    assert lit(value) == sql


def test_lit_round_trips_doubles_through_duckdb() -> None:
    import duckdb

    for value in (0.1, 1 / 3, 1e-300, 123456789.123456789, -0.0):
        assert duckdb.execute(f"SELECT {lit(value)}").fetchall()[0][0] == value


@pytest.mark.parametrize("value", [float("nan"), float("inf"), {"a": 1}, "nul\x00", object()])
def test_lit_rejects_what_it_cannot_render(value) -> None:
    with pytest.raises(TemplateError):
        lit(value)


def test_ident_quotes_anything_unusual() -> None:
    assert ident("parent_features") == "parent_features"
    assert ident('we"ird name') == '"we""ird name"'
    with pytest.raises(TemplateError):
        ident("")


# `extends`: a base and its differences, for every capability's policies

EXTENDS_CASES = {
    # capability: (its kind, a packaged base, a difference, the same difference as an override)
    "score": (SCORE_POLICY, "overall_v1", {"normalization": {"p_lo": 0.2}}, "normalization.p_lo=0.2"),
    "answers": (ANSWER_POLICY, "answer_v1", {"levels": {"high_at_least": 80.0}}, "levels.high_at_least=80.0"),
    "bids": (BID_POLICY, "bid_v1", {"packing": {"max_items": 6}}, "packing.max_items=6"),
    "instincts": (INSTINCT_POLICY, "instinct_v1", {"human": {"prior": 0.6}}, "human.prior=0.6"),
}  # fmt: skip


def _write(path: Path, document: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def _digest(value: object) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:8]


@pytest.mark.parametrize("capability", sorted(EXTENDS_CASES))
def test_a_policy_extends_a_base_with_its_differences(tmp_path: Path, capability: str) -> None:
    kind, base, difference, override = EXTENDS_CASES[capability]
    path = _write(
        tmp_path / "mine.yaml",
        {kind.version_key: "mine_v1", "extends": base, "parameters": difference},
    )
    policy = load_policy(kind, str(path))
    assert policy.parameters == load_policy(kind, base, [override]).parameters
    assert (policy.version, policy.base_version) == ("mine_v1", "mine_v1")
    record = policy.as_record()
    assert record["extends"] == [{"version": base, "source": f"{capability} policy {base}"}]
    assert record["parent_version"] is None and record["source"] == str(path)


@pytest.mark.parametrize("capability", sorted(EXTENDS_CASES))
def test_a_policy_without_a_version_of_its_own_does_not_claim_its_base(
    tmp_path: Path, capability: str
) -> None:
    kind, base, difference, _ = EXTENDS_CASES[capability]
    path = _write(tmp_path / "diff.yaml", {"extends": base, "parameters": difference})
    policy = load_policy(kind, str(path))
    assert policy.version == f"{base}+{_digest(difference)}" != base
    assert policy.base_version == base
    assert load_policy(kind, str(path)).as_record() == policy.as_record()  # deterministic
    same = _write(tmp_path / "same.yaml", {"extends": base})
    assert load_policy(kind, str(same)).version == base
    assert load_policy(kind, str(same)).parameters == load_policy(kind, base).parameters


def test_bases_chain_merge_mappings_and_replace_lists(tmp_path: Path) -> None:
    bands = [{"at_least": 2, "points": 0.5}, {"at_least": 0, "points": 0.1}]
    middle = _write(
        tmp_path / "bases" / "middle.yaml",
        {
            "answer_policy_version": "middle_v1",
            "extends": "answer_v1",
            "parameters": {"weights": {"retrieval": 1.0}, "citation_count": bands},
        },
    )
    top = _write(
        tmp_path / "bases" / "top.yaml",
        {"extends": "middle.yaml", "parameters": {"weights": {"certainty": 1.5}}},
    )
    policy = load_policy(ANSWER_POLICY, str(top))
    expected = load_policy(
        ANSWER_POLICY,
        "answer_v1",
        [f"citation_count={json.dumps(bands)}", "weights.retrieval=1.0", "weights.certainty=1.5"],
    )
    assert policy.parameters == expected.parameters
    assert policy.version == f"middle_v1+{_digest({'weights': {'certainty': 1.5}})}"
    assert policy.as_record()["extends"] == [
        {"version": "middle_v1", "source": str(middle)},
        {"version": "answer_v1", "source": "answers policy answer_v1"},
    ]
    with_override = load_policy(ANSWER_POLICY, str(top), ["weights.retrieval=0.5"])
    assert with_override.version == f"{policy.version}+{_digest({'weights.retrieval': 0.5})}"
    assert with_override.base_version == "middle_v1"


def test_a_policy_without_extends_is_read_as_before(tmp_path: Path) -> None:
    from duckscore.core.resources import policies_dir

    copy = tmp_path / "overall_v1.yaml"
    copy.write_text((policies_dir("score") / "overall_v1.yaml").read_text(encoding="utf-8"))
    record = load_policy(SCORE_POLICY, str(copy)).as_record()
    assert "extends" not in record and "extends" not in v1().as_record()
    assert record == v1().as_record() | {"source": str(copy)}


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"a.yaml": {"extends": "a.yaml"}}, "a.yaml: extends 'a.yaml' makes a cycle: a.yaml -> a.yaml"),
        (
            {"a.yaml": {"extends": "b.yaml"}, "b.yaml": {"extends": "a.yaml"}},
            "b.yaml: extends 'a.yaml' makes a cycle: a.yaml -> b.yaml -> a.yaml",
        ),
        (
            {"a.yaml": {"extends": "overall_v9"}},
            "a.yaml: extends: unknown score policy 'overall_v9' (packaged: overall_v1, overall_v2, overall_v3)",
        ),
        ({"a.yaml": {"extends": "nowhere.yaml"}}, "a.yaml: extends: policy file not found: "),
        ({"a.yaml": {"extends": ["overall_v1"]}}, "a.yaml: extends must be a policy name or a path, got ['overall_v1']"),
        (
            {"a.yaml": {"score_policy_version": "overall_v1", "extends": "overall_v1"}},
            "a.yaml: score_policy_version 'overall_v1' is the version of a base it extends",
        ),
        ({"a.yaml": {"extends": "overall_v1", "parameters": {"alpah": 1}}}, "a.yaml: unknown key 'parameters.alpah'"),
        ({"a.yaml": {"extends": "overall_v1", "parameters": [1]}}, "a.yaml: `parameters` must be a mapping"),
    ],
)  # fmt: skip
def test_bad_bases_are_one_line_naming_the_file_and_key(
    tmp_path: Path, files: dict, message: str
) -> None:
    for name, document in files.items():
        _write(tmp_path / name, document)
    result = CliRunner().invoke(cli, ["policy", "show", str(tmp_path / "a.yaml")])
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1
    assert message in result.stderr.replace(f"{tmp_path}/", ""), result.stderr
