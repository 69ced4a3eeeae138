"""`duckscore evaluate`: seed 002's bid evaluation — tenant-safe retrieval, rules, scores, HITL.

The runner opens the tables of an --input folder, checks them and their references, compiles the
user's SQL-branch conditions and the rules file through the whitelist, renders the stages
(sql/evaluate/_eval_stages.sql) with those fragments, checks the SQL with sqlglot, runs it with the
literals bound as parameters, and writes every stage table, the contract and the gates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from . import contracts as c
from .answers import term_regex
from .engine import EngineSettings, connect
from .errors import DuckscoreError, InputError, PolicyError, WhitelistError
from .inputs import (FORMATS, OpenedInput, TableContract, check_references, check_rows,
                     create_empty_view, open_input, schema_of, typed_column)
from .manifest import build_manifest
from .outputs import atomic_output_dir, write_json
from .policy import Choice, Flag, ListOf, Number, Policy, PolicyKind, Text, Words, load_policy, load_yaml
from .progress import SILENT, Progress
from .render import RenderedSQL, ident, render
from .runner import copy_to, first_row, settings_record, write_sql
from .sqlcheck import check_sql
from .whitelist import FIELD_TYPES, Compiled, parse_condition, parse_formula

MODES = ("local", "global", "hybrid", "mix")
UNIT = Number(0.0, 1.0)
NUMERIC_FIELDS = tuple(f for f, kind in FIELD_TYPES.items() if kind == "number")
RULE_KINDS = ("redline", "required", "formula")
# §3.1: full-width ASCII (U+FF01…U+FF5E) and the ideographic space fold to their ASCII forms
FULL_WIDTH = "".join(chr(code) for code in range(0xFF01, 0xFF5F)) + "\u3000"
HALF_WIDTH = "".join(chr(code - 0xFEE0) for code in range(0xFF01, 0xFF5F)) + " "
DATE_PATTERN = (r"[0-9]{4}年[0-9]{1,2}月[0-9]{1,2}日|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
                r"|[0-9]{4}/[0-9]{1,2}/[0-9]{1,2}|[0-9]{4}\.[0-9]{1,2}\.[0-9]{1,2}")
NUMBER_PATTERN = r"[0-9]+(?:,[0-9]{3})*(?:\.[0-9]+)?[万亿]?"
TOKEN_PATTERN = f"(?:{DATE_PATTERN})|(?:{NUMBER_PATTERN})|[\\s\\S]"


def _types_known(p: dict[str, Any]) -> None:
    types = [entry["type"] for entry in p["query_types"]]
    if len(set(types)) != len(types):
        raise PolicyError("parameters.query_types: a type is listed twice")
    unknown = sorted(set(types) - set(c.QUERY_TYPES))
    if unknown:
        raise PolicyError(f"parameters.query_types: unknown type {unknown[0]!r} (types: {', '.join(c.QUERY_TYPES)})")
    pk = p["packing"]
    if pk["min_items"] > pk["max_items"]:
        raise PolicyError("parameters.packing.min_items must not exceed max_items")
    if sum(p["confidence"]["weights"].values()) <= 0:
        raise PolicyError("parameters.confidence.weights must not all be 0")


EVAL_POLICY = PolicyKind(
    capability="evaluate",
    version_key="eval_policy_version",
    spec={
        "query_types": ListOf({"type": Text(), "keywords": Words()}),
        "modes": {t: Choice(MODES) for t in c.QUERY_TYPES},
        "fallback_mode": Choice(MODES),
        "high_risk_mode": Choice(MODES),
        "retrieval": {"top_k": Number(1, integer=True), "chunk_top_k": Number(1, integer=True),
                      "include_references": Flag(), "enable_rerank": Flag(),
                      "max_entity_tokens": Number(0, integer=True),
                      "max_relation_tokens": Number(0, integer=True), "sql_branch_score": UNIT},
        "rerank": {"alert_ratio": UNIT},
        "packing": {"min_items": Number(1, integer=True), "max_items": Number(1, integer=True),
                    "criterion_tokens": Number(0, integer=True), "report_tokens": Number(0, integer=True),
                    "low_relevance": UNIT},
        "confidence": {"weights": {k: UNIT for k in ("evidence_quality", "retrieval_agreement", "model_stability")},
                       "agreement_when_unavailable": UNIT, "single_run_stability": UNIT},
        "hitl": {"min_confidence": UNIT, "min_citation_coverage": UNIT,
                 "max_score_deviation_pct": Number(0.0)},
        "gates": {"citation_resolution_rate": UNIT, "unsupported_claim_rate": UNIT,
                  "retrieval_p95_ms": Number(0.0), "scoring_p95_ms": Number(0.0),
                  "rerank_degradation_ratio": UNIT},
    },
    cross_checks=(_types_known,),
)

# name -> (contract, required); the order is the order of checking
TABLES: dict[str, tuple[TableContract, bool]] = {
    "evaluations": (c.EVALUATIONS, True), "criteria": (c.CRITERIA, True),
    "queries": (c.BID_QUERIES, True), "chunks": (c.BID_CHUNKS, True), "hits": (c.HITS, True),
    "bid_fields": (c.BID_FIELDS, True), "rerank": (c.RERANK, False),
    "soft_scores": (c.SOFT_SCORES, False), "claims": (c.CLAIMS, False),
    "claim_citations": (c.CLAIM_CITATIONS, False), "synonyms": (c.SYNONYMS, False),
}
# output file -> (stage, sort keys)
STAGE_OUTPUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "queries.parquet": ("typed_queries", ("query_id",)),
    "filter_log.parquet": ("filter_log", ("query_id", "chunk_id", "dropped_by")),
    "candidates.parquet": ("candidates", ("query_id", "chunk_id")),
    "degradation_events.parquet": ("degradation_events", ("query_id", "chunk_id")),
    "evidence.parquet": ("evidence", ("query_id", "keep_order")),
    "rules.parquet": ("rule_results", ("tenant_id", "project_id", "supplier_id", "rule_id")),
    "criteria.parquet": ("criteria_results", ("evaluation_id", "supplier_id", "criteria_id")),
    "consistency.parquet": ("run_totals", ("evaluation_id", "supplier_id", "run_id")),
    "claims.parquet": ("claim_results", ("claim_id",)),
    "evaluations.parquet": ("evaluation_results", ("evaluation_id", "supplier_id")),
}
# what contract.sql and gates.sql read, besides the inputs
MATERIALISED = ("candidates", "criteria_results", "claim_citation_checks", "claim_results", "evaluation_results")
GATES = (  # name, comparison
    ("citation_resolution_rate", ">="), ("unsupported_claim_rate", "<="),
    ("retrieval_p95_ms", "<="), ("scoring_p95_ms", "<="), ("rerank_degradation_ratio", "<="),
)
NOT_COMPUTED = ("ragas_precision", "ragas_recall", "faithfulness")


@dataclass(frozen=True)
class Rule:
    id: str
    criteria_id: str
    kind: str
    reason: str
    expression: Compiled | None = None
    documents: tuple[str, ...] = ()


@dataclass(frozen=True)
class SqlBranch:
    text_parameter: str
    text: str
    condition: Compiled


@dataclass(frozen=True)
class EvaluateResult:
    out_dir: Path
    policy: Policy
    evaluations: int
    gates: dict[str, Any]
    manifest: dict[str, Any]

    @property
    def gates_failed(self) -> list[str]:
        return [g["name"] for g in self.gates["gates"] if g["status"] == "fail"]


def evaluate_bids(input_dir: str | Path, out_dir: str | Path, policy: str = "eval_v1",
                  rules: str | Path | None = None, overrides: list[str] | None = None,
                  settings: EngineSettings | None = None, progress: Progress = SILENT) -> EvaluateResult:
    """Evaluate the bids of `input_dir` into `out_dir` (nothing is written unless all succeeds)."""
    loaded = load_policy(EVAL_POLICY, policy, overrides)
    input_dir = Path(input_dir)
    if not input_dir.is_dir():
        raise InputError(f"--input: no such folder: {input_dir}")
    rules_path = Path(rules) if rules is not None else input_dir / "rules.yaml"
    rule_list = load_rules(rules_path) if rules is not None or rules_path.is_file() else []
    con = connect(settings)
    progress.step(f"checking inputs in {input_dir} (policy {loaded.version})")
    opened = open_eval_inputs(con, input_dir)
    check_rules_match_criteria(con, rule_list, rules_path)
    branches = sql_branches(con, opened["queries"])
    check_synonyms(con, opened)
    context = _context(loaded, rule_list, branches)
    params = {name: value for branch in branches for name, value in _branch_params(branch).items()}
    params.update({name: value for rule in rule_list if rule.expression
                   for name, value in rule.expression.params.items()})
    schema = {name: schema_of(con, name) for name in TABLES}
    progress.step(f"scoring {opened['evaluations'].rows:,} supplier evaluations")
    stage_sql = {stage: render("evaluate/evaluate.sql", final=stage, order_by=keys, **context)
                 for stage, keys in [*STAGE_OUTPUTS.values(), *((m, ()) for m in MATERIALISED)]}
    # every stage renders the same CTEs and differs only in the final SELECT: one check covers them
    check_sql(stage_sql["evaluation_results"], schema)
    for stage in MATERIALISED:
        _run(con, f"CREATE OR REPLACE TEMP TABLE {ident(stage)} AS {stage_sql[stage].text}",
             stage_sql[stage], params)
    contract_sql = render("evaluate/contract.sql", **context)
    gates_sql = render("evaluate/gates.sql", **context)
    materialised = {name: schema_of(con, name) for name in (*TABLES, *MATERIALISED)}
    check_sql(contract_sql, materialised)
    check_sql(gates_sql, materialised)
    progress.step("writing outputs")
    with atomic_output_dir(Path(out_dir)) as stage_dir:
        counts = {}
        for name, (stage, keys) in STAGE_OUTPUTS.items():
            sql = stage_sql[stage]
            _run(con, f"CREATE OR REPLACE TEMP TABLE __out AS {sql.text}", sql, params)
            counts[name] = copy_to(con, f"SELECT * FROM __out ORDER BY {_order(keys)}",
                                   stage_dir / name, "parquet", sql)
        counts["contract.jsonl"] = copy_to(con, contract_sql.text, stage_dir / "contract.jsonl", "json",
                                           contract_sql)
        gates = gates_report(con, gates_sql, loaded)
        write_json(stage_dir / "gates.json", gates)
        # every stage renders evaluate.sql; the one kept selects the last stage, evaluation_results
        rendered = [stage_sql["evaluation_results"], contract_sql, gates_sql]
        write_sql(stage_dir, rendered)
        manifest = build_manifest("evaluate", loaded.as_record(), rendered, opened,
                                  counts, settings_record(settings))
        manifest["rules"] = {"path": str(rules_path) if rule_list else None,
                             "rules": [_rule_record(r) for r in rule_list]}
        write_json(stage_dir / "manifest.json", manifest)
    return EvaluateResult(Path(out_dir), loaded, counts["evaluations.parquet"], gates, manifest)


def _order(keys: tuple[str, ...]) -> str:
    return ", ".join(f"{ident(k)} ASC NULLS LAST" for k in keys)


def _run(con: duckdb.DuckDBPyConnection, statement: str, rendered: RenderedSQL, params: dict[str, Any]) -> None:
    try:
        con.execute(statement, params or None)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        raise DuckscoreError(f"sql/{rendered.template}: DuckDB failed: {first}") from None


def _context(policy: Policy, rules: list[Rule], branches: list[SqlBranch]) -> dict[str, Any]:
    p = policy.parameters
    return dict(
        policy=p, policy_version=policy.version, rules=rules, sql_branches=branches,
        aggregate_columns=[(fn, f) for f in NUMERIC_FIELDS for fn in ("min", "max", "avg")], full_width=FULL_WIDTH, half_width=HALF_WIDTH,
        date_pattern=DATE_PATTERN, number_pattern=NUMBER_PATTERN, token_pattern=TOKEN_PATTERN,
        type_patterns=[{"type": entry["type"], "pattern": keyword_pattern(entry["keywords"])}
                       for entry in p["query_types"]],
    )


def keyword_pattern(keywords: list[str]) -> str:
    """Any of the keywords, normalised like a query (folded, lower case, single spaces)."""
    terms = sorted({" ".join(k.translate(str.maketrans(FULL_WIDTH, HALF_WIDTH)).lower().split())
                    for k in keywords}, key=lambda t: (-len(t), t))
    return "(?:" + "|".join(term_regex(t) for t in terms if t) + ")"


def _branch_params(branch: SqlBranch) -> dict[str, Any]:
    return {branch.text_parameter: branch.text, **branch.condition.params}


def open_eval_inputs(con: duckdb.DuckDBPyConnection, input_dir: Path) -> dict[str, OpenedInput]:
    """The typed views of every table of the folder (optional ones empty when absent), checked
    against their contracts and each other."""
    opened: dict[str, OpenedInput] = {}
    for name, (contract, required) in TABLES.items():
        found = find_table(input_dir, name)
        if found is None:
            if required:
                raise InputError(f"--input {input_dir}: no {name} table "
                                 f"({name}.csv, .parquet, .json, .jsonl or a folder {name}/)")
            create_empty_view(con, contract)
            continue
        opened[name] = open_input(con, contract, found, f"{name} table")
    check_eval_references(con, opened)
    return opened


def find_table(input_dir: Path, name: str) -> str | None:
    candidates = [input_dir / f"{name}{suffix}" for suffix in FORMATS if (input_dir / f"{name}{suffix}").is_file()]
    if (input_dir / name).is_dir():
        candidates.append(input_dir / name)
    if len(candidates) > 1:
        raise InputError(f"--input {input_dir}: more than one {name} table: "
                         f"{', '.join(p.name for p in candidates)}")
    return str(candidates[0]) if candidates else None


def check_eval_references(con: duckdb.DuckDBPyConnection, opened: dict[str, OpenedInput]) -> None:
    """The references of spec §1 between the tables, each failure naming the first bad row."""
    def col(table: str, name: str) -> str:
        return typed_column(opened[table], name)

    queries = opened["queries"]
    check_rows(con, opened["evaluations"], (
        f"{col('evaluations', 'evaluation_id')} IN (SELECT evaluation_id FROM evaluations GROUP BY evaluation_id "
        "HAVING count(DISTINCT (tenant_id, project_id)) > 1)"),
        "evaluation_id {value} belongs to more than one (tenant_id, project_id)",
        shown=col("evaluations", "evaluation_id"))
    check_rows(con, queries, (
        f"NOT EXISTS (SELECT 1 FROM evaluations AS e WHERE e.evaluation_id = {col('queries', 'evaluation_id')} "
        f"AND e.supplier_id = {col('queries', 'supplier_id')} AND e.tenant_id = {col('queries', 'tenant_id')} "
        f"AND e.project_id = {col('queries', 'project_id')})"),
        "(evaluation_id, supplier_id, tenant_id, project_id) is not an evaluations row")
    check_rows(con, queries, (
        f"NOT EXISTS (SELECT 1 FROM criteria AS k WHERE k.tenant_id = {col('queries', 'tenant_id')} "
        f"AND k.project_id = {col('queries', 'project_id')} AND k.criteria_id = {col('queries', 'criteria_id')})"),
        "criteria_id {value} is not a criterion of its tenant and project", shown=col("queries", "criteria_id"))
    check_rows(con, queries, (
        f"({col('queries', 'evaluation_id')}, {col('queries', 'supplier_id')}, {col('queries', 'criteria_id')}) IN "
        "(SELECT (evaluation_id, supplier_id, criteria_id) FROM queries GROUP BY ALL HAVING count(*) > 1)"),
        "a second query for the same (evaluation_id, supplier_id, criteria_id)")
    for table in ("hits", "rerank"):
        if table in opened:
            check_references(con, opened[table], "query_id", queries, "query_id")
    for table in ("soft_scores", "claims"):
        if table not in opened:
            continue
        check_rows(con, opened[table], (
            f"NOT EXISTS (SELECT 1 FROM evaluations AS e JOIN criteria AS k "
            f"ON k.tenant_id = e.tenant_id AND k.project_id = e.project_id "
            f"WHERE e.evaluation_id = {col(table, 'evaluation_id')} AND e.supplier_id = {col(table, 'supplier_id')} "
            f"AND k.criteria_id = {col(table, 'criteria_id')})"),
            "(evaluation_id, supplier_id, criteria_id) is not a criterion of an evaluations row")
    if "soft_scores" in opened:
        check_rows(con, opened["soft_scores"], (
            f"{col('soft_scores', 'score')} > (SELECT k.max_score FROM evaluations AS e JOIN criteria AS k "
            f"ON k.tenant_id = e.tenant_id AND k.project_id = e.project_id "
            f"WHERE e.evaluation_id = {col('soft_scores', 'evaluation_id')} "
            f"AND e.supplier_id = {col('soft_scores', 'supplier_id')} "
            f"AND k.criteria_id = {col('soft_scores', 'criteria_id')})"),
            "score {value} is above the criterion's max_score", shown=col("soft_scores", "score"))
    if "claim_citations" in opened:
        if "claims" not in opened:
            raise InputError("claim_citations table: given without a claims table")
        check_references(con, opened["claim_citations"], "claim_id", opened["claims"], "claim_id")


def check_synonyms(con: duckdb.DuckDBPyConnection, opened: dict[str, OpenedInput]) -> None:
    if "synonyms" in opened:
        check_rows(con, opened["synonyms"], f"contains({typed_column(opened['synonyms'], 'term')}, '\\E')",
                   "term {value} contains \\E, which the dictionary pattern cannot quote",
                   shown=typed_column(opened["synonyms"], "term"))


def sql_branches(con: duckdb.DuckDBPyConnection, queries: OpenedInput) -> list[SqlBranch]:
    """Each distinct sql_condition of the queries, compiled; a bad one names its first query."""
    conditions = [row[0] for row in con.execute(
        "SELECT DISTINCT sql_condition FROM queries WHERE sql_condition IS NOT NULL ORDER BY 1").fetchall()]
    branches = []
    for number, text in enumerate(conditions, start=1):
        try:
            compiled = parse_condition(text, prefix=f"c{number}_")
        except WhitelistError as exc:
            first = con.execute("SELECT min(query_id) FROM queries WHERE sql_condition = ?", [text]).fetchall()
            raise WhitelistError(f"{queries.label} ({queries.given}, query_id={first[0][0]!r}), "
                                 f"column 'sql_condition': {exc}") from None
        branches.append(SqlBranch(f"c{number}_text", text, compiled))
    return branches


def load_rules(path: Path) -> list[Rule]:
    """The rules file (spec §6): each rule checked, its expression compiled by the whitelist."""
    label = f"rules file {path}"
    if not path.is_file():
        raise InputError(f"{label}: no such file")
    try:
        document = load_yaml(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise InputError(f"{label}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(document, dict) or set(document) - {"rules", "description"} or \
            not isinstance(document.get("rules"), list):
        raise InputError(f"{label}: expected a mapping with a list `rules:` (and an optional description)")
    rules: list[Rule] = []
    for number, entry in enumerate(document["rules"], start=1):
        rules.append(_rule(entry, f"{label}, rule {number}", number))
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        raise InputError(f"{label}: rule id {next(i for i in ids if ids.count(i) > 1)!r} is used twice")
    return rules


def _rule(entry: Any, where: str, number: int) -> Rule:
    allowed = {"redline": {"when"}, "required": {"documents"}, "formula": {"score"}}
    if not isinstance(entry, dict):
        raise InputError(f"{where}: expected a mapping")
    kind = entry.get("kind")
    if kind not in allowed:
        raise InputError(f"{where}: kind must be one of {', '.join(RULE_KINDS)}, got {kind!r}")
    keys = {"id", "criteria_id", "kind", "reason"} | allowed[kind]
    unknown = sorted(set(entry) - keys)
    missing = sorted(({"id", "criteria_id"} | allowed[kind]) - set(entry))
    if unknown or missing:
        raise InputError(f"{where}: {'unknown key ' + repr(unknown[0]) if unknown else 'missing key ' + repr(missing[0])}")
    rule_id, criteria_id = str(entry["id"]), str(entry["criteria_id"])
    where = f"{where} ({rule_id})"
    reason = str(entry.get("reason") or rule_id)
    if kind == "required":
        documents = entry["documents"]
        if not isinstance(documents, list) or not documents or not all(isinstance(d, str) and d for d in documents):
            raise InputError(f"{where}: documents must be a non-empty list of doc types")
        return Rule(rule_id, criteria_id, kind, reason, documents=tuple(documents))
    text = entry["when" if kind == "redline" else "score"]
    if not isinstance(text, str):
        raise InputError(f"{where}: {'when' if kind == 'redline' else 'score'} must be a string")
    try:
        compiled = (parse_condition if kind == "redline" else parse_formula)(text, prefix=f"r{number}_")
    except WhitelistError as exc:
        raise WhitelistError(f"{where}: {exc}") from None
    return Rule(rule_id, criteria_id, kind, reason, expression=compiled)


def _rule_record(rule: Rule) -> dict[str, Any]:
    record: dict[str, Any] = {"id": rule.id, "criteria_id": rule.criteria_id, "kind": rule.kind, "reason": rule.reason}
    if rule.expression:
        record.update(expression=rule.expression.normalized, sql=rule.expression.sql, params=rule.expression.params)
    else:
        record["documents"] = list(rule.documents)
    return record


def check_rules_match_criteria(con: duckdb.DuckDBPyConnection, rules: list[Rule], path: Path) -> None:
    """Every rule-scored criterion has exactly one rule of its method; every rule names one."""
    methods: dict[str, set[str]] = {}
    for criteria_id, method in con.execute("SELECT DISTINCT criteria_id, method FROM criteria").fetchall():
        methods.setdefault(criteria_id, set()).add(method)
    for rule in rules:
        found = methods.get(rule.criteria_id)
        if not found:
            raise InputError(f"rules file {path} ({rule.id}): criteria_id {rule.criteria_id!r} is not in the criteria table")
        if found != {rule.kind}:
            raise InputError(f"rules file {path} ({rule.id}): a {rule.kind} rule for criterion "
                             f"{rule.criteria_id!r}, whose method is {', '.join(sorted(found))}")
    for criteria_id, found in sorted(methods.items()):
        ruled = [r for r in rules if r.criteria_id == criteria_id]
        if found & set(RULE_KINDS) and len(ruled) != 1:
            raise InputError(f"criteria table: criterion {criteria_id!r} has method {', '.join(sorted(found))} "
                             f"and needs exactly one rule in {path} (found {len(ruled)})")


def gates_report(con: duckdb.DuckDBPyConnection, gates_sql: RenderedSQL, policy: Policy) -> dict[str, Any]:
    """§12: pass / fail / no_data per gate, with the value, threshold and comparison."""
    from .runner import execute

    execute(con, f"CREATE OR REPLACE TEMP TABLE __gates AS {gates_sql.text}", gates_sql)
    values = first_row(con, "SELECT * FROM __gates")
    assert values is not None
    thresholds = policy.parameters["gates"]
    gates = []
    for (name, comparison), value in zip(GATES, values):
        threshold = thresholds[name]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            status = "no_data"
        else:
            ok = value >= threshold if comparison == ">=" else value <= threshold
            status = "pass" if ok else "fail"
        gates.append({"name": name, "value": None if value is None else float(value),
                      "threshold": threshold, "comparison": comparison, "status": status})
    for name in NOT_COMPUTED:
        gates.append({"name": name, "value": None, "threshold": None, "comparison": None,
                      "status": "not_computed", "why": "needs an LLM judge over the answers; not in the logs"})
    return {"policy_version": policy.version, "gates": gates,
            "passed": all(g["status"] != "fail" for g in gates)}
