"""From raw Kafka bytes to a validated event with masked text, or a dead letter with a reason.

Pure functions: they never raise on any input, and nothing they return carries unmasked text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import ValidationError

from .clean import clean_text
from .contracts import ChatEvent, DeadLetter, DeadLetterReason
from .mask import mask_text

EXCERPT_CHARS = 300


@dataclass(frozen=True)
class Prepared:
    event: ChatEvent
    text: str  # cleaned, masked, cut to the configured length
    pii: dict[str, int]
    truncated: bool


def safe_text(raw: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """Cleaned and masked excerpt of anything, for dead letters and errors."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", errors="replace")
    return mask_text(clean_text(raw[: limit * 4])).text[:limit]


def prepare(key: bytes | None, value: bytes | None, max_text_chars: int) -> Prepared | tuple[DeadLetterReason, str]:
    """Decode and validate one chat event; on failure, (reason, detail) for the dead letter."""
    if value is None:
        return "invalid_json", "empty message (tombstone) on the events topic"
    try:
        decoded = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "invalid_utf8", f"not UTF-8 at byte {exc.start}"
    try:
        payload = json.loads(decoded)
    except (ValueError, RecursionError) as exc:
        return "invalid_json", f"not JSON: {type(exc).__name__}"
    try:
        event = ChatEvent.model_validate(payload)
    except ValidationError as exc:
        # Field locations and error types only: `input` would echo the personal data back.
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['type']}" for e in exc.errors()[:5])
        return "schema_violation", problems
    if key is None:
        return "missing_key", "events must be keyed by session_id (one partition owns a conversation)"
    if key.decode("utf-8", errors="replace") != event.session_id:
        return "key_mismatch", "the message key differs from session_id"
    masked = mask_text(clean_text(event.text))
    text = masked.text[:max_text_chars]
    return Prepared(event=event, text=text, pii=masked.counts, truncated=len(masked.text) > max_text_chars)


def dead_letter(reason: DeadLetterReason, detail: str, value: bytes | None, topic: str, partition: int, offset: int) -> DeadLetter:
    return DeadLetter(
        reason=reason,
        detail=safe_text(detail),  # field names of a hostile payload are text too
        topic=topic,
        partition=partition,
        offset=offset,
        payload_excerpt=safe_text(value or b""),
        received_at=datetime.now(UTC),
    )
