"""Is a job per query? True when every number the scorer gives for a query — its contract line,
its fused items, its scored parents — depends only on that query's rows, so queries scored in
one statement get what each gets alone (issue 52 §2: what lets the live scorer batch requests).

Read off the parameters, never declared: the stages partition every window and group by
query_id (fusion per (query, source) list, parent features and scores per query), so what
reaches across queries is a parameter that reads the log as a whole:
- a score policy's normalisation other than `per_query` (windows over the query's parents) or
  `reference` (constant bounds): none exists today, a new mode is not per query until listed;
- a recipe that counts empty lists (`fusion.count_empty_sources`, OpenSearch's arithmetic
  mean) over the sources it discovers in the log: a query without hits of a source another
  query names gets that source's empty list, so its fused scores depend on the other queries
  (its contract does not: the parent features read the hits, not the fused scores);
- a recipe with plugin components: their SQL is the user's, which may read any window.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..fusion.recipe_view import Recipe
    from ..scoring.policy_view import ScorePolicy

PER_QUERY_NORMALISATIONS = ("per_query", "reference")


def cross_query_reasons(recipe: Recipe, policy: ScorePolicy) -> tuple[str, ...]:
    """Why a query's numbers may depend on the other queries scored with it; () when none."""
    reasons = []
    mode = policy.normalization.mode
    if mode not in PER_QUERY_NORMALISATIONS:
        reasons.append(f"{policy.version}: normalization.mode {mode} is not per query")
    if recipe.discover_sources and recipe.policy.parameters["fusion"].get("count_empty_sources"):
        reasons.append(
            f"{recipe.version}: fusion.count_empty_sources counts the empty list of every "
            "source the log names (discover_sources)"
        )
    if recipe.plugins:
        reasons.append(f"{recipe.version}: plugin components (their SQL may read the whole log)")
    return tuple(reasons)
