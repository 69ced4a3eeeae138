"""Synthetic multi-source retrieval logs shaped like production RAG logs, for the benchmarks.

Per query: about 16 candidate parents drawn from a 400k-parent corpus with Zipf(0.9)
popularity; each parent has 3–76 chunks (1 intro, 1–3 ingredients, a log-normal number of
operation blocks, 0–3 additional); two chunk-level sources (sparse: BM25-like 0..70, dense:
cosine-like 0..1) return their top 24–43 chunks, a doc-level source (summary, block type
`summary`) its top parents. Scores share a latent relevance per parent plus per-source noise, so sources overlap.
Rows are written in (query_id, source, rank) order with string ids (`q0000123`,
`r0012345`, `r0012345#c007`), 131,072-row row groups.

    python benchmarks/synthetic_log.py OUT.parquet --rows 10M [--seed 7]
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

CORPUS_PARENTS = 400_000
ZIPF_EXPONENT = 0.9
BLOCK_TYPES = ("intro", "ingredients", "operation", "additional")
MAX_CHUNKS = 76
ROW_GROUP = 131_072
ROWS_PER_QUERY = 82  # the generator's mean, measured; used only to size the query count
QUERIES_PER_BATCH = 20_000

SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("source", pa.string()),
        ("item_id", pa.string()),
        ("parent_id", pa.string()),
        ("score", pa.float64()),
        ("rank", pa.int32()),
        ("granularity", pa.string()),
        ("block_type", pa.string()),
        ("total_chunks", pa.int32()),
    ]
)


@dataclass(frozen=True)
class Corpus:
    popularity_cdf: np.ndarray  # Zipf popularity over parents
    total_chunks: np.ndarray  # per parent
    n_ingredients: np.ndarray  # per parent: chunks 1..n are ingredients
    n_additional: np.ndarray  # per parent: the last n chunks are additional
    parent_ids: pa.Array  # r0000000 …
    chunk_suffixes: pa.Array  # #c000 …


def make_corpus(rng: np.random.Generator) -> Corpus:
    weights = 1.0 / np.arange(1, CORPUS_PARENTS + 1) ** ZIPF_EXPONENT
    rng.shuffle(weights)
    n_ingredients = rng.integers(1, 4, CORPUS_PARENTS)
    n_additional = rng.integers(0, 4, CORPUS_PARENTS)
    n_operation = np.clip(np.round(rng.lognormal(2.0, 0.6, CORPUS_PARENTS)), 1, None).astype(
        np.int64
    )
    total = np.clip(1 + n_ingredients + n_operation + n_additional, 3, MAX_CHUNKS)
    return Corpus(
        popularity_cdf=np.cumsum(weights) / weights.sum(),
        total_chunks=total,
        n_ingredients=n_ingredients,
        n_additional=np.minimum(n_additional, total - 1 - n_ingredients - 1),
        parent_ids=pa.array([f"r{i:07d}" for i in range(CORPUS_PARENTS)]),
        chunk_suffixes=pa.array([f"#c{i:03d}" for i in range(MAX_CHUNKS)]),
    )


def _segment_positions(starts_flag: np.ndarray) -> np.ndarray:
    """0-based position of each element within its run, where runs begin at True."""
    index = np.arange(len(starts_flag))
    run_start = np.maximum.accumulate(np.where(starts_flag, index, 0))
    return index - run_start


def _ranked(
    query: np.ndarray, score: np.ndarray, keys: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Order rows by (query, score desc, key) and return that order and the 1-based ranks."""
    order = np.lexsort((keys, -score, query))
    sorted_query = query[order]
    new_query = np.ones(len(order), dtype=bool)
    new_query[1:] = sorted_query[1:] != sorted_query[:-1]
    return order, _segment_positions(new_query) + 1


def _sample_parents(
    rng: np.random.Generator, corpus: Corpus, n_queries: int
) -> tuple[np.ndarray, np.ndarray]:
    per_query = np.clip(rng.poisson(16, n_queries), 4, 30)
    query = np.repeat(np.arange(n_queries), per_query)
    parent = np.searchsorted(corpus.popularity_cdf, rng.random(len(query)))
    parent = np.minimum(parent, CORPUS_PARENTS - 1)
    pairs = np.unique(query.astype(np.int64) * CORPUS_PARENTS + parent)
    return pairs // CORPUS_PARENTS, pairs % CORPUS_PARENTS


def _block_types(corpus: Corpus, parent: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    kind = np.full(len(chunk), 2, dtype=np.int8)  # operation
    kind[chunk <= corpus.n_ingredients[parent]] = 1
    kind[chunk >= corpus.total_chunks[parent] - corpus.n_additional[parent]] = 3
    kind[chunk == 0] = 0
    return kind


def _batch(rng: np.random.Generator, corpus: Corpus, first_query: int, n_queries: int) -> pa.Table:
    query, parent = _sample_parents(rng, corpus, n_queries)
    relevance = rng.exponential(1.0, len(parent))
    chunks_per_parent = corpus.total_chunks[parent]
    chunk_owner = np.repeat(np.arange(len(parent)), chunks_per_parent)
    new_parent = np.ones(len(chunk_owner), dtype=bool)
    new_parent[1:] = chunk_owner[1:] != chunk_owner[:-1]
    chunk = _segment_positions(new_parent)
    chunk_relevance = relevance[chunk_owner] + rng.normal(0.0, 0.5, len(chunk_owner))
    top_k = rng.integers(24, 44, (n_queries, 3))

    pieces = []
    for source_index, (source, scale, noise) in enumerate(
        (("dense", 0.15, 0.6), ("sparse", 12.0, 0.9), ("summary", 0.15, 0.5))
    ):
        if source == "summary":
            owner, latent, chunk_no = (
                np.arange(len(parent)),
                relevance,
                np.zeros(len(parent), np.int64),
            )
        else:
            owner, latent, chunk_no = chunk_owner, chunk_relevance, chunk
        raw = latent + rng.normal(0.0, noise, len(owner))
        score = (scale * raw + (0.3 if scale < 1 else 25.0)).round(6)
        order, rank = _ranked(query[owner], score, owner * MAX_CHUNKS + chunk_no)
        keep = rank <= top_k[query[owner[order]], source_index]
        picked, rank = order[keep], rank[keep]
        pieces.append((source, owner[picked], chunk_no[picked], score[picked], rank))

    sources = pa.array(
        np.concatenate([np.full(len(p[1]), i, np.int8) for i, p in enumerate(pieces)])
    )
    owner = np.concatenate([p[1] for p in pieces])
    chunk_no = np.concatenate([p[2] for p in pieces])
    is_doc = np.concatenate([np.full(len(p[1]), p[0] == "summary") for p in pieces])
    rows_query = query[owner]
    rows_parent = parent[owner]
    parent_ids = corpus.parent_ids.take(pa.array(rows_parent))
    item_ids = pc.if_else(
        pa.array(is_doc),
        parent_ids,
        pc.binary_join_element_wise(parent_ids, corpus.chunk_suffixes.take(pa.array(chunk_no)), ""),
    )
    block = _block_types(corpus, rows_parent, chunk_no)
    table = pa.table(
        {
            "query_id": pa.array([f"q{first_query + q:07d}" for q in range(n_queries)]).take(
                pa.array(rows_query)
            ),
            "source": pa.DictionaryArray.from_arrays(sources, ["dense", "sparse", "summary"]).cast(
                pa.string()
            ),
            "item_id": item_ids,
            "parent_id": parent_ids,
            "score": np.concatenate([p[3] for p in pieces]),
            "rank": np.concatenate([p[4] for p in pieces]).astype(np.int32),
            "granularity": pa.array(np.where(is_doc, "doc", "block")),
            "block_type": pa.array(
                np.where(is_doc, "summary", np.array(BLOCK_TYPES, dtype=object)[block])
            ),
            "total_chunks": corpus.total_chunks[rows_parent].astype(np.int32),
        },
        schema=SCHEMA,
    )
    order = np.lexsort((table["rank"].to_numpy(), sources.to_numpy(), rows_query))
    return table.take(pa.array(order))


def generate(path: str, rows: int, seed: int = 7) -> int:
    """Write a log of about `rows` rows (whole queries) to `path`; return the rows written."""
    rng = np.random.default_rng(seed)
    corpus = make_corpus(rng)
    n_queries = max(1, round(rows / ROWS_PER_QUERY))
    written = 0
    with pq.ParquetWriter(path, SCHEMA, compression="snappy") as writer:
        for first in range(0, n_queries, QUERIES_PER_BATCH):
            table = _batch(rng, corpus, first, min(QUERIES_PER_BATCH, n_queries - first))
            writer.write_table(table, row_group_size=ROW_GROUP)
            written += table.num_rows
    return written


def parse_count(text: str) -> int:
    """`30M`, `1.5M`, `200k` or a plain integer."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a row count such as 200k, 10M or 30000000"
        )
    number, unit = float(match.group(1)), match.group(2).lower()
    return int(number * {"": 1, "k": 1_000, "m": 1_000_000}[unit])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the Parquet file to write")
    parser.add_argument(
        "--rows", type=parse_count, default=parse_count("1M"), help="about this many rows"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"{generate(args.out, args.rows, args.seed):,} rows -> {args.out}")


if __name__ == "__main__":
    main()
