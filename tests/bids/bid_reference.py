"""Seed 002 in plain Python, row by row, from the specification of `duckscore bids` (docs/bids.md,
"What bid_v1 computes"): filters, rerank fallback, packing, rules, scores, confidence,
consistency, citations, triggers. Rule expressions are evaluated by Python functions given by
the caller (no SQL, no sqlglot). Query normalisation is not covered here (test_bids.py)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

P = {
    "chunk_top_k": 20,
    "sql_branch_score": 1.0,
    "alert_ratio": 0.2,
    "min_items": 2,
    "max_items": 8,
    "criterion_tokens": 6000,
    "report_tokens": 24000,
    "low_relevance": 0.3,
    "w": (0.4, 0.3, 0.3),
    "agreement_unavailable": 0.5,
    "single_run": 0.5,
    "min_confidence": 0.65,
    "min_coverage": 0.90,
    "max_deviation": 20.0,
}


@dataclass
class Rule:
    id: str
    criteria_id: str
    kind: str  # redline | required | formula
    when: Callable[[dict], bool | None] | None = None  # redline: fields -> TRUE/FALSE/NULL
    documents: tuple[str, ...] = ()
    score: Callable[[dict, dict], float | None] | None = (
        None  # formula: (fields, aggregates) -> value
    )


def _items(text: str | None) -> list[str]:
    return [t.strip() for t in text.split(",")] if text is not None else []


def candidates(
    t: dict[str, list[dict]], sql_match: Callable[[dict, dict], bool]
) -> tuple[list[dict], list[tuple]]:
    """Merged, filtered, reranked candidates, and the filter log (query_id, chunk_id, dropped_by)."""
    queries = {q["query_id"]: q for q in t["queries"]}
    chunks = {(c["tenant_id"], c["chunk_id"]): c for c in t["chunks"]}
    merged: dict[tuple, dict] = {}
    log = []
    for h in t["hits"]:
        if h["rank"] > P["chunk_top_k"]:
            log.append((h["query_id"], h["chunk_id"], "chunk_top_k"))
            continue
        m = merged.setdefault((h["query_id"], h["chunk_id"]), {"score_raw": -1.0, "sources": set()})
        m["score_raw"] = max(m["score_raw"], h["score_raw"])
        m["sources"].add("lightrag")
    for q in t["queries"]:
        if q.get("sql_condition") is None:
            continue
        for b in t["bid_fields"]:
            if (b["tenant_id"], b["project_id"], b["supplier_id"]) == (
                q["tenant_id"],
                q["project_id"],
                q["supplier_id"],
            ) and sql_match(q, b):
                m = merged.setdefault(
                    (q["query_id"], b["chunk_id"]), {"score_raw": -1.0, "sources": set()}
                )
                m["score_raw"] = max(m["score_raw"], P["sql_branch_score"])
                m["sources"].add("sql")
    rerank = {(r["query_id"], r["chunk_id"]): r for r in t.get("rerank", [])}
    out = []
    for (query_id, chunk_id), m in sorted(merged.items()):
        q = queries[query_id]
        c = chunks.get((q["tenant_id"], chunk_id))
        dropped = (
            "tenant_id"
            if c is None
            else "project_id"
            if c["project_id"] != q["project_id"]
            else "doc_scope"
            if q.get("doc_scope") is not None and c["doc_type"] not in _items(q["doc_scope"])
            else "supplier_scope"
            if c["supplier_id"] is not None and c["supplier_id"] != q["supplier_id"]
            else "rule_scope"
            if c.get("rule_scope") is not None and q["criteria_id"] not in _items(c["rule_scope"])
            else None
        )
        if dropped:
            log.append((query_id, chunk_id, dropped))
            continue
        r = rerank.get((query_id, chunk_id))
        ok = r is not None and r["status"] == "ok" and r["score_rerank"] is not None
        cause = (
            None
            if ok
            else "missing"
            if r is None
            else "timeout"
            if r["status"] == "timeout"
            else "error"
        )
        score_rerank = r["score_rerank"] if ok else m["score_raw"]
        out.append(
            {
                "query_id": query_id,
                "chunk_id": chunk_id,
                "evaluation_id": q["evaluation_id"],
                "supplier_id": q["supplier_id"],
                "doc_id": c["doc_id"],
                "page": c["page"],
                "tokens": c["tokens"],
                "confidence": c.get("confidence", 1.0) if c.get("confidence") is not None else 1.0,
                "score_raw": m["score_raw"],
                "score_rerank": score_rerank,
                "relevance": score_rerank,
                "degraded": not ok,
                "cause": cause,
                "sources": sorted(m["sources"]),
            }
        )
    return out, sorted(log)


def pack(cands: list[dict]) -> dict[tuple, dict]:
    """Per (query_id, chunk_id): keep_order, in_criterion_pack, report_order, packed."""
    by_query: dict[str, list[dict]] = defaultdict(list)
    for c in cands:
        by_query[c["query_id"]].append(c)
    result: dict[tuple, dict] = {}
    criterion_packed = []
    for query_id, items in by_query.items():
        per_doc: dict[str, list[dict]] = defaultdict(list)
        for c in items:
            per_doc[c["doc_id"]].append(c)
        doc_rank = {}
        for doc_items in per_doc.values():
            for i, c in enumerate(
                sorted(doc_items, key=lambda c: (-c["relevance"], c["chunk_id"])), start=1
            ):
                doc_rank[c["chunk_id"]] = i

        def klass(c: dict, doc_rank: dict = doc_rank) -> int:
            return (
                2
                if c["relevance"] < P["low_relevance"]
                else 1
                if doc_rank[c["chunk_id"]] > 1
                else 0
            )

        ordered = sorted(
            items,
            key=lambda c: (
                c["tokens"] > P["criterion_tokens"],
                klass(c),
                -c["relevance"] * c["confidence"],
                c["chunk_id"],
            ),
        )
        running = 0
        for position, c in enumerate(ordered, start=1):
            running += c["tokens"]
            inside = position <= P["max_items"] and running <= P["criterion_tokens"]
            result[(query_id, c["chunk_id"])] = {
                "keep_order": position,
                "in_criterion_pack": inside,
                "trim_class": klass(c),
                "report_order": None,
                "packed": False,
            }
            if inside:
                criterion_packed.append((c, position, klass(c)))
    by_report: dict[tuple, list] = defaultdict(list)
    for c, position, k in criterion_packed:
        by_report[(c["evaluation_id"], c["supplier_id"])].append((c, position, k))
    for entries in by_report.values():
        entries.sort(
            key=lambda e: (
                e[1] > P["min_items"],
                e[2],
                -e[0]["relevance"] * e[0]["confidence"],
                e[0]["query_id"],
                e[0]["chunk_id"],
            )
        )
        running = 0
        for order, (c, _, _) in enumerate(entries, start=1):
            running += c["tokens"]
            entry = result[(c["query_id"], c["chunk_id"])]
            entry["report_order"] = order
            entry["packed"] = running <= P["report_tokens"]
    return result


def evaluate(
    t: dict[str, list[dict]], rules: list[Rule], sql_match: Callable[[dict, dict], bool]
) -> dict[str, Any]:
    cands, log = candidates(t, sql_match)
    packing = pack(cands)
    fields = {(b["tenant_id"], b["project_id"], b["supplier_id"]): b for b in t["bid_fields"]}
    bidders = sorted(
        {(e["tenant_id"], e["project_id"], e["supplier_id"]) for e in t["evaluations"]}
        | set(fields)
    )
    docs = defaultdict(set)
    for c in t["chunks"]:
        if c["supplier_id"] is not None:
            docs[(c["tenant_id"], c["project_id"], c["supplier_id"])].add(c["doc_type"])
    criteria_of = defaultdict(list)
    for k in t["criteria"]:
        criteria_of[(k["tenant_id"], k["project_id"])].append(k)
    outcome: dict[tuple, dict] = {}  # (tenant, project, supplier, criteria_id) -> rule result
    for b in bidders:
        f = fields.get(b, {})
        for rule in rules:
            if rule.kind == "formula" or not any(
                k["criteria_id"] == rule.criteria_id for k in criteria_of[b[:2]]
            ):
                continue
            if rule.kind == "redline":
                value = rule.when(f) if f else None
                outcome[(*b, rule.criteria_id)] = {
                    "passed": value is True,
                    "missing": value is None,
                }
            else:
                missing = [d for d in rule.documents if d not in docs[b]]
                outcome[(*b, rule.criteria_id)] = {"passed": not missing, "missing": bool(missing)}
    aggregates = {}
    for project in {b[:2] for b in bidders}:
        qualified = [
            fields[b]
            for b in bidders
            if b[:2] == project
            and b in fields
            and all(o["passed"] for k, o in outcome.items() if k[:3] == b)
        ]
        aggregates[project] = {
            f"{fn}__{name}": (
                None
                if not values
                else min(values)
                if fn == "min"
                else max(values)
                if fn == "max"
                else sum(values) / len(values)
            )
            for name in ("registered_capital", "bid_price", "delivery_period", "warranty_period")
            for fn in ("min", "max", "avg")
            for values in [[q[name] for q in qualified if q[name] is not None]]
        }
    for b in bidders:
        for rule in rules:
            if rule.kind == "formula" and any(
                k["criteria_id"] == rule.criteria_id for k in criteria_of[b[:2]]
            ):
                value = rule.score(fields.get(b, {}), aggregates[b[:2]]) if b in fields else None
                bad = value is None or not math.isfinite(value)
                outcome[(*b, rule.criteria_id)] = {"value": None if bad else value, "missing": bad}

    soft = defaultdict(dict)
    for s in t.get("soft_scores", []):
        soft[(s["evaluation_id"], s["supplier_id"], s["criteria_id"])][s["run_id"]] = s
    query_of = {
        (q["evaluation_id"], q["supplier_id"], q["criteria_id"]): q["query_id"]
        for q in t["queries"]
    }
    cands_of = defaultdict(list)
    for c in cands:
        cands_of[c["query_id"]].append(c)
    evaluations = {}
    criteria_rows = {}
    for e in t["evaluations"]:
        key = (e["evaluation_id"], e["supplier_id"])
        rows = []
        for k in sorted(
            criteria_of[(e["tenant_id"], e["project_id"])], key=lambda k: k["criteria_id"]
        ):
            runs = soft.get((*key, k["criteria_id"]), {})
            scores = [runs[r]["score"] for r in sorted(runs)]
            o = outcome.get(
                (e["tenant_id"], e["project_id"], e["supplier_id"], k["criteria_id"]), {}
            )
            if k["method"] == "llm":
                score, hard = (sum(scores) / len(scores) if scores else 0.0), True
            elif k["method"] == "formula":
                score = 0.0 if o["missing"] else max(0.0, min(k["max_score"], o["value"]))
                hard = not o["missing"]
            else:
                score, hard = (k["max_score"] if o["passed"] else 0.0), o["passed"]
            conflict = k["method"] in ("redline", "required") and any(
                r.get("redline_pass") is not None and (r["redline_pass"] == 1) != hard
                for r in runs.values()
            )
            query_id = query_of.get((*key, k["criteria_id"]))
            packed = sorted(
                (
                    c
                    for c in cands_of.get(query_id, [])
                    if packing[(query_id, c["chunk_id"])]["packed"]
                ),
                key=lambda c: packing[(query_id, c["chunk_id"])]["report_order"],
            )
            quality = (
                sum(c["relevance"] for c in packed)
                / len(packed)
                * min(1.0, len(packed) / P["min_items"])
                if packed
                else 0.0
            )
            ok = [c for c in cands_of.get(query_id, []) if not c["degraded"]]
            if ok:
                n = min(P["max_items"], len(ok))
                top_raw = {
                    c["chunk_id"]
                    for c in sorted(ok, key=lambda c: (-c["score_raw"], c["chunk_id"]))[:n]
                }
                top_rr = {
                    c["chunk_id"]
                    for c in sorted(ok, key=lambda c: (-c["score_rerank"], c["chunk_id"]))[:n]
                }
                agreement = len(top_raw & top_rr) / n
            else:
                agreement = P["agreement_unavailable"]
            stability = (
                1.0
                if k["method"] != "llm"
                else 0.0
                if not scores
                else P["single_run"]
                if len(scores) == 1
                else 1.0 - (max(scores) - min(scores)) / k["max_score"]
            )
            w = P["w"]
            confidence = w[0] * quality + w[1] * agreement + w[2] * stability
            row = {
                "criteria_id": k["criteria_id"],
                "method": k["method"],
                "weight": k["weight"],
                "score": score,
                "hard_pass": hard,
                "redline_conflict": conflict,
                "evidence_quality": quality,
                "retrieval_agreement": agreement,
                "model_stability": stability,
                "confidence": confidence,
                "evidence_count": len(packed),
                "runs": runs,
            }
            rows.append(row)
            criteria_rows[(*key, k["criteria_id"])] = row
        total = math.fsum(r["score"] * r["weight"] for r in rows)
        weights = math.fsum(r["weight"] for r in rows)
        confidence = (
            math.fsum(r["weight"] * r["confidence"] for r in rows) / weights
            if weights > 0
            else sum(r["confidence"] for r in rows) / len(rows)
            if rows
            else 0.0
        )
        run_ids = sorted({run for r in rows for run in r["runs"]})
        totals = [
            math.fsum(
                r["weight"]
                * (
                    r["runs"][run]["score"]
                    if r["method"] == "llm" and run in r["runs"]
                    else r["score"]
                )
                for r in rows
            )
            for run in run_ids
        ]
        deviation = (
            0.0
            if len(totals) < 2 or max(totals) == min(totals)
            else 100.0 * (max(totals) - min(totals)) / (sum(totals) / len(totals))
        )
        claims = [c for c in t.get("claims", []) if (c["evaluation_id"], c["supplier_id"]) == key]
        supported = 0
        for claim in claims:
            cites = [x for x in t.get("claim_citations", []) if x["claim_id"] == claim["claim_id"]]
            if any(_resolvable(x, e, claim, t["chunks"]) for x in cites):
                supported += 1
        coverage = supported / len(claims) if claims else 1.0
        unsupported = len(claims) - supported
        vetoed = any(r["method"] in ("redline", "required") and not r["hard_pass"] for r in rows)
        conflict = any(r["redline_conflict"] for r in rows)
        reasons = [
            name
            for name, hit in (
                ("low_confidence", confidence < P["min_confidence"]),
                ("low_citation_coverage", coverage < P["min_coverage"]),
                ("score_deviation", deviation > P["max_deviation"]),
                ("redline_conflict", conflict),
                ("forced_review", e.get("force_review") == 1),
            )
            if hit
        ]
        mine = [c for c in cands if (c["evaluation_id"], c["supplier_id"]) == key]
        ratio = sum(c["degraded"] for c in mine) / len(mine) if mine else 0.0
        evaluations[key] = {
            "total_score": total,
            "confidence": confidence,
            "vetoed": vetoed,
            "score_deviation_pct": deviation,
            "citation_coverage": coverage,
            "unsupported_claims": unsupported,
            "hitl_reasons": reasons,
            "needs_human_review": bool(reasons),
            "recommendation": None if unsupported else "disqualified" if vetoed else "qualified",
            "recommendation_status": "blocked"
            if unsupported
            else "human_review"
            if reasons
            else "final",
            "risk_level": (
                "high"
                if vetoed or unsupported or conflict
                else "medium"
                if reasons or ratio > P["alert_ratio"]
                else "low"
            ),
            "rerank_degraded_ratio": ratio,
        }
    return {
        "candidates": cands,
        "filter_log": log,
        "packing": packing,
        "criteria": criteria_rows,
        "evaluations": evaluations,
    }


def _resolvable(cite: dict, evaluation: dict, claim: dict, chunks: list[dict]) -> bool:
    for c in chunks:
        if (c["tenant_id"], c["chunk_id"], c["project_id"]) != (
            evaluation["tenant_id"],
            cite["chunk_id"],
            evaluation["project_id"],
        ):
            continue
        if c["supplier_id"] is not None and c["supplier_id"] != claim["supplier_id"]:
            return False
        box = [cite.get(k) for k in ("bbox_x0", "bbox_y0", "bbox_x1", "bbox_y1")]
        if cite.get("page") is None or cite["page"] != c["page"] or any(v is None for v in box):
            return False
        return (
            box[0] < box[2]
            and box[1] < box[3]
            and box[0] >= c["bbox_x0"]
            and box[1] >= c["bbox_y0"]
            and box[2] <= c["bbox_x1"]
            and box[3] <= c["bbox_y1"]
        )
    return False
