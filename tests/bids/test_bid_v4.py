"""Policy bid_v4: seed 002 §3.2's constraints from a tender's own fields and §3.3's expression
compression (issue 50). Hand cases on the bundled tender (expected values read from
fixtures/bids/tender/*.csv and docs/bids.md, in the comments), and random queries against the
plain-Python reference tests/bids/query_reference.py."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from duckscore.bids.pipeline import score_bids
from duckscore.core.errors import InputError, PolicyError

from ..helpers import FIXTURES
from . import query_reference as ref

TENDER = FIXTURES / "bids" / "tender"
INCLUDE = ['"([^"]+)"', "“([^”]+)”", "「([^」]+)」"]
EXCLUDE = [
    r"(?:不含|不包括|排除|除去)\s*([^\s，,。；;、？?！!）)]+)",
    r"(?:excluding|without|except)\s+([^\s,.;:!?)]+)",
]
FIELDS = {
    "product_model": "entity",
    "brand": "entity",
    "certificate": "must_include",
    "region": "must_include",
    "excluded_brand": "must_exclude",
}
FILLERS = ["请问", "帮我", "麻烦", "一下", "关于", "please", "kindly", "could you"]
# sp_a..sp_c's c5_tech query and its bid_v1 candidates (tests/bids/test_tender.py)
B_TECH = ["ck11", "ck13", "ck14", "ck15", "ck16", "ck17", "ck18", "ck19", "ck30", "ck33"]


def tender(tmp_path: Path, texts: dict[str, str] | None = None, fields: str | None = None) -> Path:
    folder = tmp_path / "tender"
    shutil.copytree(TENDER, folder)
    if texts:
        queries = pd.read_csv(folder / "queries.csv")
        for query_id, text in texts.items():
            queries.loc[queries["query_id"] == query_id, "query_text"] = text
        # parquet keeps an empty text empty (an empty CSV cell is NULL)
        queries.to_parquet(folder / "queries.parquet")
        (folder / "queries.csv").unlink()
    if fields is not None:
        (folder / "tender_fields.csv").write_text(
            "tenant_id,project_id,field,value,criteria_scope\n" + fields, encoding="utf-8"
        )
    return folder


def plain(value: Any) -> Any:
    """A parquet cell as Python: a list for a list, an int for an integer."""
    return value.tolist() if hasattr(value, "tolist") else value


def scored(folder: Path, out: Path, policy: str = "bid_v4", **kw: Any) -> dict[str, Any]:
    score_bids(folder, out, policy=policy, **kw)
    dropped = pd.read_parquet(out / "filter_log.parquet")
    return {
        "queries": pd.read_parquet(out / "queries.parquet").set_index("query_id"),
        "dropped": {(r.query_id, r.chunk_id): r.dropped_by for r in dropped.itertuples()},
        "kept": {
            q: sorted(g["chunk_id"])
            for q, g in pd.read_parquet(out / "candidates.parquet").groupby("query_id")
        },
    }


FIELD_ROWS = (
    # four brands no chunk names, given in reverse order
    "t_acme,p_laptops,excluded_brand,Zhaoxin,c5_tech\n"
    "t_acme,p_laptops,excluded_brand,Xeon,c5_tech\n"
    "t_acme,p_laptops,excluded_brand,Loongson,c5_tech\n"
    "t_acme,p_laptops,excluded_brand,Hygon,c5_tech\n"
    "t_acme,p_laptops,excluded_brand,AMD,c5_tech\n"
    "t_acme,p_laptops,certificate,ＩＳＯ  9001,c2_documents\n"
    "t_acme,p_laptops,budget,500万,\n"  # a field bid_v4 does not name: not read
)


def test_a_tenders_fields_become_constraints_of_its_scoped_queries(tmp_path: Path) -> None:
    found = scored(tender(tmp_path, fields=FIELD_ROWS), tmp_path / "out")
    queries = found["queries"]
    # c5_tech: AMD, folded to lower case, must not be in a chunk; ck13 says "AMD R7"
    # every excluded brand, the field's values in order
    brands = ["amd", "hygon", "loongson", "xeon", "zhaoxin"]
    assert list(queries.at["q_b_tech", "must_exclude_terms"]) == brands
    assert list(queries.at["q_b_tech", "tender_constraints"]) == [
        f"excluded_brand: {b} (must_exclude)" for b in brands
    ]
    assert found["dropped"][("q_b_tech", "ck13")] == "must_exclude_terms"
    assert found["kept"]["q_b_tech"] == [c for c in B_TECH if c != "ck13"]
    # c2_documents: the certificate, normalised (iso 9001), compared in its standard name
    # iso_certificate; ck02 (ISO 9001:2015) passes, ck01 (a licence) was already dropped
    assert list(queries.at["q_a_docs", "must_include_terms"]) == ["iso 9001"]
    assert found["kept"]["q_a_docs"] == ["ck02"]
    # no scope for the budget, but no rule either; another tenant's queries get nothing
    for query in ("q_a_qual", "q_a_price", "q_x_tech"):
        assert list(queries.at[query, "tender_constraints"]) == [], query
    assert list(queries.at["q_x_tech", "must_exclude_terms"]) == []


def test_a_querys_own_exclusion_holds_without_tender_fields(tmp_path: Path) -> None:
    # no tender_fields table: q_b_tech's own "不含内存" still drops ck13 (16GB 内存), alone of its
    # candidates in naming 内存
    found = scored(tender(tmp_path, {"q_b_tech": "技术方案 不含内存"}), tmp_path / "out")
    assert list(found["queries"].at["q_b_tech", "must_exclude_terms"]) == ["内存"]
    assert found["dropped"][("q_b_tech", "ck13")] == "must_exclude_terms"
    assert found["kept"]["q_b_tech"] == [c for c in B_TECH if c != "ck13"]


def test_an_entity_field_takes_the_dictionarys_standard_name(tmp_path: Path) -> None:
    # 笔记本电脑 -> laptop in t_acme's dictionary: the product model's entity is laptop, so
    # q_c_qual (no entity of its own) keeps only chunks naming 笔记本电脑 or laptop: ck03 of sp_a
    # is another supplier's, and none of sp_c's chunks (ck21 ck22 ck23 ck24) names it
    rows = "t_acme,p_laptops,product_model,笔记本电脑,c1_qualification\n"
    folder = tender(tmp_path, fields=rows)
    with open(folder / "synonyms.csv", "a", encoding="utf-8") as synonyms:
        # another tenant's project of the same id: its dictionary is not t_acme's
        synonyms.write("t_other,p_laptops,笔记本电脑,notebook pc\n")
    found = scored(folder, tmp_path / "out")
    assert list(found["queries"].at["q_c_qual", "entity_constraints"]) == ["laptop"]
    c_qual = [k for k in found["dropped"] if k[0] == "q_c_qual"]
    assert all(
        found["dropped"][k] == "entity_constraints"
        for k in c_qual
        if found["dropped"][k] not in ("tenant_id", "supplier_scope", "chunk_top_k")
    )
    assert "q_c_qual" not in found["kept"]


COMPRESSED = '请问 "技术方案" 不含内存 一下 技术方案 技术方案'


def test_the_rewrite_is_compressed_and_the_retrieval_reads_it(tmp_path: Path) -> None:
    texts = {
        "q_b_tech": COMPRESSED,
        "q_b_price": '"一下" 投标报价',  # a quoted term that is a filler
        "q_c_qual": "",
        "q_a_service": "Please, kindly   list  the 👍🏽 service ,,  network??",
    }
    queries = scored(tender(tmp_path, texts), tmp_path / "out")["queries"]
    b_tech = queries.loc["q_b_tech"]
    # 请问 and 一下 removed, the second repeat of 技术方案 dropped with the space before it, the
    # spaces squeezed: 27 characters -> 16
    assert b_tech["uncompressed_query"] == COMPRESSED
    assert b_tech["rewritten_query"] == '"技术方案" 不含内存 技术方案'
    assert (b_tech["uncompressed_length"], b_tech["rewritten_length"]) == (27, 16)
    assert (
        b_tech["compression_reason"]
        == "compressed: fillers (一下, 请问); duplicate terms (技术方案)"
    )
    # removing 一下 would empty the quotes, losing the must-include term: refused
    b_price = queries.loc["q_b_price"]
    assert b_price["compression_reason"] == "refused: drops a constraint (一下)"
    assert b_price["rewritten_query"] == b_price["uncompressed_query"] == '"一下" 投标报价'
    empty = queries.loc["q_c_qual"]
    assert (empty["rewritten_query"], empty["rewritten_length"]) == ("", 0)
    assert empty["compression_reason"] == "no compression"
    # please and kindly at word boundaries; " ,, " -> ", "; "??" at the end goes; 👍🏽 is two
    # code points
    service = queries.loc["q_a_service"]
    assert service["rewritten_query"] == "list the 👍🏽 service, network"
    assert service["rewritten_length"] == 28
    assert service["compression_reason"] == "compressed: fillers (kindly, please)"


def test_a_compression_that_loses_a_number_is_refused(tmp_path: Path) -> None:
    texts = {"q_b_price": "投标报价 125万 一下 125万"}  # the repeat is a second constraint 1250000
    query = scored(tender(tmp_path, texts), tmp_path / "out")["queries"].loc["q_b_price"]
    assert query["compression_reason"] == "refused: drops a constraint (1250000)"
    assert query["rewritten_query"] == "投标报价 1250000 一下 1250000"
    assert bool(query["constraints_preserved"])


def test_a_compression_that_loses_a_date_is_refused(tmp_path: Path) -> None:
    # the rewrite's dates are kept with its text: both 2026-03-05, none lost
    texts = {"q_b_price": "投标报价 2026年3月5日 一下 2026年3月5日"}
    query = scored(tender(tmp_path, texts), tmp_path / "out")["queries"].loc["q_b_price"]
    assert query["compression_reason"] == "refused: drops a constraint (2026-03-05)"
    assert query["rewritten_query"] == "投标报价 2026-03-05 一下 2026-03-05"
    assert bool(query["constraints_preserved"]) and list(query["constraint_diff"]) == []


def test_a_compressed_rewrite_brings_its_own_numbers_and_dates(tmp_path: Path) -> None:
    # 旗舰机 -> "200 2026年3月5日" repeats the query's number and date in the rewrite; the
    # compression drops the repeats, so the compressed text holds the query's 200 and
    # 2026-03-05 once each, as the query does: its constraints are preserved
    folder = tender(tmp_path, {"q_b_price": "投标报价 200 2026年3月5日 旗舰机"})
    with open(folder / "synonyms.csv", "a", encoding="utf-8") as synonyms:
        synonyms.write("t_acme,p_laptops,旗舰机,200 2026年3月5日\n")
    query = scored(folder, tmp_path / "out")["queries"].loc["q_b_price"]
    assert query["uncompressed_query"] == "投标报价 200 2026-03-05 200 2026-03-05"
    assert query["rewritten_query"] == "投标报价 200 2026-03-05"
    assert bool(query["constraints_preserved"]) and list(query["constraint_diff"]) == []


WORDS = [
    "请问", "帮我", "一下", "关于", "please", "Please", "kindly", "pleased", "could you",
    "技术方案", "内存", "笔记本电脑", "ISO 9001", "注册资金", "注册资本", "laptop", "ssd",
    " ", "  ", "，", ",", "。", "?", "？", "、", ";", '"技术方案"', "“内存”", "「一下」",
    "不含内存", "不包括ssd", "excluding ssd", "without 内存", "500万", "1,200", "3.5",
    "2026年3月5日", "2026-13-01", "16GB", "ＩＳＯ", "e\u0301", "👍", "配置", "ck", "a", "the",
]  # fmt: skip
FIELD_VALUES = ["技术方案", "内存", "SSD", "笔记本电脑", "营业执照", "16GB", "AMD", "注册资金"]


def random_text(rng: random.Random) -> str:
    """Up to nine words, a third of them the previous word again (a duplicate term)."""
    words: list[str] = []
    for _ in range(rng.randint(0, 9)):
        words.append(words[-1] if words and rng.random() < 0.3 else rng.choice(WORDS))
    return "".join(w + rng.choice(["", " ", ", "]) for w in words)


def random_folder(tmp_path: Path, seed: int) -> tuple[Path, pd.DataFrame, pd.DataFrame]:
    rng = random.Random(seed)
    queries = pd.read_csv(TENDER / "queries.csv", dtype=str, keep_default_na=False)
    texts = {q: random_text(rng) for q in queries["query_id"]}
    criteria = pd.read_csv(TENDER / "criteria.csv", dtype=str)
    rows = []
    for _ in range(rng.randint(2, 6)):
        tenant, project, criterion = criteria.sample(1, random_state=rng.randrange(99)).iloc[0][
            ["tenant_id", "project_id", "criteria_id"]
        ]
        rows.append(
            (tenant, project, rng.choice([*FIELDS, "budget"]), rng.choice(FIELD_VALUES),
             rng.choice(["", criterion]))
        )  # fmt: skip
    fields = pd.DataFrame(
        rows, columns=["tenant_id", "project_id", "field", "value", "criteria_scope"]
    ).drop_duplicates(["tenant_id", "project_id", "field", "value"])
    folder = tender(tmp_path, texts, fields.to_csv(index=False, header=False))
    # a query for each criterion of ev_2026_01 that sp_b and sp_c have none for (no hits)
    given = pd.read_parquet(folder / "queries.parquet")
    extra = [
        {**given.iloc[0].to_dict(), "query_id": f"q_{s}_{c}", "supplier_id": s, "criteria_id": c,
         "query_text": rng.choice(WORDS) + rng.choice(WORDS), "sql_condition": None}
        for s in ("sp_b", "sp_c")
        for c in criteria[criteria["tenant_id"] == "t_acme"]["criteria_id"]
        if not ((given["supplier_id"] == s) & (given["criteria_id"] == c)).any()
    ]  # fmt: skip
    pd.concat([given, pd.DataFrame(extra)]).to_parquet(folder / "queries.parquet")
    return folder, pd.read_parquet(folder / "queries.parquet"), fields


@pytest.mark.parametrize("seed", range(3))
def test_random_queries_match_the_reference(tmp_path: Path, seed: int) -> None:
    folder, queries, fields = random_folder(tmp_path, seed)
    found = scored(folder, tmp_path / "out")
    synonyms = pd.read_csv(folder / "synonyms.csv", dtype=str)
    chunks = pd.read_csv(folder / "chunks.csv", dtype=str, keep_default_na=False)
    for q in queries.itertuples():
        syn = ref.dictionary(
            [
                (s.term, s.canonical)
                for s in synonyms.itertuples()
                if (s.tenant_id, s.project_id) == (q.tenant_id, q.project_id)
            ]
        )
        applies = [
            (f.field, f.value, FIELDS[f.field])
            for f in fields.itertuples()
            if (f.tenant_id, f.project_id) == (q.tenant_id, q.project_id)
            and f.field in FIELDS
            and f.criteria_scope in ("", q.criteria_id)
        ]
        expected = ref.query(q.query_text, syn, INCLUDE, EXCLUDE, applies, FILLERS)
        got = found["queries"].loc[q.query_id]
        for column, value in expected.items():
            if not column.startswith("_"):
                assert plain(got[column]) == value, (seed, q.query_id, q.query_text, column)
        # the three §3.2 filters on every chunk that reached them
        for (query_id, chunk_id), by in found["dropped"].items():
            if query_id == q.query_id and by.endswith(("constraints", "terms")):
                text = chunks.loc[
                    (chunks.tenant_id == q.tenant_id) & (chunks.chunk_id == chunk_id), "text"
                ].iloc[0]
                assert ref.dropped_by(expected, text, syn) == by, (seed, query_id, chunk_id)
        for chunk_id in found["kept"].get(q.query_id, []):
            text = chunks.loc[
                (chunks.tenant_id == q.tenant_id) & (chunks.chunk_id == chunk_id), "text"
            ].iloc[0]
            assert ref.dropped_by(expected, text, syn) is None, (seed, q.query_id, chunk_id)


def test_the_reference_is_bid_v3_without_compression(tmp_path: Path) -> None:
    # the same reference, compression off, gives bid_v3's rewrite guard
    texts = {"q_b_tech": COMPRESSED, "q_a_docs": "ISO 9001 一下"}
    queries = scored(tender(tmp_path, texts), tmp_path / "out", policy="bid_v3")["queries"]
    syn = ref.dictionary(
        [("笔记本电脑", "laptop"), ("ISO 9001", "iso_certificate"), ("注册资金", "注册资本")]
    )
    for query_id, text in texts.items():
        expected = ref.query(text, syn, INCLUDE, EXCLUDE)
        for column in ("query_norm", "rewritten_query", "rewrite_reason", "must_include_terms"):
            assert plain(queries.at[query_id, column]) == expected[column]


@pytest.mark.parametrize("block", ["compression", "tender_fields"])
def test_a_policy_with_one_of_the_two_blocks(tmp_path: Path, block: str) -> None:
    """bid_v3 plus bid_v4's compression alone, or its tender fields alone: that block's effect
    (as in the bid_v4 cases above), and nothing of the other's."""
    parameters = (
        {"compression": {"fillers": FILLERS}}
        if block == "compression"
        else {"constraints": {"tender_fields": FIELDS}}
    )
    policy = tmp_path / "bid_some.yaml"
    policy.write_text(json.dumps({"bid_policy_version": "bid_some", "extends": "bid_v3",
                                  "parameters": parameters}), encoding="utf-8")  # fmt: skip
    rows = FIELD_ROWS if block == "tender_fields" else None
    folder = tender(tmp_path, {"q_b_tech": COMPRESSED}, rows)
    query = scored(folder, tmp_path / "out", policy=str(policy))["queries"].loc["q_b_tech"]
    compressed = '"技术方案" 不含内存 技术方案'
    assert query["rewritten_query"] == (compressed if block == "compression" else COMPRESSED)
    assert ("compression_reason" in query, "tender_constraints" in query) == (
        block == "compression", block == "tender_fields")  # fmt: skip
    if block == "tender_fields":
        assert list(query["must_exclude_terms"]) == [
            "amd", "hygon", "loongson", "xeon", "zhaoxin", "内存"]  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            "t_acme,p_laptops,brand,\u3000 ,\n",
            r"row 1, .*field='brand'.*\): value .* is only spaces",
        ),
        ("t_acme,p_nothing,brand,x,\n", r"row 1, .*\(tenant_id, project_id\) is no project"),
        ('t_acme,p_laptops,brand,x,"c5_tech, c9"\n', "criteria_scope 'c5_tech, c9' names a"),
    ],
)
def test_bad_tender_fields_are_refused_in_one_line(tmp_path: Path, rows: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        score_bids(tender(tmp_path, fields=rows), tmp_path / "out", policy="bid_v4")
    assert not (tmp_path / "out").exists()


def test_a_policy_that_reads_no_field_refuses_the_table(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="policy bid_v3 reads no tender field"):
        score_bids(tender(tmp_path, fields=FIELD_ROWS), tmp_path / "out", policy="bid_v3")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("policy", "override", "message"),
    [
        ("bid_v2", "compression.fillers=[x]", "compression needs parameters.constraints"),
        ("bid_v4", "compression.fillers=[]", "expected at least one phrase"),
        ("bid_v4", "compression.fillers=['　']", "is only spaces"),
        ("bid_v4", "constraints.tender_fields.brand=maybe", "constraints.tender_fields.brand"),
    ],
)
def test_bad_policies_are_refused(tmp_path: Path, policy: str, override: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        score_bids(TENDER, tmp_path / "out", policy=policy, overrides=[override])
