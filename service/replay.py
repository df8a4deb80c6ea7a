"""Conversations (JSONL) to chat events on Kafka, with realistic timing; summaries back out.

A conversation file has one object per line:
`{"session_id": ..., "channel": ..., "messages": [{"role": ..., "text": ...}, ...]}`
(`samples/README.md`). The CLI's `produce`, `demo` and `tail` use these helpers.
"""

from __future__ import annotations

import heapq
import json
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import Consumer, Producer

from .contracts import ChatEvent
from .tail import Tail


def load_conversations(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass(frozen=True)
class Timing:
    """Seconds between messages: a reply comes after reading and typing (scaled by `speed`)."""

    speed: float = 1.0
    min_gap_s: float = 0.4
    per_char_s: float = 0.05
    max_gap_s: float = 6.0

    def gap(self, text: str, rng: random.Random) -> float:
        base = min(self.max_gap_s, self.min_gap_s + self.per_char_s * len(text)) * rng.uniform(0.7, 1.3)
        return base / self.speed


def schedule(conversations: list[dict], timing: Timing, stagger_s: float, end_of_chat: bool, seed: int = 7) -> Iterator[tuple[float, dict]]:
    """(offset in seconds, event fields) for every message, all conversations interleaved."""
    rng = random.Random(seed)
    heap: list[tuple[float, int, int, dict]] = []
    for n, conv in enumerate(conversations):
        at = n * stagger_s
        messages = conv["messages"]
        for i, message in enumerate(messages):
            at += timing.gap(message["text"], rng) if i else 0.0
            fields = {
                "session_id": conv["session_id"],
                "message_id": f"{conv['session_id']}-{i:03d}",
                "role": message["role"],
                "text": message["text"],
                "channel": conv.get("channel", "web"),
                "end_of_chat": end_of_chat and i == len(messages) - 1,
            }
            heapq.heappush(heap, (at, n, i, fields))
    while heap:
        at, _, _, fields = heapq.heappop(heap)
        yield at, fields


def event_bytes(fields: dict) -> bytes:
    event = ChatEvent(timestamp=datetime.now(UTC), **fields)
    return event.model_dump_json().encode()


def replay(producer: Producer, topic: str, conversations: list[dict], timing: Timing, stagger_s: float = 2.0,
           end_of_chat: bool = True, on_sent=None) -> int:
    """Produce the events in real time (each timestamped when sent); returns the count."""
    start = time.monotonic()
    sent = 0
    for at, fields in schedule(conversations, timing, stagger_s, end_of_chat):
        delay = start + at - time.monotonic()
        if delay > 0:
            producer.poll(0)
            time.sleep(delay)
        producer.produce(topic, key=fields["session_id"].encode(), value=event_bytes(fields))
        sent += 1
        if on_sent is not None:
            on_sent(fields)
    producer.flush(30)
    return sent


def summaries(config: dict[str, str], topic: str, group: str | None, from_beginning: bool) -> Tail:
    consumer = Consumer(config | {
        "group.id": group or f"chatsum-tail-{time.time_ns()}",
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        "enable.auto.commit": group is not None,
        "enable.partition.eof": True,
    })
    consumer.subscribe([topic])
    return Tail(consumer)
