"""One rule for what a command prints (docs/outputs.md, "What a command prints"): stdout holds
a command's data and nothing else; what a command did is a message, `duckscore: …` on stderr,
silenced by -q and --no-progress.

Success is not silent: `fuse`, `score`, `run`, `answers` and `bids` end with one line on
stderr — what they did, where the outputs are — and `score` and `run` add a line of how the policy
decided the queries; -q and --no-progress silence both; stdout stays empty. The commands that
change a store or write a file — `instincts init|ingest|recompute|decay|report`, `macros install`,
`export annotations` — say what they did the same way, and the commands that print data — `sql`,
`policy`, `filter check`, `instincts top`, `eval` — print it on stdout, the same with -q, and
nothing on stderr. And a typo in --set-recipe is reported as --set-recipe on every command that
takes it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from duckscore.cli import cli

from ..helpers import FIXTURES, SCIFACT

LOG = """\
query_id,source,item_id,parent_id,score,block_type,total_chunks
q1,bm25,A:1,A,12.0,body,4
q1,bm25,B:0,B,9.5,intro,2
q2,bm25,A:0,A,7.0,intro,4
q1,vec,B:1,B,0.79,body,2
q1,vec,A:1,A,0.65,body,4
q2,vec,C:0,C,0.20,intro,1
"""
FEATURES = """\
query_id,parent_id,rrf_sum,max_score,coverage,total_chunks,coverage_ratio
q1,P123,0.05,0.9,3,9,0.5
q1,P456,0.03,0.7,2,4,0.5
q2,P789,0.01,0.2,1,19,0.05
"""
ANSWERS = FIXTURES / "answers"


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def command(name: str, tmp_path: Path) -> list[str]:
    """The arguments of a successful run of `name`, writing to tmp_path/out."""
    (tmp_path / "log.csv").write_text(LOG, encoding="utf-8")
    (tmp_path / "features.csv").write_text(FEATURES, encoding="utf-8")
    log = ["--log", str(tmp_path / "log.csv"), "--recipe", "canonical_rrf"]
    return {
        "fuse": ["fuse", *log],
        "run": ["run", *log],
        # the seed's seven columns: overall_v1's, not the default overall_v3's (parent_rrf)
        "score": ["score", "--features", str(tmp_path / "features.csv"), "--policy", "overall_v1"],
        "answers": [
            "answers",
            *("--answers", str(ANSWERS / "answers.csv")),
            *("--citations", str(ANSWERS / "citations.csv")),
            *("--chunks", str(ANSWERS / "chunks.csv")),
        ],
        "bids": ["bids", "--input", str(FIXTURES / "bids" / "tender")],
    }[name] + ["--out", str(tmp_path / "out")]


SUCCESS = {
    "fuse": "fused 4 items from 6 hits of 2 sources into {out}/ "
    "(fused.parquet, parent_features.parquet, manifest.json, sql/)",
    "score": "scored 3 parents of 2 queries into {out}/ "
    "(parents.parquet, queries.parquet, contract.jsonl, manifest.json, sql/)",
    "run": "fused and scored 4 parents of 2 queries into {out}/ (fused.parquet, "
    "parent_features.parquet, parents.parquet, queries.parquet, contract.jsonl, manifest.json, "
    "sql/)",
    "answers": "scored 3 answers into {out}/ "
    "(answers.parquet, contract.jsonl, manifest.json, sql/)",
    "bids": "scored 4 supplier evaluations into {out}/ (contract.jsonl, evaluations.parquet, "
    "criteria.parquet, candidates.parquet, evidence.parquet, gates.json, and 8 more)",
}
# the second line of `score` and `run`: their decisions, by the numbers above.
# score, overall_v1 (per-query P10/P90, so of two parents the larger is 1 and the smaller 0, and a
# lone parent is 0): q1's P123 has strength 1, coverage 0.5·1 + 0.5·0.5, stability
# 0.5·(0.5 + 0.5·1), so 1^0.5 · 0.75^0.3 · 0.5^0.2 = 0.7986 >= T_high 0.68, and P456 strength 0,
# so 0 and ratio 0; q2's lone P789 strength 0, so 0: low, no second parent, web fallback.
# run, canonical_rrf then overall_v3 (0.7 strength, 0.3 separation): in q1 A and B are ranks 1
# and 2 in one source and 2 and 1 in the other, so parent_rrf 1/61 + 1/62 = 0.0325 each, by
# overall_v3's stored bounds (0.0297, 0.0492) 0.1437, and 0.1437^0.7 · 1^0.3 = 0.257 < T_low;
# their separations 0.5 + 0.5·(12 − 9.5)/12/2 and 0.5 + 0.5·(0.79 − 0.65)/0.79/2 give a top-2
# ratio (0.5443/0.5521)^0.3 = 0.996: HITL. In q2 A and C are each first in one source, 1/61 is
# below the bounds, so both 0: low, no ratio, web fallback.
DECISIONS = {
    "score": "2 queries: high 1, medium 0, low 1 (by best score: T_low 0.35, T_high 0.68); "
    "need_hitl 0 (top-2 ratio >= R_hitl 0.92); web_fallback 1 (low without HITL, or no candidate)",
    "run": "2 queries: high 0, medium 0, low 2 (by best score: T_low 0.8202, T_high 0.8544); "
    "need_hitl 1 (top-2 ratio >= R_hitl 0.9668); web_fallback 1 (low without HITL, or no "
    "candidate)",
}


@pytest.mark.parametrize("name", list(SUCCESS))
def test_success_prints_one_line_on_stderr(name: str, tmp_path: Path) -> None:
    result = invoke(*command(name, tmp_path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()  # bids adds its failed gates (tests/bids/test_bids.py)
    assert len(lines) == (2 if name in ("bids", *DECISIONS) else 1), result.stderr
    first = lines[0]
    if name in DECISIONS:
        assert lines[1] == "duckscore: " + DECISIONS[name]
    assert first == "duckscore: " + SUCCESS[name].format(out=tmp_path / "out")
    for file in first.split("(", 1)[1].rstrip(")").split(", ")[:-1]:
        assert (tmp_path / "out" / file).exists(), file


@pytest.mark.parametrize("quiet", ["-q", "--quiet", "--no-progress"])
@pytest.mark.parametrize("name", ["fuse", "score", "run", "answers"])
def test_quiet_silences_the_success_line(name: str, quiet: str, tmp_path: Path) -> None:
    result = invoke(quiet, *command(name, tmp_path))
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize(
    "args",
    [
        ["fuse", "--log", str(FIXTURES / "scifact" / "retrieval_log.parquet")],
        ["run", "--log", str(FIXTURES / "scifact" / "retrieval_log.parquet"), "--set", "alpha=0.7"],
        ["sql", "fuse"],
        [
            "calibrate",
            *("--log", str(FIXTURES / "scifact" / "retrieval_log.parquet")),
            *("--labels", "labels.parquet"),
        ],
    ],
    ids=["fuse", "run", "sql fuse", "calibrate"],
)
def test_a_set_recipe_typo_names_set_recipe(args: list[str], tmp_path: Path) -> None:
    out = ["--out", str(tmp_path / ("out.yaml" if args[0] == "calibrate" else "out"))]
    result = invoke("-q", *args, "--set-recipe", "fusion.kk=3", *(out if args[0] != "sql" else []))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == (
        "duckscore: error: --set-recipe fusion.kk: unknown key 'fusion.kk' "
        "(did you mean 'fusion.k'?)\n"
    )
    assert not list(tmp_path.iterdir())


# -- one rule: data on stdout, messages on stderr -------------------------------------------------

INSTINCTS = """\
id,trigger_text,action_text,domain,user_id
11111111-1111-4111-8111-111111111111,editing a SQL template,run the sqlglot check,sql,aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa
22222222-2222-4222-8222-222222222222,a test fails on CI only,compare the threads,testing,aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa
"""
EVENTS = """\
event_id,instinct_id,event_type,occurred_at
e01,11111111-1111-4111-8111-111111111111,pattern_observed_again,2026-03-02 09:00:00
e02,11111111-1111-4111-8111-111111111111,applied_successfully,2026-03-02 10:00:00
e03,22222222-2222-4222-8222-222222222222,applied_failed,2026-03-02 12:00:00
"""
MACROS = (
    "ds_policy, ds_rrf, ds_log_scale, ds_clamp, ds_quantile_norm, ds_weighted_geomean, "
    "ds_band_points, ds_rank_desc, ds_wilson_lower, ds_wilson_upper, ds_fuse, ds_parent_features, "
    "ds_score, ds_queries, ds_eval, ds_labels, ds_answers, ds_answers_with_events"
)


def store(tmp_path: Path, *, ingested: bool = True) -> str:
    """A store in tmp_path: created, and (ingested) holding two instincts and three events."""
    db = str(tmp_path / "store.duckdb")
    assert invoke("-q", "instincts", "init", "--db", db).exit_code == 0
    if ingested:
        (tmp_path / "instincts.csv").write_text(INSTINCTS, encoding="utf-8")
        (tmp_path / "events.csv").write_text(EVENTS, encoding="utf-8")
        done = invoke("-q", "instincts", "ingest", "--db", db, "--now", "2026-03-05",
                      "--instincts", str(tmp_path / "instincts.csv"),
                      "--events", str(tmp_path / "events.csv"))  # fmt: skip
        assert done.exit_code == 0, done.stderr
    return db


def storage_version(db: Path) -> str:
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(
            "SELECT tags['storage_version'] FROM duckdb_databases() WHERE NOT internal"
        ).fetchone()
    assert row is not None and row[0]
    return str(row[0]).rstrip("+")


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """`duckscore run` on a slice of SciFact as OpenInference spans: the folder, its traces."""
    from ..fuse.test_traces import scifact_slice, spans_of

    log = scifact_slice()
    folder = tmp_path_factory.mktemp("traced")
    spans_of(log).to_parquet(folder / "spans.parquet", index=False)
    done = invoke("-q", "run", "--log", str(folder / "spans.parquet"),
                  "--log-format", "openinference", "--out", str(folder / "scored"))  # fmt: skip
    assert done.exit_code == 0, done.stderr
    return folder / "scored", log["query_id"].nunique()


# name: (the arguments of a successful run in tmp_path, the lines it says on stderr, after
# `duckscore: `); each may set up what it needs first (quietly)
Case = Callable[[Path, pytest.FixtureRequest], tuple[list[str], list[str]]]


def _init(tmp_path: Path, _: pytest.FixtureRequest) -> tuple[list[str], list[str]]:
    db = tmp_path / "new.duckdb"
    return ["instincts", "init", "--db", str(db)], [f"{db}: created"]


def _init_again(tmp_path: Path, _: pytest.FixtureRequest) -> tuple[list[str], list[str]]:
    db = store(tmp_path, ingested=False)
    return ["instincts", "init", "--db", db], [f"{db}: up to date"]


def _ingest(tmp_path: Path, _: pytest.FixtureRequest) -> tuple[list[str], list[str]]:
    db = store(tmp_path, ingested=False)
    (tmp_path / "instincts.csv").write_text(INSTINCTS, encoding="utf-8")
    (tmp_path / "events.csv").write_text(EVENTS, encoding="utf-8")
    args = ["instincts", "ingest", "--db", db, "--now", "2026-03-05",
            "--instincts", str(tmp_path / "instincts.csv"), "--events", str(tmp_path / "events.csv")]  # fmt: skip
    return args, ["2 instincts added, 3 events applied, 0 events skipped"]


def _recompute(tmp_path: Path, _: pytest.FixtureRequest) -> tuple[list[str], list[str]]:
    db = store(tmp_path)
    return ["instincts", "recompute", "--db", db, "--now", "2026-03-05"], [
        "2 of 2 instincts changed"
    ]


def _decay(tmp_path: Path, _: pytest.FixtureRequest) -> tuple[list[str], list[str]]:
    db = store(tmp_path)
    return ["instincts", "decay", "--db", db, "--now", "2026-03-20"], [
        "Decay job complete: 2 decayed, 0 deprecated, 0 deleted"
    ]


def _decay_again(tmp_path: Path, _: pytest.FixtureRequest) -> tuple[list[str], list[str]]:
    db = store(tmp_path)
    assert invoke("-q", "instincts", "decay", "--db", db, "--now", "2026-03-20").exit_code == 0
    return ["instincts", "decay", "--db", db, "--now", "2026-03-21"], [
        "Decay job already ran for the week of 2026-03-16: nothing changed"
    ]


def _report(tmp_path: Path, _: pytest.FixtureRequest) -> tuple[list[str], list[str]]:
    db, out = store(tmp_path), tmp_path / "dashboard"
    return ["instincts", "report", "--db", db, "--out", str(out)], [
        f"wrote the dashboard of 2 instincts into {out}/ "
        "(report.html, report.json, radar.png, trends.png)"
    ]


def _install(tmp_path: Path, _: pytest.FixtureRequest) -> tuple[list[str], list[str]]:
    db = tmp_path / "analysis.duckdb"
    # the version line names the storage version of the file the command writes: read after
    return ["macros", "install", "--db", str(db)], [
        f"installed 18 macros into {db}: {MACROS}",
        f"{db} opens with DuckDB {{version}} or later (its storage version)",
    ]


def _annotations(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[list[str], list[str]]:
    scored, traces = request.getfixturevalue("traced")
    out = tmp_path / "annotations.json"
    return ["export", "annotations", "--scored", str(scored), "--out", str(out)], [
        f"wrote {4 * traces} phoenix annotations of {traces} traces to {out}"
    ]


MESSAGES: dict[str, Case] = {
    "instincts init": _init,
    "instincts init (again)": _init_again,
    "instincts ingest": _ingest,
    "instincts recompute": _recompute,
    "instincts decay": _decay,
    "instincts decay (again)": _decay_again,
    "instincts report": _report,
    "macros install": _install,
    "export annotations": _annotations,
}  # `instincts migrate` needs PostgreSQL: tests/instincts/test_postgres.py


@pytest.mark.parametrize("name", list(MESSAGES))
def test_a_message_goes_to_stderr_and_stdout_stays_empty(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    args, said = MESSAGES[name](tmp_path, request)
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    if name == "macros install":
        said = [line.replace("{version}", storage_version(Path(args[-1]))) for line in said]
    assert result.stderr.splitlines() == [f"duckscore: {line}" for line in said]


@pytest.mark.parametrize("quiet", ["-q", "--quiet", "--no-progress"])
@pytest.mark.parametrize("name", list(MESSAGES))
def test_quiet_silences_a_message(
    name: str, quiet: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    args, _ = MESSAGES[name](tmp_path, request)
    result = invoke(quiet, *args)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", ""), result.output


JUDGED = [
    *("--run", str(SCIFACT / "reference_rrf_k60.parquet")),
    *("--qrels", str(SCIFACT / "qrels.parquet")),
]
DATA: dict[str, Callable[[Path], list[str]]] = {
    "sql fuse": lambda _: ["sql", "fuse"],
    "sql macros": lambda _: ["sql", "macros"],
    "policy list": lambda _: ["policy", "list"],
    "policy show": lambda _: ["policy", "show", "overall_v1"],
    "filter check": lambda _: ["filter", "check", "bid_price < 100"],
    "instincts top": lambda tmp_path: ["instincts", "top", "--db", store(tmp_path)],
    "eval": lambda _: ["eval", *JUDGED, "--json"],
    "labels": lambda tmp_path: ["labels", *JUDGED, "--out", str(tmp_path / "labels.parquet")],
    # its summary, which ends with where the outputs are
    "demo bids": lambda tmp_path: ["demo", "bids", "--out", str(tmp_path / "demo")],
    "demo code": lambda tmp_path: ["demo", "code", "--out", str(tmp_path / "demo")],
}


@pytest.mark.parametrize("name", list(DATA))
def test_data_goes_to_stdout_and_quiet_keeps_it(name: str, tmp_path: Path) -> None:
    args = DATA[name](tmp_path)
    loud, quiet = invoke(*args), invoke("-q", *args)
    assert (loud.exit_code, quiet.exit_code) == (0, 0), loud.output
    assert loud.stdout.strip() and loud.stderr == ""
    assert (quiet.stdout, quiet.stderr) == (loud.stdout, "")
    if name == "policy show":
        assert re.match(r"^\{.*\}$", loud.stdout.strip(), re.S)
