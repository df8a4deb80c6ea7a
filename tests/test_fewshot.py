"""The case index: cosine top-k with its two guards, the on-disk cache, and the library format."""

from __future__ import annotations

import json

import numpy as np

from service.contracts import REQUEST_TYPES, SENTIMENTS, SummaryFields
from service.fewshot import CaseIndex, CaseTurn, FewShotCase, query_text

from .conftest import REPO


class AxisEmbedder:
    """Maps known texts to fixed unit vectors so the ranking is known in advance."""

    name = "axes"

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        rows = np.array([self.table[t] for t in texts], dtype=np.float32)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def case(cid: str, text: str, request_type: str) -> FewShotCase:
    return FewShotCase(cid, [CaseTurn("user", text)], {"item_id": "", "request_type": request_type,
                                                        "sentiment": "中性", "summary_text": text})


def test_top_k_skips_near_duplicates_and_keeps_a_contrast_of_types(tmp_path):
    table = {"a": [1, 0, 0], "a2": [1, 0.01, 0], "b": [0.9, 0.3, 0], "c": [0.8, 0.5, 0], "d": [0, 0, 1]}
    index = CaseIndex(AxisEmbedder(table), tmp_path)
    index.build([case("a", "a", "退换货"), case("a2", "a2", "退换货"), case("b", "b", "退换货"),
                 case("c", "c", "退换货"), case("d", "d", "其他")])
    got = [c.case_id for c in index.search(np.array([1, 0, 0], dtype=np.float32), 3)]
    assert "a2" not in got  # near-duplicate of a
    assert got[-1] == "a"  # most similar last, next to the transcript
    assert {index.cases[[c.case_id for c in index.cases].index(g)].answer["request_type"] for g in got} == {"退换货", "其他"}


def test_excluded_cases_are_never_returned(tmp_path):
    table = {"a": [1, 0], "b": [0, 1]}
    index = CaseIndex(AxisEmbedder(table), tmp_path)
    index.build([case("a", "a", "其他"), case("b", "b", "其他")])
    index.exclude("a")
    assert [c.case_id for c in index.search(np.array([1, 0], dtype=np.float32), 2)] == ["b"]


def test_embeddings_are_cached_on_disk_by_model_and_content(tmp_path):
    embedder = AxisEmbedder({"a": [1, 0], "b": [0, 1]})
    CaseIndex(embedder, tmp_path).build([case("a", "a", "其他")])
    CaseIndex(embedder, tmp_path).build([case("a", "a", "其他")])
    assert embedder.calls == 1
    CaseIndex(embedder, tmp_path).build([case("a", "a", "其他"), case("b", "b", "其他")])
    assert embedder.calls == 2


def test_curated_library_is_valid_and_covers_every_type_and_sentiment():
    rows = [json.loads(line) for line in (REPO / "fewshot" / "cases.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 60
    for row in rows:
        SummaryFields.model_validate(row["summary"])
        assert row["transcript"] and row["case_id"]
    assert {r["summary"]["request_type"] for r in rows} == set(REQUEST_TYPES)
    assert {r["summary"]["sentiment"] for r in rows} == set(SENTIMENTS)
    assert len({r["case_id"] for r in rows}) == len(rows)


async def test_queries_that_arrive_while_a_batch_encodes_are_answered(tmp_path):
    """The first batch is held inside its encoding thread while more sessions ask; each must get
    its cases (they were once stranded in the queue, and their summaries hung)."""
    import asyncio
    import threading

    from service.fewshot import FewShotRetriever
    from service.sessions import Message

    embedder = AxisEmbedder({"a": [1, 0, 0], "b": [0, 1, 0]} | {t: [1, 0.1 * i, 0] for i, t in enumerate("uvwxyz")})
    index = CaseIndex(embedder, tmp_path)
    index.build([case("a", "a", "退换货"), case("b", "b", "其他")])
    release = threading.Event()
    encode = embedder.encode

    def held(texts):
        if embedder.calls == 1:  # the first query batch (the index build was call 0)
            release.wait(10)  # made slow on purpose, inside its thread
        return encode(texts)

    embedder.encode = held
    retriever = FewShotRetriever(index, k=1)
    turns = {t: [Message(role="user", text=t, ts=0.0)] for t in "uvwxyz"}
    first = asyncio.ensure_future(retriever.retrieve(turns["u"]))
    await asyncio.sleep(0.05)  # the first batch is in its thread now
    later = [asyncio.ensure_future(retriever.retrieve(turns[t])) for t in "vwxyz"]
    await asyncio.sleep(0.05)
    release.set()
    results = await asyncio.wait_for(asyncio.gather(first, *later), 10)
    assert [r[0].case_id for r in results] == ["a"] * 6
    assert embedder.calls == 3  # the build, the first query, the late five in one batch


def test_the_query_is_the_customers_words_and_a_long_chat_keeps_its_opening():
    short = [CaseTurn(role="user", text="订单A123 鞋子开胶"), CaseTurn(role="agent", text="抱歉"),
             CaseTurn(role="user", text="要退货")]
    assert query_text(short) == "订单A123 鞋子开胶 要退货"
    waited = [CaseTurn(role="user", text="鞋子穿了两天就开胶了，要退货")] + [CaseTurn(role="user", text="还在吗？")] * 200
    query = query_text(waited)
    assert len(query) == 400
    assert query.startswith("鞋子穿了两天就开胶了，要退货") and query.endswith("还在吗？")
