"""End to end through the real broker and the real engine: chat events in, summaries out."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict

import jsonschema
import pytest

from service.contracts import SummaryEvent, summary_id_for
from service.replay import load_conversations

from .conftest import REPO, RunningWorker, chat_event, collect, producer

pytestmark = pytest.mark.asyncio(loop_scope="session")
SUMMARY_SCHEMA = json.loads((REPO / "schemas" / "summary_event.json").read_text())


def sample_conversations(n: int) -> list[dict]:
    return [c for c in load_conversations(REPO / "samples" / "conversations.jsonl") if len(c["messages"]) <= 10][:n]


def finals_for(sessions: set[str]):
    def done(events: list[dict]) -> bool:
        return sessions <= {e["session_id"] for e in events if e["trigger"] == "end_of_chat" and e["status"] != "partial"}
    return done


async def test_events_in_summaries_out_and_bad_events_to_dlq(settings, summarizer):
    conversations = sample_conversations(3)
    running = RunningWorker(settings, summarizer)
    worker = await running.start()
    try:
        p = producer(settings)
        for conv in conversations:
            sid = conv["session_id"]
            for i, m in enumerate(conv["messages"]):
                last = i == len(conv["messages"]) - 1
                p.produce(settings.topic_events, key=sid.encode(), value=chat_event(sid, i, m["role"], m["text"], last))
            if conv is conversations[0]:
                # Bad input between good input: it must not stop the conversations after it.
                p.produce(settings.topic_events, key=b"bad-1", value=b'{"session_id": "bad-1", "text": ')
                p.produce(settings.topic_events, key=b"bad-2",
                          value=json.dumps({"session_id": "bad-2", "role": "robot", "text": "我的手机 13812345678"}).encode())
        p.flush(10)
        wanted = {c["session_id"] for c in conversations}
        events = await collect(settings, settings.topic_summaries, finals_for(wanted), timeout_s=240)
        letters = await collect(settings, settings.topic_dlq, lambda e: len(e) >= 2, timeout_s=20)
    finally:
        await running.stop()

    by_session: dict[str, list[dict]] = defaultdict(list)
    for event in events:
        jsonschema.validate(event, SUMMARY_SCHEMA)
        by_session[SummaryEvent.model_validate(event).session_id].append(event)
    assert set(by_session) == wanted
    for sid, evs in by_session.items():
        versions = [e["version"] for e in evs]
        assert versions == sorted(set(versions)), f"{sid}: versions must grow: {versions}"
        assert {e["summary_id"] for e in evs} == {summary_id_for(sid)}
        assert {e["trigger"] for e in evs} <= {"third_message", "update", "end_of_chat"}  # a burst may coalesce
        final = evs[-1]
        assert final["trigger"] == "end_of_chat" and final["status"] in ("ok", "fallback")
        if final["status"] == "ok":
            assert final["request_type"] and final["sentiment"] and final["summary_text"]
            assert final["confidence"]["request_type"] <= 0
        else:
            assert final["fallback_reason"]
        conv = next(c for c in conversations if c["session_id"] == sid)
        assert final["message_count"] == len(conv["messages"])
        # The latency splits into the wait before the run and the run itself (one clock here).
        t = final["timings"]
        assert 0 < t["queue_ms"] and t["queue_ms"] + t["llm_ms"] <= t["latency_ms"] + 1.0
    assert sorted(letter["reason"] for letter in letters) == ["invalid_json", "schema_violation"]
    assert all("13812345678" not in json.dumps(letter, ensure_ascii=False) for letter in letters)
    assert not worker.table  # closed and summarised sessions are evicted


async def test_restart_mid_stream_loses_no_conversation(settings, summarizer):
    """The first worker sees half of each conversation; a new one recovers the table from the
    changelog, sees the rest, and summarises each whole conversation."""
    conversations = sample_conversations(3)
    p = producer(settings)
    halves = {c["session_id"]: len(c["messages"]) // 2 for c in conversations}

    first = RunningWorker(settings.model_copy(update={"trigger_user_messages": 99}), summarizer)
    worker = await first.start()
    for conv in conversations:
        sid = conv["session_id"]
        for i, m in enumerate(conv["messages"][: halves[sid]]):
            p.produce(settings.topic_events, key=sid.encode(), value=chat_event(sid, i, m["role"], m["text"]))
    p.flush(10)
    for _ in range(100):
        if len(worker.table) == len(conversations):
            break
        await asyncio.sleep(0.1)
    assert len(worker.table) == len(conversations)
    await first.stop()

    second = RunningWorker(settings, summarizer)
    await second.start()
    try:
        for conv in conversations:
            sid = conv["session_id"]
            for i, m in list(enumerate(conv["messages"]))[halves[sid]:]:
                last = i == len(conv["messages"]) - 1
                p.produce(settings.topic_events, key=sid.encode(), value=chat_event(sid, i, m["role"], m["text"], last))
        p.flush(10)
        wanted = set(halves)
        events = await collect(settings, settings.topic_summaries, finals_for(wanted), timeout_s=240)
    finally:
        await second.stop()
    finals = {e["session_id"]: e for e in events if e["trigger"] == "end_of_chat" and e["status"] != "partial"}
    assert set(finals) == wanted
    for conv in conversations:
        assert finals[conv["session_id"]]["message_count"] == len(conv["messages"]), "messages from before the restart were lost"


async def test_a_silent_conversation_is_closed_summarised_and_evicted(settings, summarizer):
    """No end-of-chat event: the idle timeout closes the conversation with a final summary of
    all of it, and the row leaves the table (and its changelog) once the feedback window is over."""
    settings = settings.model_copy(update={"idle_timeout_s": 2.0, "feedback_window_s": 3.0})
    conv = sample_conversations(1)[0]
    sid = conv["session_id"]
    running = RunningWorker(settings, summarizer)
    worker = await running.start()
    try:
        p = producer(settings)
        for i, m in enumerate(conv["messages"]):
            p.produce(settings.topic_events, key=sid.encode(), value=chat_event(sid, i, m["role"], m["text"]))
        p.flush(10)
        events = await collect(settings, settings.topic_summaries,
                               lambda es: any(e["trigger"] == "idle" and e["status"] != "partial" for e in es), 240)
        for _ in range(200):
            if not worker.table:
                break
            await asyncio.sleep(0.1)
        assert not worker.table and sid.encode() not in worker.live, "the finished row was not evicted"
    finally:
        await running.stop()
    final = next(e for e in events if e["trigger"] == "idle" and e["status"] != "partial")
    assert final["message_count"] == len(conv["messages"])
    assert [e["version"] for e in events] == sorted({e["version"] for e in events})

    # The eviction reached the changelog: a restarted worker recovers no row for it.
    again = RunningWorker(settings, summarizer)
    worker = await again.start()
    try:
        assert sid.encode() not in worker.table
    finally:
        await again.stop()
