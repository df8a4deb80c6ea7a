"""Learned few-shot cases: agent feedback turns summaries into cases on a compacted topic that
every worker reads from the start, so all share them and a restart keeps them.

Key: the summary id (one case per conversation; a later verdict replaces an earlier one).
Value: a case (`fewshot/README.md` format) or a tombstone, which excludes the case.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from pydantic import ValidationError

from .contracts import FeedbackEvent, SummaryFields
from .fewshot import CaseIndex, CaseTurn, FewShotCase, query_text
from .sessions import Session
from .tail import Tail
from .settings import Settings

log = logging.getLogger("chatsum.cases")


def case_from_feedback(session: Session, feedback: FeedbackEvent) -> FewShotCase | None:
    """The confirmed or corrected summary of the session as a case; None when there is none
    (rejected without a correction, or fields that do not make a valid summary: a fallback
    published no fields, so its correction must give all four)."""
    if feedback.verdict == "reject" and not feedback.corrected:
        return None
    try:
        fields = SummaryFields.model_validate((session.last_fields or {}) | (feedback.corrected or {}))
    except ValidationError:
        return None
    return FewShotCase(
        case_id=feedback.summary_id,
        transcript=[CaseTurn(m.role, m.text) for m in session.messages],  # masked already
        answer=fields.model_dump(),
        tags=[feedback.error_type] if feedback.error_type else [],
        source="feedback",
    )


class CaseLog:
    def __init__(self, settings: Settings, index: CaseIndex | None) -> None:
        self.settings = settings
        self.index = index
        self._producer: Producer | None = None
        self._stop = threading.Event()

    def _send(self, key: str, value: bytes | None) -> None:
        if self._producer is None:
            self._producer = Producer(self.settings.producer_config())
        self._producer.produce(self.settings.topic_cases, key=key.encode(), value=value)
        self._producer.flush(10)

    async def publish(self, case: FewShotCase) -> None:
        await asyncio.to_thread(self._send, case.case_id, json.dumps(case.to_json(), ensure_ascii=False).encode())
        log.info("case learned", extra={"case_id": case.case_id, "request_type": case.answer["request_type"]})

    async def exclude(self, case_id: str) -> None:
        await asyncio.to_thread(self._send, case_id, None)
        log.info("case excluded", extra={"case_id": case_id})

    async def follow(self) -> None:
        """Read the topic from the start and keep following it, until cancelled."""
        if self.index is None:
            return
        loop = asyncio.get_running_loop()
        self._stop.clear()
        try:
            await asyncio.to_thread(self._follow, loop)
        finally:
            self._stop.set()

    def _follow(self, loop: asyncio.AbstractEventLoop) -> None:
        assert self.index is not None
        consumer = Consumer(self.settings.kafka_client_config() | {
            "group.id": "chatsum-cases-reader", "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "enable.partition.eof": True})
        consumer.assign([TopicPartition(self.settings.topic_cases, 0, OFFSET_BEGINNING)])
        # Cases come seldom: at the end of the topic, look again only every `cases_refresh_s`.
        tail = Tail(consumer, pace_s=self.settings.cases_refresh_s)
        try:
            while not self._stop.is_set() and not loop.is_closed():
                msg = tail.poll(0.5)
                if msg is None or msg.error():
                    continue
                case_id = (msg.key() or b"").decode()
                if msg.value() is None:
                    loop.call_soon_threadsafe(self.index.exclude, case_id)
                    continue
                try:
                    case = FewShotCase.from_json(json.loads(msg.value()))
                except (ValueError, KeyError):
                    log.warning("unreadable case skipped", extra={"offset": msg.offset()})
                    continue
                # Embedding is the slow part: here, off the event loop.
                vector = self.index.embedder.encode([query_text(case.transcript)])[0]
                loop.call_soon_threadsafe(self.index.put, case, vector)
        finally:
            consumer.close()
