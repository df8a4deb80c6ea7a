"""Session state and trigger rules: pure functions over a `Session`, no Kafka, no clock of their own.

The worker stores one `Session` per conversation in a changelog-backed Faust table. Every
trigger bumps `version`; a summary run takes the session as it is when it starts and, once
published, records the version it covered in the row (`published`). So a burst of
messages coalesces into one run, and a version above `published` after a crash means a
summary is still owed: it is run again (at-least-once; consumers dedupe by summary id + version).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from .contracts import Role, Trigger

SEEN_IDS_KEPT = 512
_OPENING_MAX = 5  # messages kept from the start when a long transcript is cut


class Message(BaseModel):
    role: Role
    text: str = Field(description="Cleaned and masked: the raw text is never stored.")
    ts: float = Field(description="Sent at, epoch seconds.")


class Session(BaseModel):
    session_id: str
    partition: int
    channel: str = "web"
    messages: list[Message] = []
    seen_ids: list[str] = []
    user_messages: int = 0
    dropped_messages: int = 0
    version: int = 0
    published: int = 0
    trigger: Trigger | None = None
    trigger_ts: float = 0.0
    due_at: float = 0.0
    last_activity: float = 0.0
    closed: bool = False
    last_fields: dict[str, str] | None = Field(None, description="The last ok summary, for agent feedback.")
    last_summary_version: int = 0
    tokens_used: int = 0
    tokens_window_start: float = 0.0

    @property
    def owes_summary(self) -> bool:
        return self.version > self.published

    @property
    def finished(self) -> bool:
        """Closed and nothing owed: the row can be evicted."""
        return self.closed and not self.owes_summary

    def encode(self) -> bytes:
        return self.model_dump_json().encode()

    @classmethod
    def decode(cls, raw: bytes) -> Session:
        return cls.model_validate_json(raw)


class TriggerRules(BaseModel):
    user_messages: int = 3
    debounce_s: float = 1.0
    idle_timeout_s: float = 300.0
    max_messages: int = 200
    max_chars: int = 20_000


def _bump(session: Session, trigger: Trigger, trigger_ts: float, due_at: float) -> None:
    session.version += 1
    session.trigger = trigger
    session.trigger_ts = trigger_ts
    session.due_at = due_at


def apply_message(
    session: Session,
    *,
    message_id: str,
    role: Role,
    text: str,
    ts: float,
    end_of_chat: bool,
    now: float,
    rules: TriggerRules,
) -> bool:
    """Add one (already masked) message and decide triggers. False when it was a redelivery."""
    if message_id in session.seen_ids:
        return False
    session.seen_ids.append(message_id)
    del session.seen_ids[:-SEEN_IDS_KEPT]
    session.closed = False  # a late message reopens a closed, not yet evicted session
    session.last_activity = now
    if text:
        session.messages.append(Message(role=role, text=text, ts=ts))
        _trim(session, rules)
    if role == "user" and text:
        session.user_messages += 1
        if session.user_messages == rules.user_messages:
            _bump(session, "third_message", ts, now)
        elif session.user_messages > rules.user_messages:
            # Debounced: every message of a burst pushes the start back; one run covers them all.
            # Its clock starts when the burst is over: the debounce is a wait we chose, and
            # counting it would put every update past a 1.2 s SLA with a 1 s debounce.
            _bump(session, "update", ts + rules.debounce_s, now + rules.debounce_s)
    if end_of_chat:
        session.closed = True
        if session.user_messages:
            _bump(session, "end_of_chat", ts, now)
    return True


def _trim(session: Session, rules: TriggerRules) -> None:
    """Drop messages beyond the count or the total length, oldest first but after the opening
    (up to the customer's first message, where the problem and the order number are usually
    stated): every message rewrites the whole row to the changelog, and a flood of long messages
    would grow it past what a Kafka record may hold (1 MB by default)."""
    messages = session.messages
    keep = min(next((i + 1 for i, m in enumerate(messages) if m.role == "user"), 0), _OPENING_MAX)
    chars = sum(len(m.text) for m in messages)
    drop = 0
    while len(messages) - drop > keep + 1 and (len(messages) - drop > rules.max_messages or chars > rules.max_chars):
        chars -= len(messages[keep + drop].text)
        drop += 1
    if drop:
        del messages[keep : keep + drop]
        session.dropped_messages += drop


def apply_idle(session: Session, *, now: float, rules: TriggerRules) -> bool:
    """Close a session that has been silent for the idle timeout; summarise it if it has content."""
    if not is_idle(session, now, rules):
        return False
    session.closed = True
    if session.user_messages:
        _bump(session, "idle", now, now)
    return True


def apply_published(
    session: Session, version: int, fields: dict[str, str] | None = None, event_version: int = 0,
    tokens: int = 0, now: float = 0.0, budget_window_s: float = 600.0,
) -> None:
    session.published = max(session.published, version)
    if now - session.tokens_window_start >= budget_window_s:
        session.tokens_window_start, session.tokens_used = now, 0
    session.tokens_used += tokens
    if fields is not None and event_version >= session.last_summary_version:
        session.last_fields, session.last_summary_version = fields, event_version


def is_expired(session: Session, now: float, feedback_window_s: float) -> bool:
    """Summarised, closed, and past the window in which an agent may still give feedback."""
    return session.finished and now - session.last_activity >= feedback_window_s


def over_budget(session: Session, now: float, budget: int, window_s: float) -> bool:
    """Spent its engine tokens for the current window (a long, chatty session): its updates are
    skipped until the window ends; the end-of-chat summary still runs."""
    return budget > 0 and now - session.tokens_window_start < window_s and session.tokens_used >= budget


def is_due(session: Session, now: float) -> bool:
    return session.owes_summary and session.due_at <= now


def is_idle(session: Session, now: float, rules: TriggerRules) -> bool:
    return not session.closed and now - session.last_activity >= rules.idle_timeout_s
