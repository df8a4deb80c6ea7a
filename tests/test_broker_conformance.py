"""Exactly the broker behaviour chatsum relies on. Runs against the embedded broker, or against
any Kafka with `pytest tests/test_broker_conformance.py --bootstrap HOST:PORT`."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from service.topics import TopicError, ensure_topics, topic_specs

from .conftest import producer


def consumer(settings, group: str, **extra) -> Consumer:
    return Consumer(settings.kafka_client_config() | {
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 500} | extra)


def drain(c: Consumer, n: int, timeout_s: float = 20.0) -> list:
    got, deadline = [], time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            got.append(msg)
    return got


def test_topics_are_created_up_front_with_their_partition_counts(settings):
    created = ensure_topics(settings)
    assert set(created) == {s.name for s in topic_specs(settings)}
    assert ensure_topics(settings) == []  # idempotent
    topics = AdminClient(settings.kafka_client_config()).list_topics(timeout=10).topics
    for spec in topic_specs(settings):
        assert len(topics[spec.name].partitions) == spec.partitions


def test_a_topic_with_the_wrong_partition_count_is_refused_clearly(settings):
    ensure_topics(settings)
    with pytest.raises(TopicError, match="CHATSUM_PARTITIONS"):
        ensure_topics(settings.model_copy(update={"partitions": settings.partitions + 1}))


def test_same_key_same_partition_and_order_kept(settings):
    ensure_topics(settings)
    p = producer(settings)
    for i in range(40):
        p.produce(settings.topic_events, key=f"session-{i % 5}".encode(), value=str(i).encode())
    p.flush(10)
    c = consumer(settings, "conf-keys")
    c.subscribe([settings.topic_events])
    msgs = drain(c, 40)
    c.close()
    assert len(msgs) == 40
    partitions: dict[bytes, set[int]] = {}
    order: dict[bytes, list[int]] = {}
    for m in msgs:
        partitions.setdefault(m.key(), set()).add(m.partition())
        order.setdefault(m.key(), []).append(int(m.value()))
    assert all(len(p) == 1 for p in partitions.values())
    assert all(v == sorted(v) for v in order.values())
    assert len({next(iter(p)) for p in partitions.values()}) > 1  # keys spread over partitions


def test_group_resumes_from_committed_offsets(settings):
    ensure_topics(settings)
    p = producer(settings)
    for i in range(10):
        p.produce(settings.topic_events, key=b"k", value=str(i).encode())
    p.flush(10)
    c = consumer(settings, "conf-resume")
    c.subscribe([settings.topic_events])
    first = drain(c, 6)
    c.commit(message=first[5], asynchronous=False)
    c.close()
    c = consumer(settings, "conf-resume")
    c.subscribe([settings.topic_events])
    rest = drain(c, 4)
    c.close()
    assert [int(m.value()) for m in rest] == [6, 7, 8, 9]


def test_rebalance_moves_partitions_between_members(settings):
    ensure_topics(settings)
    a = consumer(settings, "conf-rebalance")
    a.subscribe([settings.topic_events])
    deadline = time.monotonic() + 20
    while len(a.assignment()) < settings.partitions and time.monotonic() < deadline:
        a.poll(0.2)
    assert len(a.assignment()) == settings.partitions
    b = consumer(settings, "conf-rebalance")
    b.subscribe([settings.topic_events])
    deadline = time.monotonic() + 30
    while (not b.assignment() or len(a.assignment()) == settings.partitions) and time.monotonic() < deadline:
        a.poll(0.1)
        b.poll(0.1)
    assert b.assignment() and a.assignment()
    assert len(a.assignment()) + len(b.assignment()) == settings.partitions
    b.close()
    deadline = time.monotonic() + 30
    while len(a.assignment()) < settings.partitions and time.monotonic() < deadline:
        a.poll(0.1)
    survivor = len(a.assignment())
    a.close()
    assert survivor == settings.partitions, "the survivor did not take the partitions back"


def test_end_offsets_are_exact_after_many_batches(settings):
    """Faust recovers a table by reading its changelog up to the end offset: it must be exact."""
    ensure_topics(settings)
    topic = f"{settings.app_id}-sessions-changelog"
    p = producer(settings)
    for batch in range(5):
        for i in range(7):
            p.produce(topic, key=f"k{i}".encode(), value=str(batch).encode(), partition=0)
        p.flush(10)
    c = consumer(settings, "conf-offsets")
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.close()
    assert (low, high) == (0, 35)


def test_a_restarted_static_member_takes_its_partitions_back_at_once(settings):
    """A worker killed with -9 and restarted with the same CHATSUM_INSTANCE_ID must get its
    partitions back without waiting for the dead session to expire (the embedded broker never
    expires one; Kafka waits session.timeout)."""
    import subprocess
    import sys

    ensure_topics(settings)
    config = settings.kafka_client_config() | {"group.id": "conf-static", "group.instance.id": "member-1",
                                               "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, json, time\n"
        "from confluent_kafka import Consumer\n"
        f"c = Consumer(json.loads({json.dumps(json.dumps(config))}))\n"
        f"c.subscribe([{settings.topic_events!r}])\n"
        "t = time.time()\n"
        "while not c.assignment() and time.time() - t < 20: c.poll(0.2)\n"
        "print('assigned', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "assigned"
    child.kill()
    child.wait()
    c = Consumer(config)
    c.subscribe([settings.topic_events])
    deadline = time.monotonic() + 10
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    got = len(c.assignment())
    c.close()
    assert got == settings.partitions
