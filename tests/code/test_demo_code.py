"""`duckscore demo code`: the bundled collection run with code_rrf_v1 into --out, and a summary
whose Acc@k are `duckscore eval --loc`'s on its loc_outputs.jsonl — and, at the file and module
levels, a plain-Python count of the instances whose every gold location is among the first k."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner, Result

from duckscore.cli.app import cli

from ..helpers import FIXTURES

pytestmark = pytest.mark.slow
GOLD = FIXTURES / "code" / "gold.parquet"
LISTS = {"file": "found_files", "module": "found_modules"}
OUTPUTS = (
    "loc_outputs.jsonl",
    "contract.jsonl",
    "fused.parquet",
    "queries.parquet",
    "manifest.json",
)


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("demo") / "code-demo"
    return out, invoke("demo", "code", "--out", str(out)).stdout


def shown(summary: str) -> dict[str, dict[str, str]]:
    """level -> Acc@k -> the figure as printed."""
    lines = re.findall(r"^(file|module|function) +(\d+) instances +(.*)$", summary, re.M)
    return {level: dict(re.findall(r"(Acc@\d+) (\S+)", rest)) for level, _, rest in lines}


def acc_at(found: list[str], gold: set[str], k: int) -> int:
    return int(len(set(found[:k]) & gold) == min(len(gold), k))


def test_the_outputs_are_written(demo: tuple[Path, str]) -> None:
    out, summary = demo
    for name in OUTPUTS:
        assert (out / name).is_file(), name
    lines = (out / "loc_outputs.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 200 and summary.startswith("Code-localization demo: 200 commits")
    assert f"outputs in {out}/: loc_outputs.jsonl" in summary
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["recipe_id"] == "code_rrf_v1"


def test_the_summary_is_eval_loc(demo: tuple[Path, str]) -> None:
    out, summary = demo
    printed = shown(summary)
    assert {level: list(figures) for level, figures in printed.items()} == {
        "file": ["Acc@1", "Acc@3", "Acc@5"],
        "module": ["Acc@5", "Acc@10"],
        "function": ["Acc@5", "Acc@10"],
    }
    evaluated = invoke("eval", "--loc", str(out / "loc_outputs.jsonl"), "--gold", str(GOLD)).stdout
    level = ""
    for line in evaluated.splitlines():
        if heading := re.match(r"^(file|module|function): 200 instances evaluated", line):
            level = heading.group(1)
        elif (row := line.split()) and row[0] in printed.get(level, {}):
            assert printed[level].pop(row[0]) == f"{float(row[1]):.3f}", (level, row)
    assert all(not figures for figures in printed.values()), printed  # every one compared


def test_the_summary_counts_the_instances_found(demo: tuple[Path, str]) -> None:
    out, summary = demo
    gold: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for row in pq.read_table(GOLD).to_pylist():
        gold[row["level"]][row["instance_id"]].add(row["location"])
    lines = [json.loads(line) for line in (out / "loc_outputs.jsonl").open(encoding="utf-8")]
    for level, figures in shown(summary).items():
        if level not in LISTS:
            continue
        for name, figure in figures.items():
            k = int(name.removeprefix("Acc@"))
            hits = sum(
                acc_at(line[LISTS[level]], gold[level][line["instance_id"]], k) for line in lines
            )
            assert figure == f"{hits / len(lines):.3f}", (level, name)
