"""`duckscore policy show NAME` of a name packaged for another capability says which, and the
command that shows it (issue 47 §4: `policy show canonical_rrf` gave no hint of --capability
fuse)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from duckscore.cli import cli


@pytest.mark.parametrize(
    ("name", "capability", "packaged", "hint"),
    [
        ("canonical_rrf", "score", "overall_v1, overall_v2, overall_v3",
         "canonical_rrf is a fuse recipe: duckscore policy show canonical_rrf --capability fuse"),
        ("overall_v3", "fuse", "canonical_rrf, code_rrf_v1, elasticsearch_linear, elasticsearch_rrf, hybrid_v1, opensearch_hybrid, qdrant_dbsf, qdrant_rrf, seed003_sum_top_n, weaviate_relative",
         "overall_v3 is a score policy: duckscore policy show overall_v3 --capability score"),
        ("answer_v1", "score", "overall_v1, overall_v2, overall_v3",
         "answer_v1 is an answers policy: duckscore policy show answer_v1 --capability answers"),
        ("bid_v1", "instincts", "instinct_v1, instinct_v2",
         "bid_v1 is a bids policy: duckscore policy show bid_v1 --capability bids"),
    ],
)  # fmt: skip
def test_a_name_of_another_capability_is_named_with_the_command_that_shows_it(
    name: str, capability: str, packaged: str, hint: str
) -> None:
    args = ["policy", "show", name] + (["--capability", capability] * (capability != "score"))
    done = CliRunner().invoke(cli, args)
    assert (done.exit_code, done.stdout) == (2, "")
    assert done.stderr == (
        f"duckscore: error: unknown {capability} policy {name!r} (packaged: {packaged}); {hint}\n"
    )
    shown = CliRunner().invoke(cli, hint.split(": ", 1)[1].split()[1:])
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["base_version"] == name


def test_a_name_packaged_nowhere_has_no_hint() -> None:
    done = CliRunner().invoke(cli, ["policy", "show", "overall_v9"])
    assert done.exit_code == 2
    assert done.stderr == (
        "duckscore: error: unknown score policy 'overall_v9' "
        "(packaged: overall_v1, overall_v2, overall_v3)\n"
    )
