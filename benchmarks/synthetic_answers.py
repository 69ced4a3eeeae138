"""Synthetic logged RAG answers for `duckscore answers` (seed 001), shaped like a production log.

Four Parquet files in one folder, deterministic from the seed:

  answers.parquet    answer_id (`a` + a random permutation, so the file is not in id order),
                     query_id (about two answers per query), answer_text, retrieved_count (0–40)
  chunks.parquet     0–10 reranked chunks per answer (at most retrieved_count, except for 1 % of
                     answers whose log disagrees), rerank_score in [0, 1] rounded to 4 digits (ties)
  citations.parquet  0–8 of the answer's own chunks, mostly the best-reranked ones
  events.parquet     about 2 % of answers with 1–2 streaming contradiction events, random severity

answer_text is mostly Chinese with some English (most answers ~5 % English sentences, some 30 %,
a few almost all English). Lengths are skewed: most 100–1000 characters, about 8 % under 50, a
few empty, about 3 % over 2000. Texts are sentences from a fixed pool (none contains a lexicon
term or a conclusion phrase) with, inserted between sentences: blank-line paragraph breaks
(\\n\\n mostly; also \\n \\n, \\n\\t\\n, \\r\\n\\r\\n, runs of blank lines, leading and trailing
ones) and single line breaks in about half the answers, conclusion phrases (总之, 综上所述, 因此,
所以, 综合…来看 with text and sometimes a line break between) in about 40 %, and the three
lexicons' words at per-answer rates (a hedging factor per answer, so some answers pile up
uncertain words), including overlapping ones (不清楚 around 清楚, 不确定性) and English hedges,
which answer_v1_en reads (maybe, may beside mayor, some beside sometimes, clearly, in fact).

Built with numpy and pyarrow: per batch, every answer's tokens are ordered by (answer, position)
and joined with `binary_join`; about 10 s per 1M answers.

    python benchmarks/synthetic_answers.py OUT_DIR --answers 1M [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

if __name__ == "__main__":  # `python benchmarks/synthetic_answers.py` from any folder
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.synthetic_log import _segment_positions, parse_count

GENERATOR_VERSION = 1  # bump when the data changes, so cached sets are regenerated
FILES = ("answers", "citations", "chunks", "events")
BATCH = 50_000
POOL_SENTENCES = 20_000
MAX_CHUNKS = 10
MAX_CITATIONS = 8
CORPUS_DOCUMENTS = 200_000

SCHEMAS = {
    "answers": pa.schema(
        [
            ("answer_id", pa.string()),
            ("query_id", pa.string()),
            ("answer_text", pa.string()),
            ("retrieved_count", pa.int32()),
        ]
    ),
    "citations": pa.schema([("answer_id", pa.string()), ("chunk_id", pa.string())]),
    "chunks": pa.schema(
        [("answer_id", pa.string()), ("chunk_id", pa.string()), ("rerank_score", pa.float64())]
    ),
    "events": pa.schema([("answer_id", pa.string()), ("severity", pa.string())]),
}

# Filler: none of these, nor a sentence made of them, contains a lexicon term (checked when the
# pool is built, as sentences containing one are dropped).
CHINESE_WORDS = (
    "系统",
    "数据",
    "模型",
    "检索",
    "文档",
    "用户",
    "问题",
    "方法",
    "结果",
    "分析",
    "研究",
    "技术",
    "处理",
    "信息",
    "内容",
    "过程",
    "需要",
    "通过",
    "进行",
    "提供",
    "支持",
    "使用",
    "根据",
    "其中",
    "以及",
    "对于",
    "相关",
    "主要",
    "包括",
    "重要",
    "影响",
    "作用",
    "发展",
    "实现",
    "功能",
    "方式",
    "情况",
    "条件",
    "要求",
    "标准",
    "向量",
    "索引",
    "召回",
    "排序",
    "重排",
    "片段",
    "段落",
    "章节",
    "原文",
    "作者",
    "小说",
    "人物",
    "情节",
    "故事",
    "原因",
    "背景",
    "时间",
    "地点",
    "事件",
    "关系",
    "角色",
    "主角",
    "师父",
    "弟子",
    "门派",
    "比武",
    "剑法",
    "山上",
    "城中",
    "当时",
    "后来",
    "最终",
    "首先",
    "其次",
    "然后",
    "同时",
    "此外",
    "另外",
    "例如",
    "比如",
    "特别",
    "尤其",
    "一般",
    "通常",
    "直接",
    "间接",
    "基本",
    "核心",
    "关键",
    "部分",
    "全部",
    "整体",
    "局部",
    "参数",
    "配置",
    "服务",
    "接口",
    "请求",
    "响应",
    "延迟",
    "吞吐",
    "内存",
    "磁盘",
    "线程",
    "查询",
    "表格",
    "字段",
    "记录",
    "日志",
    "版本",
    "更新",
    "修复",
    "测试",
    "评估",
    "指标",
    "准确",
    "稳定",
    "快速",
    "简单",
    "复杂",
    "合理",
    "有效",
    "正常",
    "异常",
    "错误",
    "成功",
    "失败",
    "开始",
    "结束",
    "继续",
    "完成",
    "返回",
    "输出",
    "输入",
    "生成",
    "回答",
    "引用",
    "来源",
    "证据",
    "说明",
    "解释",
    "描述",
    "总结",
    "文件",
    "目录",
    "路径",
    "格式",
)
ENGLISH_INLINE = (
    "API",
    "DuckDB",
    "Python",
    "BM25",
    "top-k",
    "embedding",
    "GPU",
    "SQL",
    "JSON",
    "RAG",
    "LLM",
    "Parquet",
    "v2",
    "OK",
    "token",
    "batch_size",
    "2024年",
)
ENGLISH_SENTENCES = (
    "The retrieved passages describe the setup in detail.",
    "See the configuration section of the manual for the exact values.",
    "The mayor of the city attended the ceremony.",
    "Sometimes the index is rebuilt overnight, which takes about an hour.",
    "This is covered in chapter 3 of the documentation.",
    "The model was fine-tuned on 12k question-answer pairs.",
    "Run the command with --threads 4 to use more cores.",
    "The results table lists precision and recall per query.",
    "In the original text, the two characters meet at the temple.",
    "Latency stays under 200 ms for most requests.",
    "The answer maybe depends on the version you run.",
    "It may help to clear the cache first.",
    "Some users report that the upload fails for large files.",
    "Clearly, the second approach is faster on large inputs.",
    "In fact, the default value is 0.5.",
    "Perhaps the retriever missed the relevant chunk.",
    "There are several ways to configure the pipeline.",
    "I think the issue is in the tokenizer.",
    "Certainly not: the flag is ignored in batch mode.",
    "The uncertainty of the estimate is reported as well.",
    "Overall, the fused ranking is more stable.",
    "Therefore the second run returns the same ids.",
)
# (term, weight) per lexicon, inserted between sentences; weights are realistic frequencies
UNCERTAIN = (
    ("可能", 30),
    ("也许", 8),
    ("大概", 8),
    ("似乎", 8),
    ("好像", 6),
    ("应该", 14),
    ("或许", 5),
    ("估计", 5),
    ("猜测", 2),
    ("不确定", 4),
    ("不清楚", 4),
    ("未知", 2),
    ("不确定性", 1),
    ("maybe ", 1),
    ("may ", 1),
)
VAGUE = (
    ("一些", 30),
    ("某些", 10),
    ("若干", 3),
    ("多个", 12),
    ("少量", 4),
    ("大量", 10),
    ("很多", 14),
    ("不少", 6),
    ("较多", 4),
    ("较少", 4),
    ("some ", 1),
    ("several ", 1),
)
ASSERTIVE = (
    ("确实", 10),
    ("明确", 12),
    ("清楚", 6),
    ("显然", 6),
    ("毫无疑问，", 2),
    ("事实上，", 6),
    ("实际上，", 8),
    ("具体来说，", 10),
    ("clearly ", 1),
    ("in fact, ", 1),
)
CONCLUSIONS = (
    ("总之，", 20),
    ("综上所述，", 20),
    ("因此", 25),
    ("所以", 20),
    ("综合以上分析来看，", 6),
    ("综合来看，", 4),
    ("综合\n上述几点来看，", 2),
    ("总之", 1),
    ("In summary, ", 2),
)
BREAKS = (
    ("\n\n", 80),
    ("\n\n\n", 5),
    ("\n \n", 5),
    ("\n\t\n", 2),
    ("\r\n\r\n", 3),
    ("\n\n  \n", 1),
)
LINE_BREAKS = (("\n", 6), ("\n- ", 2), ("\n1. ", 1), ("\n2. ", 1), ("  \n", 1))
SEVERITIES = ("high", "medium", "low")


def _sentence_pool(rng: np.random.Generator, forbidden: tuple[str, ...]) -> list[str]:
    """Chinese sentences of 2–14 words (some with an English word inside) plus English ones."""
    words = np.array(CHINESE_WORDS + ENGLISH_INLINE, dtype=object)
    weights = np.r_[np.ones(len(CHINESE_WORDS)), np.full(len(ENGLISH_INLINE), 0.15)]
    weights /= weights.sum()
    sizes = rng.integers(2, 15, POOL_SENTENCES)
    picks = rng.choice(len(words), sizes.sum(), p=weights)
    commas = rng.random(sizes.sum()) < 0.15
    sentences, at = [], 0
    for size in sizes:
        span = slice(at, at + size)
        parts = [words[i] + ("，" if comma else "") for i, comma in zip(picks[span], commas[span])]
        at += size
        sentence = "".join(parts).rstrip("，") + ("？" if rng.random() < 0.03 else "。")
        if not any(term in sentence for term in forbidden):
            sentences.append(sentence)
    return sentences + list(ENGLISH_SENTENCES) * 10


class Vocabulary:
    """Every token a text is made of, in one Arrow array, with the index ranges of each kind."""

    def __init__(self, rng: np.random.Generator) -> None:
        kinds = {
            "uncertain": UNCERTAIN,
            "vague": VAGUE,
            "assertive": ASSERTIVE,
            "conclusion": CONCLUSIONS,
            "break": BREAKS,
            "line": LINE_BREAKS,
        }
        forbidden = tuple(
            term.strip(" ，,\n").lower()
            for name in ("uncertain", "vague", "assertive")
            for term, _ in kinds[name]
        ) + ("总之", "综上", "因此", "所以", "综合")
        pool = _sentence_pool(rng, forbidden)
        self.english_first = pool.index(ENGLISH_SENTENCES[0])
        self.sentences = len(pool)
        tokens = list(pool)
        self.kinds: dict[str, tuple[int, np.ndarray]] = {}  # kind: first index, probabilities
        for name, entries in kinds.items():
            weights = np.array([w for _, w in entries], dtype=float)
            self.kinds[name] = (len(tokens), weights / weights.sum())
            tokens += [term for term, _ in entries]
        self.tokens = pa.array(tokens, pa.string())
        self.lengths = pc.utf8_length(self.tokens).to_numpy()

    def draw(self, rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
        first, p = self.kinds[kind]
        return first + rng.choice(len(p), n, p=p)


def _target_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """Characters wanted per answer: most 100–1000, some short, some very long."""
    bucket = rng.choice(6, n, p=[0.0005, 0.08, 0.06, 0.7495, 0.08, 0.03])
    lengths = np.select(
        [bucket == 0, bucket == 1, bucket == 2, bucket == 3, bucket == 4],
        [
            np.zeros(n),
            rng.uniform(4, 50, n),
            rng.uniform(50, 100, n),
            np.clip(rng.lognormal(np.log(380), 0.55, n), 100, 1000),
            rng.uniform(1000, 2000, n),
        ],
        rng.uniform(2000, 5000, n),
    )
    return lengths.astype(np.int64)


def _texts(rng: np.random.Generator, vocab: Vocabulary, n: int) -> pa.Array:
    target = _target_lengths(rng, n)
    english_share = rng.choice([0.05, 0.3, 0.9], n, p=[0.85, 0.12, 0.03])
    hedging = rng.gamma(0.7, 1.0 / 0.7, n)  # mean 1: most answers hedge a little, some a lot
    zh = vocab.lengths[: vocab.english_first].mean()
    en = vocab.lengths[vocab.english_first : vocab.sentences].mean()
    mean_sentence = (1 - english_share) * zh + english_share * en + 2  # + the inserted words
    sentences = np.where(target == 0, 0, np.maximum(1, np.round(target / mean_sentence))).astype(
        np.int64
    )

    owner, position = _per_answer(sentences)  # sentence tokens, in order
    english = rng.random(len(owner)) < english_share[owner]
    token = np.where(
        english,
        rng.integers(vocab.english_first, vocab.sentences, len(owner)),
        rng.integers(0, vocab.english_first, len(owner)),
    )
    pieces = [(owner, position + 0.5, token)]

    def insert(kind: str, counts: np.ndarray, near_end: float = 0.0) -> None:
        at = np.repeat(np.arange(n), counts)
        room = sentences[at]
        where = rng.uniform(0, room + 0.999)  # between sentences (also first or last)
        if near_end:  # conclusions: mostly before the last sentence or two
            late = rng.random(len(at)) < near_end
            where = np.where(late, np.maximum(room - rng.uniform(0.6, 2.0, len(at)), 0), where)
        pieces.append((at, where, vocab.draw(rng, kind, len(at))))

    spoken = sentences > 0
    insert("uncertain", rng.poisson(0.045 * sentences * hedging) * spoken)
    insert("vague", rng.poisson(0.06 * sentences * np.sqrt(hedging)) * spoken)
    insert(
        "assertive", rng.poisson(0.04 * sentences * np.clip(1.5 - 0.5 * hedging, 0.2, 1.5)) * spoken
    )
    concluding = (rng.random(n) < np.clip(0.15 + 0.03 * sentences, 0, 0.6)) & spoken
    insert(
        "conclusion", concluding.astype(np.int64) + (rng.random(n) < 0.05) * spoken, near_end=0.8
    )
    multi = (rng.random(n) < np.clip(0.1 + 0.05 * sentences, 0, 0.85)) & (sentences > 1)
    insert("break", multi * np.minimum(1 + rng.poisson(sentences / 5), sentences))
    insert("line", (rng.random(n) < 0.3) * rng.poisson(sentences / 6) * spoken)

    owner, position, token = (np.concatenate(parts) for parts in zip(*pieces))
    order = np.lexsort((position, owner))
    counts = np.bincount(owner, minlength=n)
    offsets = pa.array(np.r_[0, np.cumsum(counts)].astype(np.int32))
    words = pa.ListArray.from_arrays(offsets, vocab.tokens.take(pa.array(token[order])))
    return pc.binary_join(words, "")


def _ids(prefix: str, numbers: np.ndarray, width: int) -> pa.Array:
    digits = pc.utf8_lpad(pc.cast(pa.array(numbers), pa.string()), width, "0")
    return pc.binary_join_element_wise(pa.scalar(prefix), digits, "")


def _per_answer(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row owners (answer index) and 0-based positions within the answer for `counts` rows each."""
    owner = np.repeat(np.arange(len(counts)), counts)
    if not len(owner):
        return owner, owner
    return owner, _segment_positions(np.r_[True, owner[1:] != owner[:-1]])


def _batch(
    rng: np.random.Generator, vocab: Vocabulary, ids: np.ndarray, n_total: int
) -> dict[str, pa.Table]:
    n = len(ids)
    width = len(str(max(n_total - 1, 1)))
    answer_ids = _ids("a", ids, width)
    query_ids = _ids("q", rng.integers(0, max(1, n_total // 2), n), width)
    usual = rng.choice(
        [5, 10, 20, 30, 40], n, p=[0.1, 0.35, 0.3, 0.15, 0.1]
    )  # the app's top-k settings
    retrieved = np.where(rng.random(n) < 0.03, 0, usual)
    retrieved = np.where(rng.random(n) < 0.3, rng.integers(0, 41, n), retrieved)

    wanted = rng.choice(
        MAX_CHUNKS + 1, n, p=np.r_[0.04, np.full(4, 0.04), 0.3, np.full(4, 0.05), 0.3]
    )
    inconsistent = rng.random(n) < 0.01  # the log has more chunks than it says were retrieved
    n_chunks = np.where(inconsistent, wanted, np.minimum(wanted, retrieved))
    owner, position = _per_answer(n_chunks)
    quality = rng.beta(2.0, 2.0, n)  # per answer: how relevant its retrieval was
    score = np.clip(
        np.round(rng.beta(1.0 + 4 * quality[owner], 1.0 + 4 * (1 - quality[owner])), 4), 0.0, 1.0
    )
    chunk_ids = pc.binary_join_element_wise(
        _ids("d", rng.integers(0, CORPUS_DOCUMENTS, len(owner)), 6), _ids("#c", position, 2), ""
    )
    chunks = pa.table(
        {
            "answer_id": answer_ids.take(pa.array(owner)),
            "chunk_id": chunk_ids,
            "rerank_score": score,
        },
        schema=SCHEMAS["chunks"],
    )

    n_cited = np.minimum(
        n_chunks,
        rng.choice(MAX_CITATIONS + 1, n, p=[0.1, 0.12, 0.18, 0.18, 0.14, 0.12, 0.08, 0.05, 0.03]),
    )
    preference = np.lexsort(
        (-(score + rng.normal(0, 0.15, len(owner))), owner)
    )  # best first per answer
    cited_rank = np.empty(len(owner), np.int64)
    cited_rank[preference] = position  # rows are grouped by answer, so positions line up
    cited = np.flatnonzero(cited_rank < n_cited[owner])
    citations = pa.table(
        {
            "answer_id": chunks["answer_id"].take(pa.array(cited)),
            "chunk_id": chunk_ids.take(pa.array(cited)),
        },
        schema=SCHEMAS["citations"],
    )

    n_events = (rng.random(n) < 0.02) * rng.integers(1, 3, n)
    event_owner, _ = _per_answer(n_events)
    events = pa.table(
        {
            "answer_id": answer_ids.take(pa.array(event_owner)),
            "severity": pa.array(
                np.array(SEVERITIES, dtype=object)[
                    rng.choice(3, len(event_owner), p=[0.25, 0.35, 0.4])
                ],
                pa.string(),
            ),
        },
        schema=SCHEMAS["events"],
    )

    answers = pa.table(
        {
            "answer_id": answer_ids,
            "query_id": query_ids,
            "answer_text": _texts(rng, vocab, n),
            "retrieved_count": retrieved.astype(np.int32),
        },
        schema=SCHEMAS["answers"],
    )
    return {"answers": answers, "citations": citations, "chunks": chunks, "events": events}


def generate(out_dir: str | Path, n_answers: int, seed: int = 1) -> dict[str, int]:
    """Write answers/citations/chunks/events.parquet for `n_answers` answers into `out_dir`;
    return the rows of each."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocab = Vocabulary(rng)
    ids = rng.permutation(n_answers)
    rows = dict.fromkeys(FILES, 0)
    writers = {
        name: pq.ParquetWriter(out / f"{name}.parquet", SCHEMAS[name], compression="snappy")
        for name in FILES
    }
    try:
        for first in range(0, n_answers, BATCH):
            for name, table in _batch(rng, vocab, ids[first : first + BATCH], n_answers).items():
                writers[name].write_table(table)
                rows[name] += table.num_rows
    finally:
        for writer in writers.values():
            writer.close()
    return rows


def text_facts(answers: Path) -> dict[str, float]:
    """Length quantiles and the share of short, long and multi-paragraph answers."""
    texts = pq.read_table(answers, columns=["answer_text"])["answer_text"]
    lengths = pc.utf8_length(texts).to_numpy()
    shares = {
        "under_50": lengths < 50,
        "100_to_1000": (lengths >= 100) & (lengths <= 1000),
        "over_2000": lengths > 2000,
        "with_blank_line": pc.match_substring_regex(texts, r"\n[\t\n\f\r ]*\n").to_numpy(False),
    }
    return {
        "characters": int(lengths.sum()),
        "bytes": int(pc.sum(pc.binary_length(texts)).as_py() or 0),
        **{
            f"length_{name}": float(np.percentile(lengths, q))
            for name, q in (("p10", 10), ("median", 50), ("p90", 90), ("max", 100))
        },
        **{f"share_{name}": float(np.mean(flags)) for name, flags in shares.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder to write the four Parquet files to")
    parser.add_argument("--answers", type=parse_count, default=parse_count("1M"))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rows = generate(args.out, args.answers, args.seed)
    print(json.dumps({"rows": rows, "text": text_facts(args.out / "answers.parquet")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
