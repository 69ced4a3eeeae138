"""`duckscore dbt package` without dbt: the committed example package is what the command writes
today, the dbt macros are the macro pack's bodies, the folder is written as a whole or refused.

The package's models run in dbt in test_dbt_build.py (the extended tier, with dbt-core and
dbt-duckdb in .venv-dbt)."""

from __future__ import annotations

from pathlib import Path

import jinja2
from click.testing import CliRunner, Result

from duckscore.cli import cli
from duckscore.dbt.macros import dbt_macro
from duckscore.dbt.models import jinja_literal
from duckscore.dbt.package import build_package
from duckscore.fusion.recipe import load_recipe
from duckscore.instincts.policy import load_instinct_policy
from duckscore.pack.scalar import scalar_macros
from duckscore.scoring.policy_view import load_score_policy

from ..helpers import ROOT, SCIFACT

EXAMPLE = ROOT / "examples" / "dbt_scifact"
COMMITTED = EXAMPLE / "duckscore_dbt"  # a local package of packages.yml, outside dbt_packages/
REGENERATE = (
    "duckscore dbt package --log fixtures/scifact/retrieval_log.parquet "
    "--out examples/dbt_scifact/duckscore_dbt"
)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["-q", "dbt", "package", *args])


def package_tree(folder: Path) -> dict[str, str]:
    return {
        path.relative_to(folder).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_the_committed_example_package_is_what_the_command_writes(tmp_path: Path) -> None:
    log = SCIFACT / "retrieval_log.parquet"
    result = invoke("--log", str(log), "--out", str(tmp_path / "duckscore"))
    assert result.exit_code == 0, result.output
    fresh, committed = package_tree(tmp_path / "duckscore"), package_tree(COMMITTED)
    assert sorted(committed) == sorted(fresh), f"files differ: run `{REGENERATE}`"
    for name, text in fresh.items():
        assert committed[name] == text, f"{name} is stale: run `{REGENERATE}`"


def test_the_package_records_the_policy_and_recipe_it_was_generated_with() -> None:
    package = build_package("overall_v1", ["T_high=0.9"], "hybrid_v1", [], True, ["dense"])
    schema = package.files["models/schema.yml"]
    assert "score_policy_version: overall_v1+" in schema and "recipe_id: hybrid_v1" in schema
    assert package.versions.score.parameters_sha256 in schema
    for name in package.models:
        model = package.files[f"models/{name}.sql"]
        assert f"score policy {package.versions.score.version} (parameters sha256 " in model
        assert "{{ duckscore.duckscore_batch(" in model and "query_table(" not in model
    assert (
        "source(var('duckscore_source_name'), var('duckscore_source_table'))"
        in (package.files["models/duckscore_fused.sql"])
    )


def test_a_policy_calibrated_on_another_recipe_is_refused_as_run_refuses_it(tmp_path: Path) -> None:
    result = invoke("--out", str(tmp_path / "pkg"), "--recipe", "hybrid_v1")
    assert result.exit_code == 2 and not (tmp_path / "pkg").exists()
    assert "--allow-recipe-mismatch" in result.output


def test_each_dbt_macro_is_the_macro_packs_body_with_its_arguments() -> None:
    """Rendered with every argument named as the DuckDB macro's parameter, the dbt macro is the
    DuckDB macro's body, character for character; and no parameter is left unreplaced."""
    score, recipe = (
        load_score_policy("overall_v3"),
        load_recipe("canonical_rrf"),
    )
    macros = scalar_macros(score, recipe, load_instinct_policy("instinct_v1"))
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    for macro in macros:
        names = [*macro.required, *(name for name, _ in macro.optional)]
        module = env.from_string(dbt_macro(macro)).module
        render = getattr(module, f"duckscore_{macro.name}")
        assert render(*names) == macro.body(), macro.name
        marked = render(*(f"<{name}>" for name in names))
        assert "<" in marked
        for name in names:
            assert f"<{name}>" in marked, f"{macro.name}: {name} is never used"


def test_rendered_sql_with_a_jinja_marker_reaches_dbt_as_raw_text() -> None:
    assert jinja_literal("SELECT 1") == "SELECT 1"
    assert jinja_literal("SELECT '{{ x }}'") == "{% raw %}SELECT '{{ x }}'{% endraw %}"
    env = jinja2.Environment()
    assert env.from_string(jinja_literal("SELECT '{#'")).render() == "SELECT '{#'"


def test_the_package_is_written_as_a_whole_and_another_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    assert invoke("--out", str(out)).exit_code == 0
    (out / "models" / "stale.sql").write_text("SELECT 1\n")
    assert (
        invoke("--out", str(out), "--policy", "overall_v1", "--recipe", "canonical_rrf").exit_code
        == 0
    )
    assert not (out / "models" / "stale.sql").exists()
    assert "overall_v1" in (out / "models" / "duckscore_contract.sql").read_text()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    refused = invoke("--out", str(other))
    assert refused.exit_code == 2
    assert "no package `duckscore dbt package` wrote" in refused.output
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]


def test_it_says_what_it_wrote_on_stderr_and_nothing_on_stdout(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["dbt", "package", "--out", str(tmp_path / "pkg")])
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr == (
        f"duckscore: wrote the dbt package duckscore into {tmp_path / 'pkg'}/ (score policy "
        "overall_v3, recipe canonical_rrf over sources dense, sparse, summary; models "
        "duckscore_fused, duckscore_parent_features, duckscore_parents, duckscore_contract, "
        "duckscore_queries)\n"
    )


def test_the_example_installs_its_package_the_dbt_way() -> None:
    """packages.yml names the package by a local path outside dbt_packages/, which `dbt deps`
    owns (it deletes what it did not install there), and nothing is committed under it."""
    assert (EXAMPLE / "packages.yml").read_text(encoding="utf-8") == (
        "packages:\n  - local: duckscore_dbt\n"
    )
    assert (COMMITTED / "dbt_project.yml").is_file()
    lock = (EXAMPLE / "package-lock.yml").read_text(encoding="utf-8")
    assert "  - local: duckscore_dbt\n    name: duckscore\n" in lock
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "examples/dbt_scifact/dbt_packages/" in ignored
