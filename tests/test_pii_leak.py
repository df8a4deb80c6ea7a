"""Nothing personal leaves the worker: after an end-to-end run over chats full of personal data,
no injected value is found in any topic the worker writes, in its logs or in its metrics."""

from __future__ import annotations

import json
import logging
import random
import re

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from prometheus_client import generate_latest

from service.logs import JsonFormatter
from service.metrics import REGISTRY
from service.topics import sessions_changelog

from .conftest import REPO, RunningWorker, chat_event, collect, producer

pytestmark = pytest.mark.asyncio(loop_scope="session")


def pii_sentences(per_type: int = 2) -> list[tuple[str, list[str]]]:
    """Labelled sentences from the PII set (values pass their checksums), a few of each type."""
    rows = [json.loads(line) for line in (REPO / "benchmarks" / "data" / "pii_labelled.jsonl").read_text(encoding="utf-8").splitlines()]
    rng = random.Random(5)
    rng.shuffle(rows)
    picked: dict[str, list] = {}
    for row in rows:
        kinds = {s["type"] for s in row["spans"]}
        if any(s["value"].isdigit() and len(s["value"]) < 8 for s in row["spans"]):
            continue  # a short number (a QQ number) can occur by chance in offsets or metric values
        if len(kinds) == 1 and len(picked.setdefault(next(iter(kinds)), [])) < per_type:
            picked[next(iter(kinds))].append((row["text"], [s["value"] for s in row["spans"]]))
    return [item for items in picked.values() for item in items]


def variants(value: str) -> set[str]:
    """The value as typed, and its digits/letters alone (a leak may drop the separators)."""
    compact = re.sub(r"[\s\-()（）]", "", value)
    return {value, compact} if len(compact) >= 6 else {value}


def read_all(settings, topic: str) -> list[str]:
    metadata = AdminClient(settings.kafka_client_config()).list_topics(topic, timeout=10).topics[topic]
    consumer = Consumer(settings.kafka_client_config() | {"group.id": "leak-scan", "enable.auto.commit": False})
    out: list[str] = []
    for p in metadata.partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        if high <= low:
            continue
        consumer.assign([TopicPartition(topic, p, low)])
        while True:
            msg = consumer.poll(2.0)
            if msg is None:
                break
            if not msg.error():
                out.append((msg.key() or b"").decode("utf-8", "replace") + " " + (msg.value() or b"").decode("utf-8", "replace"))
            if msg.offset() >= high - 1:
                break
    consumer.close()
    return out


async def test_no_injected_personal_data_leaves_the_worker(settings, summarizer):
    settings = settings.model_copy(update={"feedback_window_s": 600.0})  # keep rows: scan the changelog too
    sentences = pii_sentences()
    secrets = {v for _, values in sentences for value in values for v in variants(value)}
    records: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(JsonFormatter().format(record))

    handler = Capture(level=logging.DEBUG)
    logging.getLogger().addHandler(handler)
    previous = logging.getLogger().level
    logging.getLogger().setLevel(logging.INFO)
    running = RunningWorker(settings, summarizer)
    worker = await running.start()
    try:
        p = producer(settings)
        sessions = []
        for n in range(0, len(sentences), 3):
            sid = f"pii-{n}"
            sessions.append(sid)
            chunk = [text for text, _ in sentences[n:n + 3]] + ["麻烦尽快处理一下"]
            for i, text in enumerate(chunk):
                p.produce(settings.topic_events, key=sid.encode(), value=chat_event(sid, i, "user", text, i == len(chunk) - 1))
        # A bad event carrying personal data: its dead letter must be masked too.
        p.produce(settings.topic_events, key=b"pii-bad", value=json.dumps(
            {"session_id": "pii-bad", "role": "hacker", "text": sentences[0][0]}, ensure_ascii=False).encode())
        p.flush(10)
        wanted = set(sessions)
        await collect(settings, settings.topic_summaries, lambda es: wanted <= {
            e["session_id"] for e in es if e["trigger"] == "end_of_chat" and e["status"] != "partial"}, 300)
        page = json.dumps(worker.recent, ensure_ascii=False)
    finally:
        await running.stop()
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(previous)

    places = {
        topic: read_all(settings, topic)
        for topic in (settings.topic_summaries, settings.topic_dlq, sessions_changelog(settings))
    }
    assert places[settings.topic_summaries] and places[settings.topic_dlq] and places[sessions_changelog(settings)]
    places["logs"] = records
    places["metrics"] = [generate_latest(REGISTRY).decode()]
    places["operator page"] = [page]
    leaks = {(where, s) for where, texts in places.items() for text in texts for s in secrets if s in text}
    assert not leaks, f"personal data found: {sorted(leaks)[:10]}"
    # The scan is not vacuous: the raw input topic does carry the values.
    assert any(s in t for t in read_all(settings, settings.topic_events) for s in secrets)
