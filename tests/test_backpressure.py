"""When the engine falls behind, the worker answers with bounded delay instead of queueing
without limit; a chatty session's token budget degrades its updates, not its final summary."""

from __future__ import annotations

import pytest

from service.sessions import Session, apply_published, over_budget
from service.replay import load_conversations

from .conftest import REPO, RunningWorker, chat_event, collect, producer

SAMPLES = [c for c in load_conversations(REPO / "samples" / "conversations.jsonl") if len(c["messages"]) <= 8]


def test_token_budget_is_per_window():
    s = Session(session_id="s", partition=0)
    apply_published(s, 1, tokens=900, now=100.0, budget_window_s=60.0)
    assert not over_budget(s, 110.0, budget=1000, window_s=60.0)
    apply_published(s, 2, tokens=200, now=120.0, budget_window_s=60.0)
    assert over_budget(s, 130.0, budget=1000, window_s=60.0)
    assert not over_budget(s, 161.0, budget=1000, window_s=60.0)  # a new window
    apply_published(s, 3, tokens=10, now=170.0, budget_window_s=60.0)
    assert s.tokens_used == 10
    assert not over_budget(s, 130.0, budget=0, window_s=60.0)  # 0: no limit


@pytest.mark.asyncio(loop_scope="session")
async def test_engine_behind_gives_overload_fallbacks_and_loses_nothing(settings, summarizer):
    settings = settings.model_copy(update={"max_inflight": 1, "max_queue_wait_s": 0.5, "trigger_user_messages": 100})
    conversations = SAMPLES[:4]
    running = RunningWorker(settings, summarizer)
    await running.start()
    try:
        p = producer(settings)
        for conv in conversations:
            sid = conv["session_id"]
            for i, m in enumerate(conv["messages"]):
                p.produce(settings.topic_events, key=sid.encode(), value=chat_event(sid, i, m["role"], m["text"], i == len(conv["messages"]) - 1))
        p.flush(10)
        wanted = {c["session_id"] for c in conversations}
        events = await collect(settings, settings.topic_summaries, lambda es: wanted <= {
            e["session_id"] for e in es if e["status"] != "partial"}, 240)
    finally:
        await running.stop()
    finals = {e["session_id"]: e for e in events if e["status"] != "partial"}
    assert set(finals) == wanted  # every conversation answered
    reasons = [f["fallback_reason"] for f in finals.values()]
    # One engine slot, four conversations due at once: those that waited past 0.5 s were
    # answered with an overload fallback right away.
    assert reasons.count("overload") >= 2
    assert all(f["timings"]["latency_ms"] < 60_000 for f in finals.values())
