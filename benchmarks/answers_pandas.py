"""`duckscore answers` (seed 001, policy answer_v1) written the way a user would otherwise write
it: pandas.

The answers benchmark's config (c). Written from the rules (answers_spec.md) rather than translated
from the SQL, in idiomatic vectorised pandas: groupby sizes and heads for citations and chunks,
`np.select` for the bands, `Series.str` for the text (len, split on the blank-line separator,
lower, contains for the conclusion phrases, findall with one alternation of every lexicon term,
longest first, for the lexicon scan), explode + groupby to sort the matched terms into their
lexicons. The numbers and word lists of answer_v1 and answer_v1_en are its own, frozen in
benchmarks/answers_parameters.yaml (never read from the packaged policies, so a wrong number in
a policy makes the two disagree); --policy also takes a policy YAML file of one's own.

`compare` checks an answers.parquet against duckscore's, column by column.

    python benchmarks/answers_pandas.py DATA_DIR OUT_DIR [--policy answer_v1] [--check DUCKSCORE_OUT]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

if __name__ == "__main__":  # `python benchmarks/answers_pandas.py` from any folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.pandas_pipeline import column_differences

PARAMETERS = Path(__file__).resolve().parent / "answers_parameters.yaml"
LEXICONS = ("uncertain", "vague", "assertive")
SEVERITIES = ("high", "medium", "low")
LEVELS = ("low", "medium", "high")
FACTORS = ("citation_quality", "answer_quality", "retrieval", "certainty")
GAP = "…"
PARAGRAPH_SEPARATOR = r"\n[\t\n\f\r ]*\n"
VISIBLE = r"[^\t\n\f\r ]"
WORD = "0-9A-Za-z_"  # the word-boundary rule looks at ASCII letters, digits and underscore only
COLUMNS = (
    "answer_id",
    "query_id",
    "citation_count",
    "citation_count_points",
    "relevance_chunks",
    "relevance_mean",
    "citation_relevance",
    "citation_quality",
    "answer_length",
    "length_points",
    "paragraphs",
    "paragraph_points",
    "has_conclusion",
    "conclusion_points",
    "answer_quality",
    "retrieved_count",
    "retrieval_count_points",
    "citation_rate",
    "citation_rate_points",
    "retrieval",
    "uncertain_hits",
    "uncertain_terms",
    "uncertain_penalty",
    "vague_hits",
    "vague_terms",
    "vague_penalty",
    "assertive_hits",
    "assertive_terms",
    "assertive_bonus",
    "certainty",
    "total",
    "percentage",
    "score_level",
    "contradictions_high",
    "contradictions_medium",
    "contradictions_low",
    "contradiction_warning",
    "level",
    "answer_policy_version",
)


def load_policy(policy: str | Path) -> tuple[str, dict[str, Any]]:
    """(answer_policy_version, parameters): answer_v1 or answer_v1_en from this folder's frozen
    parameters, or a policy YAML file."""
    if str(policy).endswith((".yaml", ".yml")):
        document = yaml.safe_load(Path(policy).read_text(encoding="utf-8"))
        return document["answer_policy_version"], document["parameters"]
    return str(policy), yaml.safe_load(PARAMETERS.read_text(encoding="utf-8"))[str(policy)]


# ---------------------------------------------------------------- the rules


def band_points(values: pd.Series, bands: list[dict[str, float]]) -> pd.Series:
    """The points of the first band (highest threshold first) the value reaches."""
    chosen = np.select(
        [values >= band["at_least"] for band in bands[:-1]],
        [float(band["points"]) for band in bands[:-1]],
        float(bands[-1]["points"]),
    )
    return pd.Series(chosen, index=values.index)


def literal(term: str) -> str:
    """`term` as a regex; an ASCII word character at an end must not touch another one."""
    before = f"(?<![{WORD}])" if re.match(f"[{WORD}]", term[0]) else ""
    after = f"(?![{WORD}])" if re.match(f"[{WORD}]", term[-1]) else ""
    return before + re.escape(term) + after


def lexicon_regex(lexicons: dict[str, list[str]]) -> tuple[str, dict[str, str]]:
    """One alternation of every term, longest first (so the longest term at a position wins), and
    each (lower-cased) term's lexicon."""
    owner = {term.lower(): name for name in LEXICONS for term in lexicons[name]}
    terms = sorted(owner, key=lambda term: (-len(term), term))
    return "(?:" + "|".join(literal(term) for term in terms) + ")", owner


def conclusion_regex(phrases: list[str]) -> str:
    """Any phrase; a phrase's parts around … (spaces beside it stripped) in order, any text between."""
    return "|".join(
        ".*?".join(literal(part.strip()) for part in phrase.lower().split(GAP))
        for phrase in phrases
    )


def citation_factor(
    answers: pd.DataFrame, citations: pd.DataFrame, chunks: pd.DataFrame, p: dict[str, Any]
) -> pd.DataFrame:
    relevance = p["citation_relevance"]
    lo, hi = relevance["score_range"]
    out = pd.DataFrame(index=answers.index)
    out["citation_count"] = (
        citations.groupby("answer_id").size().reindex(answers.index, fill_value=0)
    )
    out["citation_count_points"] = band_points(out["citation_count"], p["citation_count"])
    top = (
        chunks.sort_values(["answer_id", "rerank_score", "chunk_id"], ascending=[True, False, True])
        .groupby("answer_id")
        .head(relevance["top_k"])
    )
    per_answer = (
        top.groupby("answer_id")["rerank_score"].agg(["size", "mean"]).reindex(answers.index)
    )
    out["relevance_chunks"] = per_answer["size"].fillna(0).astype("int64")
    out["relevance_mean"] = per_answer["mean"]
    out["citation_relevance"] = (
        relevance["max_points"] * ((out["relevance_mean"] - lo) / (hi - lo)).clip(0.0, 1.0)
    ).fillna(0.0)
    out["citation_quality"] = out["citation_count_points"] + out["citation_relevance"]
    return out


def answer_factor(text: pd.Series, lowered: pd.Series, p: dict[str, Any]) -> pd.DataFrame:
    structure = p["structure"]
    out = pd.DataFrame(index=text.index)
    out["answer_length"] = text.str.len().astype("int64")
    out["length_points"] = band_points(out["answer_length"], p["length"])
    segments = text.str.split(PARAGRAPH_SEPARATOR, regex=True).explode()
    out["paragraphs"] = (
        segments.str.contains(VISIBLE, regex=True).groupby(level=0).sum().astype("int64")
    )
    out["paragraph_points"] = np.where(
        out["paragraphs"] >= structure["min_paragraphs"], float(structure["paragraph_points"]), 0.0
    )
    phrases = p["lexicons"]["conclusion"]
    out["has_conclusion"] = (
        lowered.str.contains(conclusion_regex(phrases), regex=True, flags=re.DOTALL)
        if phrases
        else False
    )
    out["conclusion_points"] = np.where(
        out["has_conclusion"], float(structure["conclusion_points"]), 0.0
    )
    out["answer_quality"] = (
        out["length_points"] + out["paragraph_points"] + out["conclusion_points"]
    )
    return out


def retrieval_factor(
    answers: pd.DataFrame, citation_count: pd.Series, p: dict[str, Any]
) -> pd.DataFrame:
    out = pd.DataFrame(index=answers.index)
    out["retrieved_count"] = answers["retrieved_count"].astype("int64")
    out["retrieval_count_points"] = band_points(out["retrieved_count"], p["retrieved_count"])
    out["citation_rate"] = citation_count / out["retrieved_count"].where(
        out["retrieved_count"] != 0
    )
    out["citation_rate_points"] = band_points(out["citation_rate"], p["citation_rate"]).where(
        out["citation_rate"].notna(), float(p["citation_rate"][-1]["points"])
    )
    out["retrieval"] = out["retrieval_count_points"] + out["citation_rate_points"]
    return out


def certainty_factor(lowered: pd.Series, p: dict[str, Any]) -> pd.DataFrame:
    rules = p["certainty"]
    out = pd.DataFrame(index=lowered.index)
    pattern, owner = lexicon_regex(p["lexicons"])
    found = lowered.str.findall(pattern).explode().dropna()  # one row per match, in text order
    lexicon = found.map(owner)
    for name in LEXICONS:
        terms = found[lexicon == name].groupby(level=0).agg(list).reindex(lowered.index)
        out[f"{name}_hits"] = terms.str.len().fillna(0).astype("int64")
        out[f"{name}_terms"] = [t if isinstance(t, list) else [] for t in terms]
        reward = "bonus" if name == "assertive" else "penalty"
        out[f"{name}_{reward}"] = np.minimum(
            out[f"{name}_hits"] * rules[name]["per_hit"], rules[name]["cap"]
        )
    raw = ((rules["base"] - out["uncertain_penalty"]) - out["vague_penalty"]) + out[
        "assertive_bonus"
    ]
    out["certainty"] = raw.clip(0.0, 1.0)
    return out


def levels(out: pd.DataFrame, events: pd.DataFrame | None, p: dict[str, Any]) -> pd.DataFrame:
    cuts = p["levels"]
    rounded = out["percentage"].round(6)
    out["score_level"] = np.select(
        [rounded >= cuts["high_at_least"], rounded >= cuts["medium_at_least"]],
        ["high", "medium"],
        "low",
    )
    counts = (
        pd.crosstab(events["answer_id"], events["severity"])
        if events is not None and len(events)
        else pd.DataFrame()
    )
    counts = counts.reindex(index=out.index, columns=list(SEVERITIES), fill_value=0)
    ordinal = out["score_level"].map(LEVELS.index)
    warning = pd.Series(False, index=out.index)
    for severity in SEVERITIES:
        out[f"contradictions_{severity}"] = counts[severity].astype("int64")
        lowered_to = p["contradictions"][severity]
        happened = out[f"contradictions_{severity}"] > 0
        if lowered_to == "warn":
            warning |= happened
        else:
            ordinal = ordinal.where(~happened, np.minimum(ordinal, LEVELS.index(lowered_to)))
    out["contradiction_warning"] = warning
    out["level"] = ordinal.map(dict(enumerate(LEVELS)))
    return out


def score(
    answers: pd.DataFrame,
    citations: pd.DataFrame,
    chunks: pd.DataFrame,
    events: pd.DataFrame | None,
    p: dict[str, Any],
    version: str,
) -> pd.DataFrame:
    answers = answers.set_index("answer_id").sort_index()
    lowered = answers["answer_text"].str.lower()
    cited = citation_factor(answers, citations, chunks, p)
    out = pd.concat(
        [
            answers[["query_id"]],
            cited,
            answer_factor(answers["answer_text"], lowered, p),
            retrieval_factor(answers, cited["citation_count"], p),
            certainty_factor(lowered, p),
        ],
        axis=1,
    )
    weights = p["weights"]
    out["total"] = (
        weights["citation_quality"] * out["citation_quality"]
        + weights["answer_quality"] * out["answer_quality"]
        + weights["retrieval"] * out["retrieval"]
        + weights["certainty"] * out["certainty"]
    )
    out["percentage"] = 100.0 * out["total"] / math.fsum(weights[f] for f in FACTORS)
    out = levels(out, events, p)
    out["answer_policy_version"] = version
    return out.reset_index()[list(COLUMNS)]


def run_pandas(
    data_dir: str | Path, out_dir: str | Path, policy: str | Path = "answer_v1"
) -> dict[str, int]:
    """Score data_dir's answers/citations/chunks(/events).parquet into out_dir/answers.parquet."""
    data, out = Path(data_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    version, parameters = load_policy(policy)
    events = (
        pd.read_parquet(data / "events.parquet") if (data / "events.parquet").exists() else None
    )
    scored = score(
        pd.read_parquet(data / "answers.parquet"),
        pd.read_parquet(data / "citations.parquet"),
        pd.read_parquet(data / "chunks.parquet"),
        events,
        parameters,
        version,
    )
    scored.to_parquet(out / "answers.parquet", index=False)
    return {"answers.parquet": len(scored)}


# ---------------------------------------------------------------- checking against duckscore


def as_tuples(column: pd.Series) -> pd.Series:
    """List cells (numpy arrays from Parquet) as tuples, so == compares them whole."""
    return column.map(lambda cell: None if cell is None else tuple(cell), na_action="ignore")


def compare(
    duckscore_file: str | Path,
    pandas_file: str | Path,
    rel_tol: float = 1e-9,
    limit: int | None = None,
) -> list[str]:
    """The differences between two answers.parquet files (duckscore's first): [] when they agree.
    Floats within rel_tol, everything else (lists, strings, counts, flags) exactly; also the
    columns' names and order and the rows' order. At most `limit` problems."""
    ours, theirs = pd.read_parquet(duckscore_file), pd.read_parquet(pandas_file)
    problems = []
    if list(ours.columns) != list(theirs.columns):
        problems.append(
            f"columns differ: duckscore {list(ours.columns)}, pandas {list(theirs.columns)}"
        )
    if (
        len(ours) == len(theirs)
        and not (ours["answer_id"].to_numpy() == theirs["answer_id"].to_numpy()).all()
    ):
        problems.append("rows are in a different order")
    merged = ours.merge(theirs, on="answer_id", how="outer", suffixes=("_d", "_p"), indicator=True)
    unmatched = merged["_merge"] != "both"
    if unmatched.any():
        problems.append(
            f"answers.parquet: {int((merged['_merge'] == 'left_only').sum())} answers only in "
            f"duckscore, {int((merged['_merge'] == 'right_only').sum())} only in pandas"
        )
    merged = merged[~unmatched]
    for column in [c for c in ours.columns if c in theirs.columns and c != "answer_id"]:
        if column.endswith("_terms"):
            merged[f"{column}_d"], merged[f"{column}_p"] = (
                as_tuples(merged[f"{column}_{side}"]) for side in "dp"
            )
        difference = column_differences("answers.parquet", merged, ["answer_id"], column, rel_tol)
        if difference:
            problems.append(difference)
    return problems[:limit]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "data", type=Path, help="folder with answers, citations, chunks (, events).parquet"
    )
    parser.add_argument("out", type=Path)
    parser.add_argument(
        "--policy", default="answer_v1", help="answer_v1, answer_v1_en or a policy YAML file"
    )
    parser.add_argument(
        "--check",
        type=Path,
        metavar="DUCKSCORE_OUT",
        help="compare with a `duckscore answers` folder; exit 1 on a difference",
    )
    args = parser.parse_args(argv)
    for name, rows in run_pandas(args.data, args.out, args.policy).items():
        print(f"{name}: {rows:,} rows")
    if args.check:
        problems = compare(args.check / "answers.parquet", args.out / "answers.parquet")
        print("\n".join(problems) if problems else f"same as {args.check}")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
