"""A plain-Python oracle of the seed-000 parent features (the header of
sql/fuse/parent_features.sql and docs/fusion-semantics.md state them), written from that text,
not from the SQL: one dict per (query, parent) from the log's hits, after distance conversion,
rank derivation and the top_k cut, with the weights of the recipe's sources."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Hit:
    query_id: str
    source: str
    item_id: str
    parent_id: str
    score: float
    rank: int
    block_type: str
    is_block: bool
    total_chunks: int | None
    weight: float


def hits_of(
    rows: Iterable[Mapping[str, Any]],
    weights: Mapping[str, float],
    top_k: Mapping[str, int | None],
) -> list[Hit]:
    """The log's rows as hits: ranks derived (score descending, then item_id) where a row has
    none, cut to each source's top_k; a NULL block type is 'unknown'; a row without granularity
    is a block when its item is not its parent."""
    by_list: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_list[(row["query_id"], row["source"])].append(row)
    hits = []
    for (_, source), listed in by_list.items():
        if all(row.get("rank") is not None for row in listed):
            ranked = [(int(row["rank"]), row) for row in listed]
        else:
            ordered = sorted(listed, key=lambda row: (-row["score"], row["item_id"]))
            ranked = list(enumerate(ordered, start=1))
        for rank, row in ranked:
            cut = top_k.get(source)
            if cut is not None and rank > cut:
                continue
            granularity = row.get("granularity") or (
                "doc" if row["item_id"] == row["parent_id"] else "block"
            )
            hits.append(
                Hit(
                    row["query_id"],
                    source,
                    row["item_id"],
                    row["parent_id"],
                    float(row["score"]),
                    rank,
                    row.get("block_type") or "unknown",
                    granularity == "block",
                    row.get("total_chunks"),
                    weights[source],
                )
            )
    return hits


def parent_features(hits: Sequence[Hit], rrf_offset: float) -> list[dict[str, Any]]:
    """rrf_sum, max_score (min-max within the source's list), coverage, total_chunks,
    coverage_ratio, parent_rrf, source_agreement and score_lead of every (query, parent).
    `rrf_offset` is k − 1 + rank_base."""
    per_source: dict[tuple[str, str, str], list[Hit]] = defaultdict(list)
    per_parent: dict[tuple[str, str], list[Hit]] = defaultdict(list)
    for hit in hits:
        per_source[(hit.query_id, hit.source, hit.parent_id)].append(hit)
        per_parent[(hit.query_id, hit.parent_id)].append(hit)
    evidence = _source_evidence(per_source, rrf_offset)
    sources_of_query: dict[str, set[str]] = defaultdict(set)
    for query_id, source, _ in per_source:
        sources_of_query[query_id].add(source)
    rows = []
    for (query_id, parent_id), parent_hits in sorted(per_parent.items()):
        listed = [e for key, e in evidence.items() if key[0] == query_id and key[2] == parent_id]
        n_sources = len(sources_of_query[query_id])
        pairs: dict[tuple[str, str], bool] = defaultdict(bool)
        for hit in parent_hits:
            pairs[(hit.item_id, hit.block_type)] |= hit.is_block
        known = [hit.total_chunks for hit in parent_hits if hit.total_chunks is not None]
        total = max(known) if known else None
        hit_chunks = sum(pairs.values())
        rows.append(
            {
                "query_id": query_id,
                "parent_id": parent_id,
                "rrf_sum": sum(e["rrf_part"] for e in listed),
                "max_score": max(e["hit_score"] for e in listed),
                "coverage": len({hit.block_type for hit in parent_hits}),
                "total_chunks": total or 0,
                "coverage_ratio": min(1.0, hit_chunks / total) if total else 0.0,
                "parent_rrf": sum(e["weight"] / (e["parent_rank"] + rrf_offset) for e in listed),
                "source_agreement": sum(1 / e["parent_rank"] for e in listed) / n_sources,
                "score_lead": sum(e["lead"] for e in listed) / n_sources,
            }
        )
    return rows


def _source_evidence(
    per_source: Mapping[tuple[str, str, str], list[Hit]], rrf_offset: float
) -> dict[tuple[str, str, str], dict[str, Any]]:
    lists: dict[tuple[str, str], list[tuple[str, list[Hit]]]] = defaultdict(list)
    for (query_id, source, parent_id), parent_hits in per_source.items():
        lists[(query_id, source)].append((parent_id, parent_hits))
    evidence = {}
    for (query_id, source), parents in lists.items():
        # a parent ranks by its best hit: lowest rank, then parent_id
        parents.sort(key=lambda entry: (min(h.rank for h in entry[1]), entry[0]))
        low = min(h.score for _, hs in parents for h in hs)
        high = max(h.score for _, hs in parents for h in hs)
        best_scores = [max(h.score for h in hs) for _, hs in parents]
        for position, (parent_id, parent_hits) in enumerate(parents, start=1):
            best = best_scores[position - 1]
            lead = 0.0
            if position == 1 and len(parents) > 1 and best != 0:
                lead = min(1.0, max(0.0, (best - best_scores[1]) / abs(best)))
            evidence[(query_id, source, parent_id)] = {
                "rrf_part": sum(h.weight / (h.rank + rrf_offset) for h in parent_hits),
                "hit_score": 1.0 if high == low else (best - low) / (high - low),
                "parent_rank": position,
                "weight": max(h.weight for h in parent_hits),
                "lead": lead,
            }
    return evidence
