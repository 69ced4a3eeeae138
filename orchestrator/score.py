"""`duckscore score`: seed 000's parent OverallScore and retrieval-confidence decisions."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from .contracts import PARENT_FEATURES, QUERY_IDS
from .engine import EngineSettings, connect
from .errors import DuckscoreError, InputError, PolicyError
from .inputs import open_input, schema_of
from .manifest import build_manifest
from .outputs import atomic_output_dir, write_json
from .policy import Bounds, Choice, Number, Policy, PolicyKind, load_policy
from .progress import SILENT, Progress
from .render import RenderedSQL, ident, render
from .runner import copy_to, execute, first_row, settings_record, write_sql
from .sqlcheck import check_sql

UNIT = Number(0.0, 1.0)
EVIDENCE = ("rrf_sum", "parent_rrf")  # §5.1's multi-evidence term: the seed's, or document-level RRF
REFERENCE_FEATURES = ("rrf_sum", "parent_rrf", "max_score", "coverage", "log_chunks")
WEIGHTS = ("w1", "w2", "w3", "w_agreement", "w_separation")


def _weights_sum_to_one(p: dict[str, Any]) -> None:
    total = sum(p[w] for w in WEIGHTS)
    if not math.isclose(total, 1.0, abs_tol=1e-9):
        raise PolicyError(f"parameters.w1 + w2 + w3 + w_agreement + w_separation must sum to 1, "
                          f"got {total:.12g}")


def _thresholds_ordered(p: dict[str, Any]) -> None:
    if p["T_low"] > p["T_high"]:
        raise PolicyError(f"parameters.T_low ({p['T_low']:g}) must not exceed T_high ({p['T_high']:g})")
    nz = p["normalization"]
    if nz["p_lo"] >= nz["p_hi"]:
        raise PolicyError("parameters.normalization.p_lo must be below normalization.p_hi")


def _normalisation_complete(p: dict[str, Any]) -> None:
    nz = p["normalization"]
    if nz["coverage"] == "divide_by_max" and nz["coverage_max"] is None:
        raise PolicyError("parameters.normalization.coverage_max is required by coverage: divide_by_max")
    if nz["mode"] == "reference":
        needed = [p["strength_evidence"], "max_score", "log_chunks"] + (["coverage"] if nz["coverage"] == "quantile" else [])
        for feature in needed:
            if nz["reference"][feature] is None:
                raise PolicyError(f"parameters.normalization.reference.{feature} is required by mode: reference")


SCORE_POLICY = PolicyKind(
    capability="score",
    version_key="score_policy_version",
    spec={
        "alpha": UNIT, "beta": UNIT,
        "strength_evidence": Choice(EVIDENCE),
        "stability_base": UNIT, "stability_size_weight": UNIT,
        "separation_base": UNIT,
        "w1": Number(0.0, 1.0, lo_open=True), "w2": UNIT, "w3": UNIT,
        "w_agreement": UNIT, "w_separation": UNIT,
        "subscore_floor": Number(0.0, 1.0, lo_open=True),
        "T_low": UNIT, "T_high": UNIT, "R_hitl": UNIT,
        "normalization": {
            "mode": Choice(("per_query", "reference")),
            "p_lo": UNIT, "p_hi": UNIT,
            "eps": Number(0.0, 1.0, lo_open=True),
            "zero_spread_value": UNIT,
            "coverage": Choice(("quantile", "divide_by_max")),
            "coverage_max": Number(0.0, lo_open=True, nullable=True),
            "reference": {f: Bounds() for f in REFERENCE_FEATURES},
        },
        "risk_flags": {
            "low_coverage": {"strength_at_least": UNIT, "coverage_below": UNIT},
            "single_spike": {"max_score_norm_at_least": UNIT, "rrf_sum_norm_below": UNIT},
            "sparse_evidence": {"coverage_ratio_below": UNIT},
            "huge_doc_sparse": {"total_chunks_at_least": Number(0.0), "coverage_ratio_below": UNIT},
            "ambiguous_candidate": {"ratio_at_least": UNIT},
        },
    },
    cross_checks=(_weights_sum_to_one, _thresholds_ordered, _normalisation_complete),
)

CONTRACT_COLUMNS = ("query_id", "best_parent_id", "best_overall_score", "confidence_level",
                    "top2_ratio", "need_hitl", "web_fallback")


@dataclass(frozen=True)
class ScoreResult:
    out_dir: Path
    policy: Policy
    queries: int
    parents: int
    manifest: dict[str, Any]


def render_parents(policy: Policy, final: str = "scored_parents",
                   features_table: str = "parent_features", ordered: bool = True) -> RenderedSQL:
    return render("score/parents.sql", policy=policy.parameters,
                  inputs={"parent_features": features_table}, final=final, ordered=ordered)


def render_queries(policy: Policy, top_n: int, standalone: bool, with_query_ids: bool,
                   final: str = "contract") -> RenderedSQL:
    return render(
        "score/queries.sql", policy=policy.parameters, policy_version=policy.version, top_n=top_n,
        standalone=standalone, final=final,
        inputs={"parent_features": "parent_features", "scored_parents": "scored_parents",
                "query_ids": "query_ids" if with_query_ids else None},
    )


def score(features: str | Path | pd.DataFrame, out_dir: str | Path, policy: str = "overall_v1",
          overrides: list[str] | None = None, queries: str | Path | pd.DataFrame | None = None,
          top_n: int = 5, settings: EngineSettings | None = None,
          progress: Progress = SILENT) -> ScoreResult:
    """Score parent features into `out_dir`: parents.parquet, queries.parquet, contract.jsonl,
    manifest.json and the rendered SQL. Nothing is written unless everything succeeds."""
    if top_n < 1:
        raise DuckscoreError(f"--top-n must be at least 1, got {top_n}")
    loaded = load_policy(SCORE_POLICY, policy, overrides)
    con = connect(settings)
    progress.step(f"checking inputs (policy {loaded.version})")
    inputs = {"features": open_input(con, PARENT_FEATURES, features, "--features")}
    if queries is not None:
        inputs["queries"] = open_input(con, QUERY_IDS, queries, "--queries")
    progress.step(f"scoring {inputs['features'].rows:,} candidate parents")
    rendered = score_tables(con, loaded, top_n, with_query_ids=queries is not None,
                            where=f"--features ({inputs['features'].given})")
    progress.step("writing outputs")
    with atomic_output_dir(Path(out_dir)) as stage:
        counts = write_score_outputs(con, stage)
        write_sql(stage, rendered)
        manifest = build_manifest(
            "score", loaded.as_record(), rendered, inputs, counts,
            {"top_n": top_n, **settings_record(settings)},
        )
        write_json(stage / "manifest.json", manifest)
    return ScoreResult(Path(out_dir), loaded, counts["queries.parquet"], counts["parents.parquet"], manifest)


def evidence_columns(parameters: dict[str, Any]) -> list[str]:
    """The optional parent_features columns a policy reads (overall_v2's evidence)."""
    needed = [parameters["strength_evidence"]] if parameters["strength_evidence"] != "rrf_sum" else []
    if parameters["w_agreement"]:
        needed.append("source_agreement")
    if parameters["w_separation"]:
        needed.append("score_lead")
    return needed


def check_evidence_columns(con: duckdb.DuckDBPyConnection, policy: Policy, where: str,
                           features_table: str = "parent_features") -> None:
    """An optional column the input lacks reads as NULL in the typed view: require values."""
    for name in evidence_columns(policy.parameters):
        nulls = first_row(con, f"SELECT count(*) FILTER (WHERE {ident(name)} IS NULL) "
                            f"FROM {ident(features_table)}")
        if nulls and nulls[0]:
            raise InputError(f"{where}: policy {policy.version} needs column {name!r} (missing, or "
                             f"null in {nulls[0]:,} rows), which `duckscore fuse` writes to "
                             f"parent_features.parquet")


def score_tables(con: duckdb.DuckDBPyConnection, policy: Policy, top_n: int,
                 with_query_ids: bool, where: str = "--features",
                 features_table: str = "parent_features") -> list[RenderedSQL]:
    """Create temp tables scored_parents and score_contract from the parent_features view."""
    check_evidence_columns(con, policy, where, features_table)
    parents_sql = render_parents(policy, features_table=features_table, ordered=False)
    check_sql(parents_sql, {features_table: schema_of(con, features_table)})
    execute(con, f"CREATE OR REPLACE TEMP TABLE scored_parents AS {parents_sql.text}", parents_sql)
    queries_sql = render_queries(policy, top_n, standalone=False, with_query_ids=with_query_ids)
    schema = {"scored_parents": schema_of(con, "scored_parents")}
    if with_query_ids:
        schema["query_ids"] = schema_of(con, "query_ids")
    check_sql(queries_sql, schema)
    execute(con, f"CREATE OR REPLACE TEMP TABLE score_contract AS {queries_sql.text}", queries_sql)
    return [parents_sql, queries_sql]


def write_score_outputs(con: duckdb.DuckDBPyConnection, stage: Path) -> dict[str, int]:
    flat = ", ".join(CONTRACT_COLUMNS)
    copies = {
        "parents.parquet": ("SELECT * FROM scored_parents ORDER BY query_id, rank", "parquet"),
        "queries.parquet": (f"SELECT {flat} FROM score_contract ORDER BY query_id", "parquet"),
        "contract.jsonl": ("SELECT * FROM score_contract ORDER BY query_id", "json"),
    }
    return {name: copy_to(con, query, stage / name, fmt) for name, (query, fmt) in copies.items()}
