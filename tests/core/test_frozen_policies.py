"""A loaded policy's parameters are a read-only view (core/frozen.py), all the way down; what
hashes, renders, dumps and records them reads the plain values, as before the views.

The digests below were taken at commit 39bdad7 (before the views), by that commit's own code,
not by the code under test: every packaged policy's parameters_sha256, and the record of every
packaged recipe resolved against the log sources sparse, dense (the manifest's `policy`), as
json.dumps writes it in its key order. A view that changed one value, one type (a list become
a tuple) or one key's place fails here."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from duckscore.answering.policy import ANSWER_POLICY
from duckscore.bids.policy import BID_POLICY
from duckscore.core.frozen import FrozenList, FrozenMap
from duckscore.core.policy import (
    PolicyKind,
    available_policies,
    canonical_json,
    dump_yaml,
    load_policy,
    policy_from_parameters,
)
from duckscore.core.render import render_expression
from duckscore.fusion.recipe import FUSE_RECIPE, load_recipe, plan
from duckscore.instincts.policy import INSTINCT_POLICY
from duckscore.scoring.policy import SCORE_POLICY

KINDS = {
    k.capability: k for k in (SCORE_POLICY, FUSE_RECIPE, ANSWER_POLICY, BID_POLICY, INSTINCT_POLICY)
}
BEFORE_THE_VIEWS = {
    ("score", "overall_v1"): "41afa599a22bce6ce6fd31ae8fdcc27fa01ddb0b2392e2083c7e972b37bf99d9",
    ("score", "overall_v2"): "7ea4053d17c0f5736608e8f55d82ee98dd7710ddcf5f618052752481f6571e8d",
    ("score", "overall_v3"): "d92cc30fc45ea4c3e59adfe8bde3c7c0d9e26f61ddadea5096ac508ba21855d1",
    ("fuse", "canonical_rrf"): "685ac9690a8d2a311d8c9816d05550d937c38ea8314de9a4c45c01bf5d554a9e",
    # issue 49: canonical_rrf's parameters (file is doc), named for code localization
    ("fuse", "code_rrf_v1"): "685ac9690a8d2a311d8c9816d05550d937c38ea8314de9a4c45c01bf5d554a9e",
    ("fuse", "elasticsearch_linear"): "2838eb033ec4d24e0ff5ca62690b87a2c115ce9701dcc29e34e7317b18cf55d5",
    ("fuse", "elasticsearch_rrf"): "c0dc264cbcc40822eab1348689352a3e409f2eb034af1d0d5ed7967b625b519d",
    ("fuse", "hybrid_v1"): "499bc5da1d519795a4cc75245132407512b7340342f9e98393ffaaee693a089f",
    ("fuse", "opensearch_hybrid"): "296daa8d3f74627d704862a633890030b416a210cafb2e50bee254a15044050b",
    ("fuse", "qdrant_dbsf"): "e7d96bb65001dac35137efcd7d10a4f32e741da2fcec941cede7c9d2ac848015",
    ("fuse", "qdrant_rrf"): "12381a2f7b34b19ad08ec6fd727e04d4eb7dead86f8b552c1274a06eb4cfaceb",
    ("fuse", "seed003_sum_top_n"): "9c5fa43529e01dba8a777e1d077ee191405040cf0b20f2ee0c37806ccde0f455",
    ("fuse", "weaviate_relative"): "a12a1110605e1d0af1956344395e48c03d011e0ab1137c80b31911c457be7f26",
    ("answers", "answer_v1"): "819c2e163fc61bfc1d94de13aacab222557f9920059550411e77cb4e3e044374",
    ("answers", "answer_v1_en"): "03cda6a97b99db32fcc82c0cf685ff7e0405f739b93040fc1fcc6dbd9986563f",
    # issue 50: seed 001 §未来改进 1, 2 and the streaming start, over answer_v1 / answer_v1_en
    ("answers", "answer_v2"): "5fc8e86368dbb2456fa5985f186cdd87e35f2c9958518ff3f9e2d03296c6b739",
    ("answers", "answer_v2_en"): "876957cb49c69e7ec343dea315f8d34fb04ef042c09ad451fb34a98490bc2ce4",
    ("bids", "bid_v1"): "6a8b193d83cf8811964985c4f90405c8a0a1a07fa92bc0ad0c352e2907b3d6f8",
    # issue 50: bid_v2 and bid_v3, added after the views, each frozen as it was written
    ("bids", "bid_v2"): "9230792fc451dfbdf413b344f39d37d718f4d5dac5a9d3c7a4295034b3376b74",
    ("bids", "bid_v3"): "812f032afb711161c7b9f934c276b059e1e2259a6dbb00f522c73c4b91bf43aa",
    # issue 50: bid_v3 and §3.2's tender fields, §3.3's compression (taken when it was added)
    ("bids", "bid_v4"): "b107f3f5907eedfc234509b348819dfe159e27456827823567d4e49cf089157a",
    ("instincts", "instinct_v1"): "15316492726b4ee4ac49fe2374f78974f9d885a699c6a2815c222c25d8ce87dd",
    # issue 50: instinct_v1 and the lifecycle and outcome-signal rules (taken when it was added)
    ("instincts", "instinct_v2"): "656f763b775b61208ab1243cc3d7f4a8f40ce998c6655ca96c1e5691eea76dad",
}  # fmt: skip
RESOLVED_RECORDS = {
    "canonical_rrf": "dba196dc9c99cb82957a9f93933f1e3e70be8d059dca45d42ef07f5c393974a8",
    "code_rrf_v1": "e456aba005fff6665122a4eff7dc1ea3d9ff3c10a3989e0b7cc3062024af2b97",
    "elasticsearch_linear": "b8085bba2292ded004ef7e18bd293f5e7f55f85dc90416fb7bae32983b8ad265",
    "elasticsearch_rrf": "0260f312dad7c742e584277bf5fa7c96142a6bdb3afe8d4b7760fe44c5f486f8",
    "hybrid_v1": "403f2e96787aaea9e0e3310127cb1952d59d98a72cdf3287674c49602c04d56e",
    "opensearch_hybrid": "d7799d825c730d7479d1bf9bb3ddd871cdb113d948945c9a762c096641d42ce0",
    "qdrant_dbsf": "e0368943ce5d094f7ebb49ef99b095ef12d674952397ab629411e328c9319381",
    "qdrant_rrf": "984492806733f46136db77b8c545c8ebf6832dcbd3d763a3fa5b7655e9c72293",
    "seed003_sum_top_n": "a8d2a33e64038804709bcf3529b3d6c53a42fac841b8a054e44d863706d6b930",
    "weaviate_relative": "c44be19d0f22830b808eebe406de4b1de79d7beb3613c3d07c382cb36947b34b",
}


def packaged() -> list[tuple[PolicyKind, str]]:
    return [(kind, name) for kind in KINDS.values() for name in available_policies(kind)]


def plain_sha256(value: Any) -> str:
    """The canonical JSON's sha256, by json alone: a frozen view is not JSON, so it fails."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def test_every_packaged_policy_keeps_its_parameters_sha256() -> None:
    found = {(kind.capability, name): load_policy(kind, name) for kind, name in packaged()}
    assert set(found) == set(BEFORE_THE_VIEWS)
    for key, policy in found.items():
        assert policy.parameters_sha256 == BEFORE_THE_VIEWS[key], key
        record = policy.as_record()
        assert plain_sha256(record["parameters"]) == BEFORE_THE_VIEWS[key], key
        assert record["parameters_sha256"] == BEFORE_THE_VIEWS[key], key


def test_every_packaged_recipe_resolved_keeps_its_record() -> None:
    """What fuse and run write as the manifest's policy: key order and discovered sources'
    order (the log's) included."""
    for name in available_policies(FUSE_RECIPE):
        record = plan(load_recipe(name), ["sparse", "dense"], has_rank=True).recipe.policy
        text = json.dumps(record.as_record(), ensure_ascii=False)
        assert hashlib.sha256(text.encode()).hexdigest() == RESOLVED_RECORDS[name], name


def nodes(value: Any, where: str = "") -> list[tuple[str, Any]]:
    """Every mapping and list of a parameter tree, with its dotted place."""
    if isinstance(value, FrozenMap | dict):
        found = [(where, value)]
        for key, item in value.items():
            found += nodes(item, f"{where}.{key}")
        return found
    if isinstance(value, FrozenList | list):
        found = [(where, value)]
        for index, item in enumerate(value):
            found += nodes(item, f"{where}[{index}]")
        return found
    return []


@pytest.mark.parametrize(("kind", "name"), packaged(), ids=lambda x: getattr(x, "capability", x))
def test_no_part_of_a_loaded_policy_can_be_changed(kind: PolicyKind, name: str) -> None:
    parameters = load_policy(kind, name).parameters
    found = nodes(parameters)
    assert len(found) > 1  # the nested ones too
    for where, node in found:
        if isinstance(node, dict | list):
            pytest.fail(f"{kind.capability} {name}{where} is a mutable {type(node).__name__}")
        first = next(iter(node), None) if isinstance(node, FrozenMap) else 0
        with pytest.raises(TypeError):
            node[first] = "changed"
        with pytest.raises(TypeError):
            del node[first]
        for method in ("update", "pop", "clear", "setdefault", "append", "extend", "sort"):
            assert not hasattr(node, method), f"{name}{where}.{method}"


def test_a_nested_write_into_a_recipe_or_a_policy_raises() -> None:
    recipe = load_policy(FUSE_RECIPE, "hybrid_v1").parameters
    with pytest.raises(TypeError):
        recipe["fusion"]["k"] = 20
    with pytest.raises(TypeError):
        recipe["source_defaults"]["weight"] = 0.5
    with pytest.raises(AttributeError):
        recipe["query_analyzer"]["rules"].append({"match": "x", "boost": {}})
    score = load_policy(SCORE_POLICY, "overall_v1").parameters
    with pytest.raises(TypeError):
        score["normalization"]["p_lo"] = 0.2
    assert recipe["fusion"]["k"] == 60.0 and score["normalization"]["p_lo"] == 0.1


def test_thawed_is_a_plain_copy_and_a_changed_policy_is_built_from_it() -> None:
    policy = load_policy(SCORE_POLICY, "overall_v1")
    plain = policy.parameters.thawed()
    assert type(plain) is dict and type(plain["normalization"]) is dict
    assert all(not isinstance(node, FrozenMap | FrozenList) for _, node in nodes(plain))
    assert plain == policy.parameters
    plain["normalization"]["p_lo"] = 0.2
    assert policy.parameters["normalization"]["p_lo"] == 0.1
    changed = policy_from_parameters(SCORE_POLICY, "overall_changed", plain, "test")
    assert changed.parameters["normalization"]["p_lo"] == 0.2
    assert changed.parameters_sha256 == plain_sha256(plain) != policy.parameters_sha256


def test_what_reads_a_view_gets_the_plain_values() -> None:
    """Templates, canonical JSON and YAML see dicts and lists, never the view's types."""
    view = FrozenMap({"b": [1, {"c": 2.5}], "a": "x"})
    assert view == {"b": [1, {"c": 2.5}], "a": "x"} and view["b"] == [1, {"c": 2.5}]
    assert repr(view) == "{'b': [1, {'c': 2.5}], 'a': 'x'}"
    assert isinstance(view["b"][:1], FrozenList) and view["b"][:1] == [1]
    assert render_expression("{{ p }}", p=view) == "{'b': [1, {'c': 2.5}], 'a': 'x'}"
    assert render_expression("{{ p.b }}", p=view) == "[1, {'c': 2.5}]"
    assert canonical_json(view) == '{"a":"x","b":[1,{"c":2.5}]}'
    assert dump_yaml(view) == "b:\n- 1\n- c: 2.5\na: x\n"
