"""The Faust worker: `chat.events` -> sessions table -> summarizer -> `chat.summaries`.

Trace of one message:
1. `_on_message` (the agent) decodes it (`ingest.prepare`: bad input -> `chat.summaries.dlq`),
   masks its text and applies it to the conversation's `Session` (`sessions.apply_message`),
   which may bump the session's version (a trigger). The row is written back (`_store`), so
   the changelog has it.
2. `_tick` (the scheduler) starts a summary task for every session whose trigger is due, up
   to `max_inflight` at once (the engine batches them), and closes idle sessions.
3. `_summarize` publishes a `partial` event when the model has emitted item_id and
   request_type, then the final `ok` or `fallback` event, and records the published version
   in the row.

Rows are written from the agent and from the summary tasks alike, to the changelog partition
the session lives on (Faust's own `table[key] = ...` works only inside the agent, for the
partition of the event at hand), and only while this worker owns that partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import faust
from faust.types import TP

from . import metrics, web
from .caselog import CaseLog, case_from_feedback
from .contracts import Confidence, DeadLetterReason, FallbackReason, FeedbackEvent, SummaryEvent, Timings, summary_id_for
from .fetch_pacing import pace_empty_fetches
from .ingest import Prepared, dead_letter, prepare, safe_text
from .sessions import Session, TriggerRules, apply_idle, apply_message, apply_published, is_expired, over_budget
from .settings import Settings
from .summarizer import Outcome, Summarizer

log = logging.getLogger("chatsum.worker")
_RUNS = itertools.count(1)  # numbers every summary run of this process (see `_summarize`)


def faust_app(settings: Settings, web_enabled: bool = True) -> faust.App:
    credentials: Any = None
    if settings.security_protocol != "PLAINTEXT":
        import ssl

        context = ssl.create_default_context(cafile=settings.ssl_cafile or None)
        if settings.security_protocol.startswith("SASL"):
            credentials = faust.SASLCredentials(
                username=settings.sasl_username,
                password=settings.sasl_password.get_secret_value(),
                mechanism=settings.sasl_mechanism,
                ssl_context=context if settings.security_protocol == "SASL_SSL" else None,
            )
        else:
            credentials = faust.SSLCredentials(context)
    pace_empty_fetches(settings.fetch_pace_ms)
    datadir = settings.cache_dir / "faust" / settings.app_id
    datadir.mkdir(parents=True, exist_ok=True)
    return faust.App(
        settings.app_id,
        broker=[f"kafka://{b.strip()}" for b in settings.bootstrap.split(",")],
        broker_credentials=credentials,
        store="memory://",  # the changelog is the durable state; recovery replays it
        datadir=str(datadir),  # not the current directory
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        # Static membership: a crashed worker's restart rejoins in place instead of waiting for
        # its old session to expire, and a member that rejoins after a generation error keeps
        # its place. (The embedded broker never expires a dead member and elects it leader.)
        consumer_group_instance_id=settings.group_instance_id(),
        web_enabled=web_enabled,
        web_port=settings.web_port,
        web_bind=settings.web_host,
        web_in_thread=False,
        autodiscover=False,
        producer_acks=-1,
        # Batches changelog writes and summaries: about twice the events/s for a
        # few ms on a publish that waits seconds for the engine anyway.
        producer_linger_ms=5,
        key_serializer="raw",  # we decode ourselves: a bad event must reach the DLQ, not crash
        value_serializer="raw",
    )


class ChatsumWorker:
    """One worker's app, table, topics and in-memory indexes. Build one per process (or test)."""

    def __init__(self, settings: Settings, summarizer: Summarizer, *, model_name: str, web_enabled: bool = True) -> None:
        self.settings = settings
        self.summarizer = summarizer
        self.model_name = model_name
        self.rules = TriggerRules(
            user_messages=settings.trigger_user_messages,
            debounce_s=settings.debounce_s,
            idle_timeout_s=settings.idle_timeout_s,
            max_messages=settings.max_transcript_messages,
            max_chars=settings.max_transcript_chars,
        )
        self.app = faust_app(settings, web_enabled=web_enabled)
        raw = dict(key_serializer="raw", value_serializer="raw")
        # One agent reads both: they are keyed alike, so a session's events and the agent
        # feedback on it meet on the partition of its row.
        self.inbound = self.app.topic(settings.topic_events, settings.topic_feedback, partitions=settings.partitions, **raw)
        self.summaries = self.app.topic(settings.topic_summaries, partitions=settings.partitions, **raw)
        self.dlq = self.app.topic(settings.topic_dlq, partitions=settings.partitions, **raw)
        self.table = self.app.Table("sessions", default=None, partitions=settings.partitions, key_type=bytes, value_type=bytes)
        # Decoded rows of the owned partitions, rebuilt after every rebalance: the table holds
        # bytes, and decoding a row on every read cost more than all the rest of the path.
        self.live: dict[bytes, Session] = {}
        self.owned: set[int] = set()  # partitions whose rows this worker may write
        self.due: dict[bytes, tuple[bool, float]] = {}  # owes a summary -> (is an update, may start at)
        self.open: set[bytes] = set()  # not closed yet
        self.next_scan = 0.0  # of `live` for idle and expired sessions
        self.wakeup = asyncio.Event()  # a slot freed or a summary fell due: schedule now
        self.inflight: dict[bytes, asyncio.Task[None]] = {}
        self.recent: list[dict[str, Any]] = []  # last summaries (masked) for the operator page
        self.cases = CaseLog(settings, getattr(summarizer.retriever, "index", None))
        self.app.agent(self.inbound, name="sessions")(self._agent)
        self.app.task(self._schedule)
        self.app.task(self._follow_cases)
        self.app.on_rebalance_complete.connect(self._on_rebalance_complete)
        self.app.on_partitions_revoked.connect(self._on_partitions_revoked)
        self.app.on_before_shutdown.connect(self._leave_group_on_stop)
        self.ready = False
        web.install(self)

    # ---- 1. the agent: events and feedback ---------------------------------------------------
    async def _agent(self, stream: faust.StreamT) -> None:
        async for event in stream.events():
            m = event.message
            if m.topic == self.settings.topic_feedback:
                await self._on_feedback(m.key, m.value, m.partition, m.offset)
            else:
                await self._on_message(m.key, m.value, m.topic, m.partition, m.offset)

    async def _dead_letter(self, reason: DeadLetterReason, detail: str, key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int) -> None:
        letter = dead_letter(reason, detail, value, topic, partition, offset)
        await self.dlq.send(key=safe_text(key or b"", 128).encode(), value=letter.model_dump_json().encode())
        metrics.DLQ.labels(reason).inc()
        log.warning("dead letter", extra={"reason": reason, "topic": topic, "partition": partition, "offset": offset})

    async def _on_message(self, key: bytes | None, value: bytes | None, topic: str, partition: int, offset: int) -> None:
        result = prepare(key, value, self.settings.max_text_chars)
        if not isinstance(result, Prepared):
            await self._dead_letter(*result, key, value, topic, partition, offset)
            return
        event, sid = result.event, result.event.session_id.encode()
        metrics.EVENTS.labels(event.role).inc()
        for kind, n in result.pii.items():
            metrics.PII_MASKED.labels(kind).inc(n)
        session = self._load(sid) or Session(session_id=event.session_id, partition=partition, channel=event.channel)
        before = session.version
        changed = apply_message(
            session,
            message_id=event.message_id,
            role=event.role,
            text=result.text,
            ts=event.timestamp.timestamp(),
            end_of_chat=event.end_of_chat,
            now=time.time(),
            rules=self.rules,
        )
        if not changed:
            metrics.DUPLICATES.inc()
            return
        if session.version > before:
            metrics.TRIGGERS.labels(session.trigger).inc()
        self._store(sid, session)

    async def _on_feedback(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        """An agent's verdict: a confirmed or corrected summary becomes a case for every worker."""
        topic = self.settings.topic_feedback
        try:
            feedback = FeedbackEvent.model_validate_json(value or b"")
        except ValueError as exc:
            kind = "schema_violation" if value and value.lstrip().startswith(b"{") else "invalid_json"
            await self._dead_letter(kind, f"feedback: {type(exc).__name__}", key, value, topic, partition, offset)
            return
        metrics.FEEDBACK.labels(feedback.verdict, feedback.error_type or "none").inc()
        session = self._load(feedback.session_id.encode())
        if session is None:
            log.warning("feedback for an unknown or expired session", extra={"session_id": feedback.session_id})
            return
        case = case_from_feedback(session, feedback)
        if case is None and feedback.verdict == "reject":
            await self.cases.exclude(feedback.summary_id)
        elif case is None:
            await self._dead_letter("schema_violation", "feedback: corrected fields are not a valid summary", key, value, topic, partition, offset)
        else:
            await self.cases.publish(case)

    def _load(self, sid: bytes) -> Session | None:
        """The live row; None for a row of a partition this worker does not own (any more)."""
        session = self.live.get(sid)
        if session is None and (raw := self.table.get(sid)) is not None:
            decoded = Session.decode(raw)
            if decoded.partition in self.owned:
                session = self.live[sid] = decoded
        return session

    def _store(self, sid: bytes, session: Session) -> None:
        """Write the row (or drop an expired one) to the table and its changelog. A row of a
        partition that moved away meanwhile is not written: its new owner recovered it before,
        and a late write would overwrite the messages it has added since."""
        if session.partition not in self.owned:
            log.info("partition moved: row not written", extra={"session_id": session.session_id, "partition": session.partition})
            return
        if is_expired(session, time.time(), self.settings.feedback_window_s):
            if self.table.data.pop(sid, None) is not None:
                self.table.send_changelog(session.partition, sid, None, value_serializer="raw")
            self._forget(sid)
            metrics.SESSIONS_CLOSED.labels(session.trigger or "none").inc()
        else:
            raw = session.encode()
            self.table.data[sid] = raw
            self.table.send_changelog(session.partition, sid, raw)
            self._index(sid, session)
        metrics.SESSIONS_OPEN.set(len(self.open))

    def _index(self, sid: bytes, session: Session) -> None:
        self.live[sid] = session
        if session.owes_summary:
            self.due[sid] = (session.trigger == "update", session.due_at)
            if session.due_at <= time.time():
                self.wakeup.set()
        else:
            self.due.pop(sid, None)
        if session.closed:
            self.open.discard(sid)
        else:
            self.open.add(sid)

    def _forget(self, sid: bytes) -> None:
        self.live.pop(sid, None)
        self.due.pop(sid, None)
        self.open.discard(sid)

    async def _follow_cases(self) -> None:
        await self.cases.follow()

    # ---- rebalance: rebuild the indexes from the recovered table ---------------------------
    async def _on_rebalance_complete(self, sender: Any = None, **kwargs: Any) -> None:
        active = {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == self.settings.topic_events}
        self._clear_views()
        self.owned = active
        for sid, raw in list(self.table.items()):
            session = Session.decode(raw)
            if session.partition in active:
                self._index(sid, session)
        metrics.SESSIONS_OPEN.set(len(self.open))
        self.ready = True
        log.info("rebalance complete", extra={"partitions": sorted(active), "sessions": len(self.live), "owed": len(self.due)})

    def _clear_views(self) -> None:
        self.live.clear()
        self.due.clear()
        self.open.clear()

    async def _leave_group_on_stop(self, sender: Any = None, **kwargs: Any) -> None:
        """A static member does not send LeaveGroup when it closes (KIP-345), so its partitions
        would wait out its session. A graceful stop hands them over at once: without the static
        id aiokafka sends the LeaveGroup (by member id, which Kafka honours for static members)."""
        aiokafka_consumer = getattr(getattr(self.app.consumer, "_thread", None), "_consumer", None)
        coordinator = getattr(aiokafka_consumer, "_coordinator", None)
        if coordinator is None or not hasattr(coordinator, "_group_instance_id"):
            log.warning("cannot leave the group on stop: partitions move after the session timeout")
            return
        coordinator._group_instance_id = None

    def refresh_lag(self) -> None:
        """Lag of chat.events per owned partition: end offset minus the next offset to read."""
        consumer = self.app.consumer
        for tp in self.app.assignor.assigned_actives():
            if tp.topic != self.settings.topic_events:
                continue
            end = consumer.highwater(tp)
            read = consumer._read_offset.get(tp)  # Faust keeps no public accessor for this
            if end is not None:
                metrics.CONSUMER_LAG.labels(str(tp.partition)).set(max(end - (read + 1 if read is not None else 0), 0))

    async def _on_partitions_revoked(self, sender: Any = None, revoked: Iterable[TP] = (), **kwargs: Any) -> None:
        self.owned = set()
        self._clear_views()

    # ---- 2. the scheduler: start due summaries, close idle sessions -------------------------
    async def _schedule(self) -> None:
        """`_tick` every `tick_s`, and at once when a summary ends or a new one falls due: a
        freed engine slot must not sit idle until the next tick."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wakeup.wait(), self.settings.tick_s)
            self.wakeup.clear()
            try:
                await self._tick()
            except Exception:
                log.exception("scheduling failed; retrying on the next tick")

    async def _tick(self) -> None:
        now = time.time()
        waiting = 0
        # First summaries and final ones before updates; oldest first within each.
        ready = sorted((key, sid) for sid, key in self.due.items() if key[1] <= now and sid not in self.inflight)
        for (is_update, due_at), sid in ready:
            session = self.live.get(sid)
            if session is None or not session.owes_summary:
                self.due.pop(sid, None)
            elif is_update and over_budget(session, now, self.settings.session_token_budget, self.settings.budget_window_s):
                self._start(sid, session, "token_budget")
            elif len(self.inflight) < self.settings.max_inflight:
                self._start(sid, session, None)
            elif now - due_at > self.settings.max_queue_wait_s:
                # The engine is behind: answer now with a fallback instead of queueing without bound.
                self._start(sid, session, "overload")
            else:
                waiting += 1
        metrics.LLM_QUEUE.set(waiting)
        if now >= self.next_scan:  # timeouts are seconds to minutes: no need to look every tick
            self.next_scan = now + 1.0
            self._close_idle_and_expired(now)
        stats = self.summarizer.engine.stats()
        metrics.KV_CACHE.set(stats.get("kv_cache_usage", 0.0))
        metrics.VLLM_WAITING.set(stats.get("num_waiting", 0.0))
        metrics.VLLM_RUNNING.set(stats.get("num_running", 0.0))

    def _close_idle_and_expired(self, now: float) -> None:
        for sid, session in list(self.live.items()):
            if apply_idle(session, now=now, rules=self.rules):
                if session.owes_summary:
                    metrics.TRIGGERS.labels("idle").inc()
                self._store(sid, session)
            elif is_expired(session, now, self.settings.feedback_window_s):
                self._store(sid, session)  # drops the row

    def _record_published(self, sid: bytes, version: int, fields: dict[str, str] | None = None, tokens: int = 0) -> None:
        """On the live row, which may have grown since the run took its snapshot."""
        session = self._load(sid)
        if session is not None:
            apply_published(session, version, fields, 2 * version, tokens, time.time(), self.settings.budget_window_s)
            self._store(sid, session)

    def _start(self, sid: bytes, session: Session, fallback: FallbackReason | None) -> None:
        self.due.pop(sid, None)  # back when a newer message comes, or if this run fails
        # A snapshot: the agent goes on appending to the live row while the summary runs
        # (messages themselves are never changed once stored, so their list is enough to copy).
        session = session.model_copy(update={"messages": list(session.messages)})
        queued_s = max(time.time() - session.trigger_ts, 0.0)
        work = self._fallback(sid, session, fallback, queued_s) if fallback else self._summarize(sid, session, queued_s)
        task = self.inflight[sid] = asyncio.ensure_future(work)
        task.add_done_callback(lambda _: self.wakeup.set())

    def _retry_later(self, sid: bytes) -> None:
        session = self.live.get(sid)
        if session is not None:
            self._index(sid, session)

    async def _fallback(self, sid: bytes, session: Session, reason: FallbackReason, queued_s: float) -> None:
        try:
            await self._publish(session, 2 * session.version, "fallback", Outcome(fields=None, fallback_reason=reason), None, queued_s)
            self._record_published(sid, session.version)
        except Exception as exc:
            self._retry_later(sid)
            log.error(f"fallback failed: {type(exc).__name__}", extra={"session_id": session.session_id})
        finally:
            self.inflight.pop(sid, None)

    # ---- 3. one summary -----------------------------------------------------------------------
    async def _summarize(self, sid: bytes, session: Session, queued_s: float) -> None:
        version = session.version
        metrics.LLM_INFLIGHT.inc()
        try:
            async def on_partial(fields: dict[str, str]) -> None:
                await self._publish(session, 2 * version - 1, "partial", None, fields, queued_s)

            # Unique per run: vLLM aborts by request id, and the abort of a cancelled run (this
            # worker's, or another's sharing the engine in tests and the bench) must not hit a
            # newer run of the same session and version.
            run_id = f"{session.session_id}:{version}:{next(_RUNS)}"
            outcome = await self.summarizer.summarize(session.messages, on_partial=on_partial, request_id=run_id)
            metrics.LLM_SECONDS.observe(outcome.llm_ms / 1000)
            metrics.TOKENS.labels("in").inc(outcome.prompt_tokens)
            metrics.TOKENS.labels("out").inc(outcome.output_tokens)
            current = self._load(sid)
            if session.trigger == "update" and current is not None and current.version > version:
                # Newer messages arrived meanwhile: a summary of them is owed anyway; this one
                # would be stale on arrival. (First and final summaries are always published.)
                metrics.STALE_DROPPED.inc()
                return
            status = "ok" if outcome.ok else "fallback"
            await self._publish(session, 2 * version, status, outcome, None, queued_s)
            fields = outcome.fields.model_dump() if outcome.ok and outcome.fields else None
            self._record_published(sid, version, fields, outcome.prompt_tokens + outcome.output_tokens)
        except Exception as exc:
            self._retry_later(sid)
            log.error(f"summary failed: {type(exc).__name__}", extra={"session_id": session.session_id, "version": version})
        finally:
            metrics.LLM_INFLIGHT.dec()
            self.inflight.pop(sid, None)

    async def _publish(
        self, session: Session, version: int, status: str, outcome: Outcome | None, partial: dict[str, str] | None,
        queued_s: float,
    ) -> None:
        now = datetime.now(UTC)
        trigger_at = datetime.fromtimestamp(session.trigger_ts, UTC)
        fields: dict[str, Any] = dict(partial or {})
        confidence: Confidence | None = None
        reason = None
        if outcome is not None:
            confidence, reason = outcome.confidence, outcome.fallback_reason
            if outcome.ok and outcome.fields is not None:
                fields = outcome.fields.model_dump()
            else:
                # A fallback carries no guess: only an excerpt of what the customer last said.
                last_user = next((m.text for m in reversed(session.messages) if m.role == "user"), "")
                fields = {"summary_text": last_user[:50] or None}
        latency_s = (now - trigger_at).total_seconds()
        event = SummaryEvent(
            session_id=session.session_id,
            summary_id=summary_id_for(session.session_id),
            version=version,
            trigger=session.trigger or "third_message",
            status=status,  # type: ignore[arg-type]
            confidence=confidence,
            fallback_reason=reason,
            message_count=len(session.messages) + session.dropped_messages,
            timings=Timings(
                trigger_at=trigger_at,
                published_at=now,
                latency_ms=round(latency_s * 1000, 1),
                queue_ms=round(queued_s * 1000, 1),
                llm_ms=round(outcome.llm_ms, 1) if outcome else 0.0,
            ),
            model=self.model_name,
            **fields,
        )
        await self.summaries.send(key=session.session_id.encode(), value=event.model_dump_json().encode())
        metrics.SUMMARIES.labels(status).inc()
        metrics.PUBLISH_LATENCY.labels(status).observe(max(latency_s, 0.0))
        if status != "partial":
            if latency_s <= self.settings.sla_s:
                metrics.WITHIN_SLA.inc()
            if reason:
                metrics.FALLBACKS.labels(reason).inc()
            if confidence is not None:
                metrics.CONFIDENCE.labels("request_type").observe(confidence.request_type)
                metrics.CONFIDENCE.labels("sentiment").observe(confidence.sentiment)
            self.recent = ([event.model_dump(mode="json")] + self.recent)[:50]
        log.info("published", extra={"session_id": session.session_id, "version": version, "status": status, "latency_ms": event.timings.latency_ms})
