"""Agent feedback becomes shared few-shot knowledge: a corrected summary is retrieved for a
similar new conversation, also after a worker restart; a rejected one is excluded."""

from __future__ import annotations

import asyncio

import pytest

from service.contracts import FeedbackEvent, summary_id_for
from service.fewshot import CaseIndex, FewShotRetriever, load_cases
from service.sessions import Message
from service.summarizer import Summarizer

from .conftest import REPO, RunningWorker, chat_event, collect, producer

pytestmark = pytest.mark.asyncio(loop_scope="session")

TRADE_IN = [
    ("user", "你好，我想问下你们的以旧换新活动，旧冰箱能抵多少钱"),
    ("agent", "您好，以旧换新需要先在活动页估价哦"),
    ("user", "估价页面一直打不开，旧冰箱是海尔的用了八年"),
    ("user", "能不能直接帮我登记一下以旧换新，上门回收旧冰箱"),
]
SIMILAR = [Message(role="user", text="以旧换新怎么弄？我家旧洗衣机想换台新的，回收能抵扣吗", ts=0.0),
           Message(role="user", text="上门回收旧家电要不要钱", ts=0.0)]


def fresh_summarizer(summarizer: Summarizer, settings) -> Summarizer:
    """Its own index (from the curated file; the embedding cache makes this quick)."""
    index = CaseIndex(summarizer.retriever.index.embedder, settings.cache_dir / "index")
    index.build(load_cases(REPO / "fewshot" / "cases.jsonl"))
    return Summarizer(summarizer.engine, FewShotRetriever(index, k=3), summarizer.policy)


async def wait_for(predicate, timeout_s: float = 30.0) -> bool:
    for _ in range(int(timeout_s / 0.2)):
        if predicate():
            return True
        await asyncio.sleep(0.2)
    return predicate()


async def test_corrected_summary_is_retrieved_for_a_similar_chat_also_after_restart(settings, summarizer):
    settings = settings.model_copy(update={"feedback_window_s": 600.0})
    sid = "trade-in-1"
    own = fresh_summarizer(summarizer, settings)
    running = RunningWorker(settings, own)
    await running.start()
    p = producer(settings)
    for i, (role, text) in enumerate(TRADE_IN):
        p.produce(settings.topic_events, key=sid.encode(), value=chat_event(sid, i, role, text, i == len(TRADE_IN) - 1))
    p.flush(10)
    finals = await collect(settings, settings.topic_summaries,
                           lambda es: any(e["status"] != "partial" and e["trigger"] == "end_of_chat" for e in es), 180)
    final = [e for e in finals if e["status"] != "partial"][-1]
    # A full correction: it makes a case whether the summary was ok or a fallback (no fields).
    corrected = {"item_id": "", "request_type": "其他", "sentiment": "中性", "summary_text": "客户咨询以旧换新上门回收旧冰箱"}
    feedback = FeedbackEvent(summary_id=summary_id_for(sid), session_id=sid, version=final["version"],
                             verdict="reject", error_type="类型错误", corrected=corrected)
    p.produce(settings.topic_feedback, key=sid.encode(), value=feedback.model_dump_json().encode())
    p.flush(10)
    index = own.retriever.index
    assert await wait_for(lambda: any(c.case_id == summary_id_for(sid) for c in index.cases)), "the case was not learned"
    learned = next(c for c in index.cases if c.case_id == summary_id_for(sid))
    assert learned.answer["request_type"] == "其他" and learned.answer["summary_text"] == corrected["summary_text"]
    assert learned.source == "feedback" and all(t.text for t in learned.transcript)
    retrieved = await own.retriever.retrieve(SIMILAR)
    assert summary_id_for(sid) in [c.case_id for c in retrieved]
    await running.stop()

    # A restarted worker starts from the curated file and reads the learned cases back.
    again = fresh_summarizer(summarizer, settings)
    assert not any(c.source == "feedback" for c in again.retriever.index.cases)
    restarted = RunningWorker(settings, again)
    await restarted.start()
    try:
        assert await wait_for(lambda: any(c.case_id == summary_id_for(sid) for c in again.retriever.index.cases))
        retrieved = await again.retriever.retrieve(SIMILAR)
        assert summary_id_for(sid) in [c.case_id for c in retrieved]

        # A plain rejection (no correction) excludes the case from retrieval everywhere.
        p.produce(settings.topic_feedback, key=sid.encode(), value=FeedbackEvent(
            summary_id=summary_id_for(sid), session_id=sid, version=final["version"], verdict="reject",
            error_type="摘要冗长").model_dump_json().encode())
        p.flush(10)
        assert await wait_for(lambda: summary_id_for(sid) in again.retriever.index.excluded)
        retrieved = await again.retriever.retrieve(SIMILAR)
        assert summary_id_for(sid) not in [c.case_id for c in retrieved]
    finally:
        await restarted.stop()


async def test_malformed_feedback_goes_to_the_dlq(settings, summarizer):
    running = RunningWorker(settings, summarizer)
    await running.start()
    try:
        p = producer(settings)
        p.produce(settings.topic_feedback, key=b"s", value=b'{"verdict": "maybe"}')
        p.flush(10)
        letters = await collect(settings, settings.topic_dlq, lambda e: len(e) >= 1, 30)
    finally:
        await running.stop()
    assert [(l["reason"], l["topic"]) for l in letters] == [("schema_violation", settings.topic_feedback)]
