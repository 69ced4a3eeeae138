"""`duckscore bids` through the CLI: outputs, contract schema, determinism, strict gates, bad
input (one line, exit 2, nothing written) and tenant isolation on a small two-tenant folder. Values
of the bundled tender are checked by hand in test_tender.py and against the plain-Python
reference in test_reference.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
from click.testing import CliRunner

from duckscore.cli import cli
from duckscore.core.resources import contract_schema

from ..helpers import documented_keys

SMALL = {
    "bid_fields.csv": """\
tenant_id,project_id,supplier_id,chunk_id,supplier_code,qualification_level,registered_capital,bid_price,delivery_period,warranty_period
t1,p1,sa,k3,SA001,A,8000000,4500000,30,36
t1,p1,sb,k4,SB001,C,9000000,4000000,45,24
t2,p9,sx,k1,SX,A,1,1,1,1
""",
    "chunks.csv": """\
tenant_id,chunk_id,project_id,supplier_id,doc_id,doc_type,page,bbox_x0,bbox_y0,bbox_x1,bbox_y1,tokens,text,confidence,rule_scope
t1,k1,p1,sa,d1,tech,1,0,0,100,100,1000,a tech,0.9,
t1,k2,p1,sa,d1,tech,2,0,0,100,100,3000,b tech,1,
t1,k3,p1,sa,d2,commercial,1,0,0,100,100,500,price,1,C_P
t1,k4,p1,sb,d3,tech,1,0,0,100,100,500,sb tech,1,
t1,k5,p1,,d0,tender,1,0,0,100,100,500,tender,1,
t2,k1,p9,sx,d9,tech,1,0,0,100,100,500,SECRET OTHER TENANT,1,
t2,k9,p9,sx,d9,tech,1,0,0,100,100,500,SECRET2,1,
""",
    "claim_citations.csv": """\
claim_id,chunk_id,page,bbox_x0,bbox_y0,bbox_x1,bbox_y1
cl1,k1,1,10,10,20,20
cl2,k9,1,10,10,20,20
""",
    "claims.csv": """\
claim_id,evaluation_id,supplier_id,criteria_id,claim_text
cl1,ev1,sa,C_T,uses x
cl2,ev1,sb,C_T,uses y
""",
    "criteria.csv": """\
tenant_id,project_id,criteria_id,name,weight,max_score,method
t1,p1,C_Q,qualification,0,100,redline
t1,p1,C_P,price,0.5,100,formula
t1,p1,C_T,technical,0.5,100,llm
t2,p9,C_T,technical,1,100,llm
""",
    "evaluations.csv": """\
evaluation_id,supplier_id,tenant_id,project_id,trace_id,force_review,scoring_ms
ev1,sa,t1,p1,tr1,0,50000
ev1,sb,t1,p1,tr2,1,70000
ev9,sx,t2,p9,tr9,0,10
""",
    "hits.csv": """\
query_id,chunk_id,score_raw,rank
q1,k1,0.9,1
q1,k2,0.8,2
q1,k4,0.7,3
q1,k9,0.99,4
q1,k5,0.2,25
q2,k4,0.6,1
q2,k5,0.5,2
q3,k3,0.7,1
q9,k1,0.5,1
""",
    "queries.csv": """\
query_id,tenant_id,project_id,evaluation_id,supplier_id,criteria_id,query_text,query_type,high_risk,doc_scope,sql_condition,retrieval_ms
q1,t1,p1,ev1,sa,C_T,"ＳＵＰＰＬＩＥＲ  技术方案 对比  1,200万 2026年2月1日",,0,,,1200
q2,t1,p1,ev1,sb,C_T,what is the price,,1,"tech, commercial",bid_price < 5000000,900
q3,t1,p1,ev1,sa,C_P,报价 风险,fact,0,,bid_price <= 5000000,
q9,t2,p9,ev9,sx,C_T,other,,0,,,
""",
    "rerank.csv": """\
query_id,chunk_id,status,score_rerank,reason
q1,k1,ok,0.95,good
q1,k2,timeout,,
q2,k4,ok,0.4,meh
q3,k3,error,,
""",
    "rules.yaml": """\
rules:
  - id: R1
    criteria_id: C_Q
    kind: redline
    when: "qualification_level IN ('A', 'B') AND registered_capital >= 5000000"
    reason: qualification
  - id: F1
    criteria_id: C_P
    kind: formula
    score: "100 * min(bid_price) / bid_price"
    reason: lowest price over price
""",
    "soft_scores.csv": """\
evaluation_id,supplier_id,criteria_id,run_id,score,redline_pass,reason
ev1,sa,C_T,r1,80,,fine
ev1,sa,C_T,r2,90,,fine2
ev1,sb,C_T,r1,60,,ok
ev1,sb,C_Q,r1,0,1,llm thinks pass
""",
    "synonyms.csv": """\
tenant_id,project_id,term,canonical
t1,p1,技术方案,technical proposal
t1,p1,supplier,vendor
""",
}

SCHEMA = json.loads(contract_schema("bids").read_text())
OUTPUTS = {
    "queries.parquet",
    "filter_log.parquet",
    "candidates.parquet",
    "degradation_events.parquet",
    "evidence.parquet",
    "rules.parquet",
    "criteria.parquet",
    "consistency.parquet",
    "claims.parquet",
    "evaluations.parquet",
    "contract.jsonl",
    "gates.json",
    "manifest.json",
    "sql",
}


def small_input(folder: Path, **changes: str | None) -> Path:
    """The two-tenant folder above; a change replaces a file's text (None removes the file)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in {**SMALL, **{k.replace("__", "."): v for k, v in changes.items()}}.items():
        if text is not None:
            (folder / name).write_text(text, encoding="utf-8")
    return folder


def evaluate(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["bids", *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def table(out: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(out / f"{name}.parquet")


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("small")
    out = base / "out"
    code, _, err = evaluate("--input", str(small_input(base / "in")), "--out", str(out))
    assert code == 0, err
    return out


def test_writes_every_output_and_a_valid_contract(small_run: Path) -> None:
    assert {p.name for p in small_run.iterdir()} == OUTPUTS
    lines = [json.loads(line) for line in (small_run / "contract.jsonl").read_text().splitlines()]
    assert [(o["evaluation_id"], o["supplier_id"]) for o in lines] == [
        ("ev1", "sa"),
        ("ev1", "sb"),
        ("ev9", "sx"),
    ]
    validator = jsonschema.Draft202012Validator(SCHEMA)
    for line in lines:
        assert not list(validator.iter_errors(line))
    manifest = json.loads((small_run / "manifest.json").read_text())
    assert manifest["policy"]["bid_policy_version"] == "bid_v1"
    assert [r["id"] for r in manifest["rules"]["rules"]] == ["R1", "F1"]


def test_small_folder_by_hand(small_run: Path) -> None:
    queries = table(small_run, "queries").set_index("query_id")
    # full width folded, lower case, 1,200万 -> 12000000, the date to ISO, synonyms in one pass
    assert queries.at["q1", "query_norm"] == "supplier 技术方案 对比 12000000 2026-02-01"
    assert (
        queries.at["q1", "rewritten_query"] == "vendor technical proposal 对比 12000000 2026-02-01"
    )
    assert list(queries.at["q1", "numeric_constraints"]) == ["12000000"]
    assert list(queries.at["q1", "time_constraints"]) == ["2026-02-01"]
    assert queries.at["q1", "mode"] == "hybrid"  # 对比 -> comparison -> hybrid
    assert queries.at["q2", "mode"] == "mix"  # high risk
    assert (
        queries.at["q3", "query_type"] == "fact" and queries.at["q3", "mode"] == "local"
    )  # given type wins
    assert queries.at["q9", "mode"] == "hybrid"  # unclassified
    dropped = table(small_run, "filter_log")
    assert sorted(map(tuple, dropped[["query_id", "chunk_id", "dropped_by"]].values)) == [
        ("q1", "k4", "supplier_scope"),
        ("q1", "k5", "chunk_top_k"),
        ("q1", "k9", "tenant_id"),
        ("q2", "k5", "doc_scope"),
    ]
    candidates = table(small_run, "candidates").set_index(["query_id", "chunk_id"])
    assert list(candidates.at[("q2", "k4"), "sources"]) == [
        "lightrag",
        "sql",
    ]  # bid_price < 5000000
    assert candidates.at[("q2", "k4"), "score_raw"] == 1.0  # max of 0.6 and the SQL branch's 1.0
    assert candidates.at[("q1", "k2"), "degraded_cause"] == "timeout"
    assert candidates.at[("q1", "k2"), "score_rerank"] == 0.8  # fell back to score_raw
    criteria = table(small_run, "criteria").set_index(["supplier_id", "criteria_id"])
    # sa technical: runs 80, 90 -> 85; packed k1 (0.95), k2 (0.8): quality 0.875; agreement over
    # the one reranked candidate 1.0; stability 1 - 10/100 = 0.9
    assert criteria.at[("sa", "C_T"), "score"] == 85
    assert criteria.at[("sa", "C_T"), "confidence"] == pytest.approx(
        0.4 * 0.875 + 0.3 * 1.0 + 0.3 * 0.9
    )
    # price: min over qualified suppliers (sa only; sb fails the redline) 4.5M; sb 112.5 -> 100
    assert criteria.at[("sa", "C_P"), "score"] == 100 and criteria.at[("sb", "C_P"), "score"] == 100
    assert criteria.at[("sb", "C_Q"), "hard_pass"] == False  # noqa: E712 (numpy bool)
    assert criteria.at[("sb", "C_Q"), "redline_conflict"] == True  # noqa: E712 the LLM said pass
    evaluations = table(small_run, "evaluations").set_index("supplier_id")
    assert evaluations.at["sa", "total_score"] == pytest.approx(0.5 * 100 + 0.5 * 85)
    assert evaluations.at["sa", "score_deviation_pct"] == pytest.approx(100 * (95 - 90) / 92.5)
    assert evaluations.at["sb", "recommendation_status"] == "blocked"  # cl2 cites the other tenant
    assert list(evaluations.at["sb", "hitl_reasons"]) == [
        "low_confidence",
        "low_citation_coverage",
        "redline_conflict",
        "forced_review",
    ]
    assert evaluations.at["sb", "risk_level"] == "high"
    written = json.loads((small_run / "gates.json").read_text())
    assert list(written) == documented_keys("docs/bids.md", "The file holds")
    gates = {g["name"]: g for g in written["gates"]}
    # a gate's keys as docs/bids.md lists them; `why` for a gate not computed only
    assert list(gates["retrieval_p95_ms"]) == ["name", "value", "threshold", "comparison", "status"]
    assert list(gates["faithfulness"])[-2:] == ["status", "why"]
    assert (
        gates["citation_resolution_rate"]["value"] == 0.5
        and gates["citation_resolution_rate"]["status"] == "fail"
    )
    assert (
        gates["retrieval_p95_ms"]["value"] == 1200 and gates["retrieval_p95_ms"]["status"] == "pass"
    )
    assert gates["faithfulness"]["status"] == "not_computed"


def test_no_row_of_the_other_tenant_reaches_tenant_t1(small_run: Path) -> None:
    secrets = ("SECRET", "t2", "p9", "sx", "d9")
    for path in small_run.glob("*.parquet"):
        frame = pd.read_parquet(path)
        if "tenant_id" in frame:
            frame = frame[frame["tenant_id"] == "t1"]
        elif "evaluation_id" in frame:
            frame = frame[frame["evaluation_id"] == "ev1"]
        else:
            frame = frame[frame["query_id"].isin(["q1", "q2", "q3"])]
        text = frame.astype(str).to_string()
        assert not any(s in text for s in secrets), path.name
    t1_candidates = table(small_run, "candidates").query("tenant_id == 't1'")
    assert "SECRET" not in t1_candidates.to_string()
    assert set(t1_candidates["doc_id"]) <= {"d1", "d2", "d3", "d0"}  # k1 of t2 is d9: never joined


def test_same_bytes_twice(tmp_path: Path) -> None:
    folder = small_input(tmp_path / "in")
    for run in ("a", "b"):
        assert evaluate("--input", str(folder), "--out", str(tmp_path / run))[0] == 0
    for name in OUTPUTS - {"manifest.json", "sql"}:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def failed_gates_line(out: Path) -> str:
    return (
        "duckscore: gates failed: citation_resolution_rate 0.5 (needs >= 0.98), "
        "unsupported_claim_rate 0.5 (needs <= 0.05), rerank_degradation_ratio 0.6 (needs <= 0.2) "
        f"(see {out}/gates.json)"
    )


def test_strict_gates_exit_1_after_writing(tmp_path: Path) -> None:
    code, _, err = evaluate(
        "--input",
        str(small_input(tmp_path / "in")),
        "--out",
        str(tmp_path / "out"),
        "--strict-gates",
    )
    assert code == 1 and err.splitlines()[-1] == failed_gates_line(tmp_path / "out")
    assert (tmp_path / "out" / "gates.json").is_file()


@pytest.mark.parametrize("quiet", [[], ["-q"]])
def test_failed_gates_are_named_without_strict_gates(tmp_path: Path, quiet: list[str]) -> None:
    # the run exited 0 without a word about its three failed gates
    folder, out = small_input(tmp_path / "in"), tmp_path / "out"
    result = CliRunner().invoke(cli, [*quiet, "bids", "--input", str(folder), "--out", str(out)])
    assert (result.exit_code, result.stdout) == (0, "")
    lines = result.stderr.splitlines()
    assert lines[-1] == failed_gates_line(out)  # a warning: -q does not silence it
    assert len(lines) == (1 if quiet else 2), result.stderr
    gates = json.loads((out / "gates.json").read_text())["gates"]
    failed = [g["name"] for g in gates if g["status"] == "fail"]
    assert {"citation_resolution_rate", "rerank_degradation_ratio"} <= set(failed)


def test_passing_gates_print_no_gate_line(tmp_path: Path) -> None:
    loose = [
        "gates.citation_resolution_rate=0",
        "gates.unsupported_claim_rate=1",
        "gates.rerank_degradation_ratio=1",
    ]
    code, out, err = evaluate(
        "--input",
        str(small_input(tmp_path / "in")),
        "--out",
        str(tmp_path / "out"),
        "--strict-gates",
        *(option for item in loose for option in ("--set", item)),
    )
    assert (code, out) == (0, "")
    assert "gates failed" not in err and err.startswith("duckscore: scored 3 supplier evaluations")


def test_optional_tables_may_be_absent(tmp_path: Path) -> None:
    evaluations = (
        "\n".join(line.rsplit(",", 1)[0] for line in SMALL["evaluations.csv"].splitlines()) + "\n"
    )
    folder = small_input(
        tmp_path / "in",
        rerank__csv=None,
        soft_scores__csv=None,
        claims__csv=None,
        claim_citations__csv=None,
        synonyms__csv=None,
        evaluations__csv=evaluations,
    )
    code, _, err = evaluate("--input", str(folder), "--out", str(tmp_path / "out"))
    assert code == 0, err
    gates = {
        g["name"]: g["status"]
        for g in json.loads((tmp_path / "out" / "gates.json").read_text())["gates"]
    }
    assert gates["scoring_p95_ms"] == "no_data" and gates["citation_resolution_rate"] == "no_data"
    candidates = table(tmp_path / "out", "candidates")
    assert set(candidates["degraded_cause"]) == {"missing"}  # no rerank at all: every one degraded
    assert (table(tmp_path / "out", "evaluations")["citation_coverage"] == 1.0).all()


BAD = [
    ({"queries__csv": None}, r"no queries table"),
    (
        {"evaluations__csv": SMALL["evaluations.csv"] + "ev1,sz,t2,p9,tr,0,1\n"},
        r"evaluations table \(.*row 1, evaluation_id='ev1', supplier_id='sa'\): evaluation_id 'ev1' belongs to more than one \(tenant_id, project_id\)",
    ),
    (
        {"hits__csv": SMALL["hits.csv"] + "ghost,k1,0.5,1\n"},
        r"hits table \(.*hits.csv, row 10.*query_id 'ghost' is not in",
    ),
    ({"hits__csv": SMALL["hits.csv"] + "q2,k1,1.5,3\n"}, r"column 'score_raw' is above 1"),
    (
        {"queries__csv": SMALL["queries.csv"].replace("q9,t2,p9", "q9,t1,p9")},
        r"queries table \(.*row 4, query_id='q9'\): \(evaluation_id, supplier_id, tenant_id, project_id\) is not",
    ),
    (
        {"queries__csv": SMALL["queries.csv"].replace("bid_price < 5000000", "tenant_id = 't2'")},
        r"query_id='q2'\), column 'sql_condition': condition \"tenant_id = 't2'\": 'tenant_id' is not a whitelisted field",
    ),
    (
        {
            "queries__csv": SMALL["queries.csv"].replace(
                "bid_price < 5000000", "bid_price < 5; DROP TABLE chunks"
            )
        },
        r"only one expression is allowed",
    ),
    (
        {"soft_scores__csv": SMALL["soft_scores.csv"] + "ev1,sa,C_T,r3,101,,x\n"},
        r"score '101.0' is above the criterion's max_score",
    ),
    (
        {"soft_scores__csv": SMALL["soft_scores.csv"] + "ev1,sa,C_X,r3,1,,x\n"},
        r"is not a criterion of an evaluations row",
    ),
    (
        {"claim_citations__csv": SMALL["claim_citations.csv"] + "nobody,k1,1,1,1,2,2\n"},
        r"claim_id 'nobody' is not in claims table",
    ),
    (
        {"rerank__csv": SMALL["rerank.csv"] + "q1,k5,maybe,0.5,\n"},
        r"column 'status' is not one of ok, timeout, error",
    ),
    (
        {
            "rules__yaml": "rules:\n  - {id: R1, criteria_id: C_Q, kind: redline, when: \"lower(supplier_code) = 'a'\"}\n"
        },
        r"rule 1 \(R1\): condition .*function lower\(\) is not allowed",
    ),
    (
        {
            "rules__yaml": "rules:\n  - {id: R1, criteria_id: C_Q, kind: formula, score: bid_price}\n"
        },
        r"a formula rule for criterion 'C_Q', whose method is redline",
    ),
    (
        {"rules__yaml": "rules: []\n"},
        r"criterion 'C_P' has method formula and needs exactly one rule",
    ),
    (
        {"rules__yaml": "rules:\n  - {id: R1, criteria_id: C_Q, kind: redline}\n"},
        r"missing key 'when'",
    ),
    ({"synonyms__csv": SMALL["synonyms.csv"] + "t1,p1,a\\Eb,x\n"}, r"contains \\E"),
    # terms that normalise alike ('Supplier ' and full-width 'ＳＵＰＰＬＩＥＲ' are 'supplier') must
    # agree on their canonical form ('VENDOR ' is 'vendor': no conflict); DuckDB's map failed
    (
        {
            "synonyms__csv": SMALL["synonyms.csv"]
            + "t1,p1,Supplier ,VENDOR \nt1,p1,ＳＵＰＰＬＩＥＲ,seller\n"
        },
        r"^duckscore: error: synonyms table \(.*synonyms\.csv, row 4, tenant_id='t1', "
        r"project_id='p1', term='ＳＵＰＰＬＩＥＲ'\): term 'ＳＵＰＰＬＩＥＲ' normalises to 'supplier', "
        r"as term 'supplier' does \(row 2\), but is rewritten to 'seller', not 'vendor'$",
    ),
    (
        {"chunks__csv": SMALL["chunks.csv"] + "t1,k1,p1,sa,d1,tech,1,0,0,1,1,1,dup,1,\n"},
        r"duplicate \(tenant_id, chunk_id\)",
    ),
    # finite weights whose products overflow: contract.jsonl held "total_score":Infinity (no JSON)
    (
        {
            "criteria__csv": SMALL["criteria.csv"].replace(
                "C_T,technical,0.5,", "C_T,technical,1e308,"
            )
        },
        r"^duckscore: error: consistency.parquet \(evaluation_id='ev1', supplier_id='sa', "
        r"run_id='r1'\): run_total is inf: the inputs' numbers overflow a double "
        r"\(criteria weights, max_score, scores or a formula's fields too large\)$",
    ),
    # a misspelt optional table was ignored: totals changed and everyone went to review, exit 0
    (
        {"rerank__csv": None, "reranks__csv": SMALL["rerank.csv"]},
        r"reranks.csv is no table of the folder \(did you mean rerank.csv\? tables: ",
    ),
]


@pytest.mark.parametrize("changes, message", BAD, ids=[m[:40] for _, m in BAD])
def test_bad_input_is_one_line_and_writes_nothing(
    tmp_path: Path, changes: dict, message: str
) -> None:
    folder = small_input(tmp_path / "in", **changes)
    code, _out, err = evaluate("--input", str(folder), "--out", str(tmp_path / "out"))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("duckscore: error: "), err
    assert __import__("re").search(message, err), err
    assert not (tmp_path / "out").exists()


def test_terms_that_normalise_alike_to_one_canonical_form_are_one_entry(
    tmp_path: Path, small_run: Path
) -> None:
    """'Supplier ' and full-width 'ＳＵＰＰＬＩＥＲ' normalise to 'supplier' and their canonical forms
    to 'vendor', as the folder's own entry does: the outputs are those of the folder without them."""
    alike = SMALL["synonyms.csv"] + "t1,p1,Supplier ,VENDOR \nt1,p1,ＳＵＰＰＬＩＥＲ,Ｖendor\n"
    folder = small_input(tmp_path / "in", synonyms__csv=alike)
    code, _, err = evaluate("--input", str(folder), "--out", str(tmp_path / "out"))
    assert code == 0, err
    for name in ("queries", "candidates", "evaluations"):
        pd.testing.assert_frame_equal(table(tmp_path / "out", name), table(small_run, name))


def test_terms_split_over_two_files_name_the_first_file(tmp_path: Path) -> None:
    folder = small_input(tmp_path / "in", synonyms__csv=None)
    (folder / "synonyms").mkdir()
    (folder / "synonyms" / "a.csv").write_text(SMALL["synonyms.csv"], encoding="utf-8")
    (folder / "synonyms" / "b.csv").write_text(
        "tenant_id,project_id,term,canonical\nt1,p1,SUPPLIER,seller\n", encoding="utf-8"
    )
    code, _, err = evaluate("--input", str(folder), "--out", str(tmp_path / "out"))
    assert code == 2 and not (tmp_path / "out").exists()
    assert err.endswith(
        "b.csv, row 1, tenant_id='t1', project_id='p1', term='SUPPLIER'): term 'SUPPLIER' "
        f"normalises to 'supplier', as term 'supplier' does ({folder / 'synonyms' / 'a.csv'}, "
        "row 2), but is rewritten to 'seller', not 'vendor'\n"
    ), err


def test_a_failed_run_leaves_the_previous_outputs(tmp_path: Path, small_run: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(small_run, out)
    before = (out / "contract.jsonl").read_bytes()
    folder = small_input(
        tmp_path / "in", hits__csv="query_id,chunk_id,score_raw,rank\nq1,k1,nan,1\n"
    )
    assert evaluate("--input", str(folder), "--out", str(out))[0] == 2
    assert (out / "contract.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    "expression, code, first_line",
    [
        (
            "bid_price <= 5000000 AND qualification_level IN ('A', 'B')",
            0,
            "normalized: bid_price <= 5000000 AND qualification_level IN ('A', 'B')",
        ),
        (
            "tenant_id = 't2'",
            2,
            "duckscore: error: condition \"tenant_id = 't2'\": 'tenant_id' is not a whitelisted field",
        ),
    ],
)
def test_filter_check(expression: str, code: int, first_line: str) -> None:
    result = CliRunner().invoke(cli, ["filter", "check", expression])
    assert result.exit_code == code
    assert (result.stdout or result.stderr).splitlines()[0].startswith(first_line)


def test_policy_list_and_show_evaluate() -> None:
    listed = CliRunner().invoke(cli, ["policy", "list", "bids"])
    assert listed.exit_code == 0 and "bid_v1" in listed.stdout
    shown = CliRunner().invoke(
        cli,
        ["policy", "show", "bid_v1", "--capability", "bids", "--set", "hitl.min_confidence=0.7"],
    )
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["parameters"]["hitl"]["min_confidence"] == 0.7


def test_a_policy_override_moves_a_trigger(tmp_path: Path) -> None:
    folder = small_input(tmp_path / "in")
    code, _, err = evaluate(
        "--input", str(folder), "--out", str(tmp_path / "out"), "--set", "hitl.min_confidence=0.2"
    )
    assert code == 0, err
    evaluations = table(tmp_path / "out", "evaluations").set_index("supplier_id")
    assert "low_confidence" not in list(evaluations.at["sx", "hitl_reasons"])  # 0.25 >= 0.2


def test_confidence_weights_must_sum_to_one(tmp_path: Path) -> None:
    # 0.9 each was accepted and the contract showed confidences of 2.47
    folder = small_input(tmp_path / "in")
    weights = [f"confidence.weights.{w}=0.9" for w in ("evidence_quality", "retrieval_agreement")]
    sets = [arg for w in weights for arg in ("--set", w)]
    code, _, err = evaluate("--input", str(folder), "--out", str(tmp_path / "out"), *sets)
    assert code == 2 and "confidence.weights must sum to 1, got 2.1" in err, err
    assert not (tmp_path / "out").exists()


def test_a_missing_field_is_missing_material_even_inside_greatest(tmp_path: Path) -> None:
    # DuckDB's greatest(0, NULL) is 0: compiled as it is, a supplier without a price would score
    # 100 - 0; the whitelist compiles least/greatest so that NULL stays NULL
    rules = SMALL["rules.yaml"].replace(
        '"100 * min(bid_price) / bid_price"', '"greatest(0, 100 - bid_price / 100000)"'
    )
    fields = SMALL["bid_fields.csv"].replace("SB001,C,9000000,4000000", "SB001,C,9000000,")
    folder = small_input(tmp_path / "in", rules__yaml=rules, bid_fields__csv=fields)
    code, _, err = evaluate("--input", str(folder), "--out", str(tmp_path / "out"))
    assert code == 0, err
    rules_out = table(tmp_path / "out", "rules").query("rule_id == 'F1'").set_index("supplier_id")
    assert rules_out.at["sa", "value"] == 55.0 and not rules_out.at["sa", "missing_material"]
    assert pd.isna(rules_out.at["sb", "value"]) and rules_out.at["sb", "missing_material"]
    criteria = table(tmp_path / "out", "criteria").set_index(["supplier_id", "criteria_id"])
    assert criteria.at[("sb", "C_P"), "score"] == 0 and not criteria.at[("sb", "C_P"), "hard_pass"]


def test_a_folder_without_gate_rules_is_scored(tmp_path: Path) -> None:
    """No redline or required rule (a formula alone, then no rules file at all): every bidder
    with bid fields qualifies. By hand: F1 = 100 · min(bid_price) / bid_price over t1/p1's sa
    (4,500,000) and sb (4,000,000) — sb is no longer vetoed by R1, so sa gets 100 · 4/4.5."""
    redline = SMALL["rules.yaml"].index("  - id: R1"), SMALL["rules.yaml"].index("  - id: F1")
    rules = SMALL["rules.yaml"][: redline[0]] + SMALL["rules.yaml"][redline[1] :]
    assert "R1" not in rules and "F1" in rules
    criteria = SMALL["criteria.csv"].replace("t1,p1,C_Q,qualification,0,100,redline\n", "")
    soft_scores = SMALL["soft_scores.csv"].replace("ev1,sb,C_Q,r1,0,1,", "ev1,sb,C_T,r2,70,1,")
    changes = {"criteria__csv": criteria, "soft_scores__csv": soft_scores}
    folder = small_input(tmp_path / "in", rules__yaml=rules, **changes)
    code, _, err = evaluate("--input", str(folder), "--out", str(tmp_path / "out"))
    assert code == 0, err
    values = table(tmp_path / "out", "rules").set_index("supplier_id").query("rule_id == 'F1'")
    assert values["value"].to_dict() == pytest.approx({"sa": 100 * 4 / 4.5, "sb": 100.0})
    changes["criteria__csv"] = criteria.replace("t1,p1,C_P,price,0.5,100,formula\n", "")
    for name in ("queries", "hits", "rerank"):  # q3 asks about the price criterion
        lines = SMALL[f"{name}.csv"].splitlines(keepends=True)
        changes[f"{name}__csv"] = "".join(line for line in lines if not line.startswith("q3,"))
    folder = small_input(tmp_path / "in2", rules__yaml=None, **changes)
    code, _, err = evaluate("--input", str(folder), "--out", str(tmp_path / "out2"))
    assert code == 0, err
    assert table(tmp_path / "out2", "rules").empty


def test_a_chunk_over_the_whole_budget_goes_last_and_blocks_nothing(tmp_path: Path) -> None:
    # k1 (the most relevant, 0.95) holds 7000 tokens: more than the criterion's 6000 on its own
    chunks = SMALL["chunks.csv"].replace(
        "t1,k1,p1,sa,d1,tech,1,0,0,100,100,1000,", "t1,k1,p1,sa,d1,tech,1,0,0,100,100,7000,"
    )
    folder = small_input(tmp_path / "in", chunks__csv=chunks)
    assert evaluate("--input", str(folder), "--out", str(tmp_path / "out"))[0] == 0
    evidence = table(tmp_path / "out", "evidence").query("query_id == 'q1'").set_index("chunk_id")
    assert sorted(evidence.index) == ["k1", "k2"]  # k4, k5 and k9 are filtered out
    assert evidence.at["k1", "oversize"] and not evidence.at["k1", "packed"]
    assert evidence.at["k1", "keep_order"] == 2 and evidence.at["k2", "keep_order"] == 1
    assert evidence.at["k2", "packed"]  # 3000 tokens fit once k1 no longer stands in front


def test_no_hits_at_all_and_unicode_ids(tmp_path: Path) -> None:
    hits = "query_id,chunk_id,score_raw,rank\n"
    renamed = {name: text.replace("sa", "供应商Ä") for name, text in SMALL.items()}
    folder = tmp_path / "in"
    folder.mkdir()
    for name, text in {**renamed, "hits.csv": hits}.items():
        (folder / name).write_text(text, encoding="utf-8")
    code, _, err = evaluate("--input", str(folder), "--out", str(tmp_path / "out"))
    assert code == 0, err
    candidates = table(tmp_path / "out", "candidates")
    assert list(candidates["sources"].map(list)) == [
        ["sql"],
        ["sql"],
    ]  # only the SQL branch found anything
    criteria = table(tmp_path / "out", "criteria").set_index(["supplier_id", "criteria_id"])
    assert criteria.at[("供应商Ä", "C_T"), "evidence_quality"] == 0.0
    assert (
        criteria.at[("供应商Ä", "C_T"), "retrieval_agreement"] == 0.5
    )  # nothing reranked: the policy's 0.5
