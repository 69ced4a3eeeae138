"""The rules file of `duckscore bids` (seed 002 §7.1): redline conditions, required documents and
scoring formulas, each expression compiled by the whitelist; and the check that every rule-scored
criterion has exactly one rule."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InputError, WhitelistError
from ..core.policy import load_yaml
from ..core.session import Session
from .whitelist import Compiled, parse_condition, parse_formula

RULE_KINDS = ("redline", "required", "formula")


@dataclass(frozen=True)
class Rule:
    id: str
    criteria_id: str
    kind: str
    reason: str
    expression: Compiled | None = None
    documents: tuple[str, ...] = ()


def load_rules(path: Path) -> list[Rule]:
    """The rules file (spec §6): each rule checked, its expression compiled by the whitelist."""
    label = f"rules file {path}"
    if not path.is_file():
        raise InputError(f"{label}: no such file")
    try:
        document = load_yaml(path.read_text(encoding="utf-8"))
    except Exception as exc:
        raise InputError(f"{label}: not valid YAML: {' '.join(str(exc).split())}") from None
    if (
        not isinstance(document, dict)
        or set(document) - {"rules", "description"}
        or not isinstance(document.get("rules"), list)
    ):
        raise InputError(
            f"{label}: expected a mapping with a list `rules:` (and an optional description)"
        )
    rules: list[Rule] = []
    for number, entry in enumerate(document["rules"], start=1):
        rules.append(_rule(entry, f"{label}, rule {number}", number))
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        raise InputError(
            f"{label}: rule id {next(i for i in ids if ids.count(i) > 1)!r} is used twice"
        )
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
        raise InputError(
            f"{where}: {'unknown key ' + repr(unknown[0]) if unknown else 'missing key ' + repr(missing[0])}"
        )
    rule_id, criteria_id = str(entry["id"]), str(entry["criteria_id"])
    where = f"{where} ({rule_id})"
    reason = str(entry.get("reason") or rule_id)
    if kind == "required":
        documents = entry["documents"]
        if (
            not isinstance(documents, list)
            or not documents
            or not all(isinstance(d, str) and d for d in documents)
        ):
            raise InputError(f"{where}: documents must be a non-empty list of doc types")
        return Rule(rule_id, criteria_id, kind, reason, documents=tuple(documents))
    text = entry["when" if kind == "redline" else "score"]
    if not isinstance(text, str):
        raise InputError(f"{where}: {'when' if kind == 'redline' else 'score'} must be a string")
    try:
        compiled = (parse_condition if kind == "redline" else parse_formula)(
            text, prefix=f"r{number}_"
        )
    except WhitelistError as exc:
        raise WhitelistError(f"{where}: {exc}") from None
    return Rule(rule_id, criteria_id, kind, reason, expression=compiled)


def rule_record(rule: Rule) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": rule.id,
        "criteria_id": rule.criteria_id,
        "kind": rule.kind,
        "reason": rule.reason,
    }
    if rule.expression:
        record.update(
            expression=rule.expression.normalized,
            sql=rule.expression.sql,
            params=rule.expression.params,
        )
    else:
        record["documents"] = list(rule.documents)
    return record


def check_rules_match_criteria(session: Session, rules: list[Rule], path: Path) -> None:
    """Every rule-scored criterion has exactly one rule of its method; every rule names one."""
    methods: dict[str, set[str]] = {}
    for criteria_id, method in session.con.execute(
        "SELECT DISTINCT criteria_id, method FROM criteria"
    ).fetchall():
        methods.setdefault(criteria_id, set()).add(method)
    for rule in rules:
        found = methods.get(rule.criteria_id)
        if not found:
            raise InputError(
                f"rules file {path} ({rule.id}): criteria_id {rule.criteria_id!r} is not in the criteria table"
            )
        if found != {rule.kind}:
            raise InputError(
                f"rules file {path} ({rule.id}): a {rule.kind} rule for criterion "
                f"{rule.criteria_id!r}, whose method is {', '.join(sorted(found))}"
            )
    for criteria_id, found in sorted(methods.items()):
        ruled = [r for r in rules if r.criteria_id == criteria_id]
        if found & set(RULE_KINDS) and len(ruled) != 1:
            raise InputError(
                f"criteria table: criterion {criteria_id!r} has method {', '.join(sorted(found))} "
                f"and needs exactly one rule in {path} (found {len(ruled)})"
            )
