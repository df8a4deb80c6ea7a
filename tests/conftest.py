"""Shared fixtures: a real Kafka-protocol broker started by the test run (or `--bootstrap` for
an external Kafka), and one real vLLM engine (CPU build, shipped model) per test session."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import pytest_asyncio
from confluent_kafka import Producer

from service.broker import EmbeddedBroker, free_port
from service.replay import summaries
from service.settings import Settings
from service.summarizer import Summarizer
from service.topics import ensure_topics
from service.harness import RunningWorker  # noqa: F401  (re-exported for the tests)

REPO = Path(__file__).resolve().parent.parent
_ids = itertools.count()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bootstrap", default=None, help="Run against this Kafka instead of the embedded broker.")


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker | None]:
    if request.config.getoption("--bootstrap"):
        yield None
        return
    with EmbeddedBroker(tmp_path_factory.mktemp("broker"), port=free_port()) as embedded:
        yield embedded


@pytest.fixture(scope="session")
def bootstrap(request: pytest.FixtureRequest, broker: EmbeddedBroker | None) -> str:
    return request.config.getoption("--bootstrap") or broker.bootstrap  # type: ignore[union-attr]


@pytest.fixture
def settings(bootstrap: str) -> Settings:
    """Settings with topics and group of their own, so tests never see each other's events."""
    n = f"t{next(_ids)}x{int(time.time() * 1000) % 100000}"
    return Settings(
        bootstrap=bootstrap,
        app_id=f"chatsum-{n}",
        topic_events=f"{n}.chat.events",
        topic_summaries=f"{n}.chat.summaries",
        topic_dlq=f"{n}.chat.summaries.dlq",
        topic_feedback=f"{n}.chat.feedback",
        topic_cases=f"{n}.chatsum.cases",
        feedback_window_s=0.0,
        partitions=2,
        debounce_s=0.3,
        web_port=free_port(),
    )


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def summarizer() -> AsyncIterator[Summarizer]:
    """The one engine of the test session (starting it costs about a minute on 2 cores)."""
    from service.runtime import build_summarizer, start

    built = build_summarizer(Settings())
    await start(built)
    yield built
    built.engine.shutdown()


def chat_event(session_id: str, i: int, role: str, text: str, end: bool = False) -> bytes:
    return json.dumps({
        "session_id": session_id, "message_id": f"{session_id}-{i}", "role": role, "text": text,
        "timestamp": datetime.now(UTC).isoformat(), "channel": "web", "end_of_chat": end,
    }, ensure_ascii=False).encode()


def producer(settings: Settings) -> Producer:
    return Producer(settings.producer_config() | {"linger.ms": 0})


async def collect(settings: Settings, topic: str, until, timeout_s: float) -> list[dict]:
    """Consume `topic` from the start until `until(events)` holds or the timeout passes."""
    consumer = summaries(settings.kafka_client_config(), topic, None, True)
    events: list[dict] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and not until(events):
            msg = await asyncio.to_thread(consumer.poll, 0.3)
            if msg is not None and not msg.error():
                events.append(json.loads(msg.value()))
    finally:
        consumer.close()
    return events
