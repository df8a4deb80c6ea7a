"""The contracts on every topic, as pydantic models. `schemas/` holds their JSON Schema exports.

Producers in any language validate against `schemas/chat_event.json`; consumers of summaries
read `schemas/summary_event.json`. `python -m service.contracts` rewrites the files, and a test
fails when they drift from these models.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

Role = Literal["user", "agent", "system"]
RequestType = Literal["退换货", "物流查询", "尺寸咨询", "其他"]
Sentiment = Literal["愤怒", "焦虑", "中性"]
Trigger = Literal["third_message", "update", "end_of_chat", "idle"]
Status = Literal["ok", "partial", "fallback"]
FallbackReason = Literal[
    "low_confidence", "timeout", "invented_item_id", "invalid_output", "engine_error", "overload", "token_budget"
]
DeadLetterReason = Literal["invalid_utf8", "invalid_json", "schema_violation", "missing_key", "key_mismatch"]

REQUEST_TYPES: tuple[str, ...] = RequestType.__args__  # type: ignore[attr-defined]
SENTIMENTS: tuple[str, ...] = Sentiment.__args__  # type: ignore[attr-defined]
SUMMARY_MAX_CHARS = 50
ITEM_ID_PATTERN = r"^([A-Za-z0-9][A-Za-z0-9_-]{0,39})?$"


class ChatEvent(BaseModel):
    """One chat message, produced to `chat.events` keyed by `session_id`."""

    model_config = ConfigDict(extra="forbid", title="ChatEvent")

    session_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:@-]+$")
    message_id: str = Field(min_length=1, max_length=128, description="Unique within the session; redeliveries are ignored.")
    role: Role = Field(description="user: the customer; agent: the service agent; system: platform notices.")
    text: str = Field("", max_length=100_000, description="Raw message text; masked before it is stored.")
    timestamp: AwareDatetime = Field(description="When the message was sent (ISO 8601 with offset). The SLA clock starts here.")
    channel: str = Field("web", max_length=32)
    end_of_chat: bool = Field(False, description="The conversation is over: summarise now and close.")


class SummaryFields(BaseModel):
    """What the model writes, constrained by this model's JSON Schema. Field order is decode order."""

    model_config = ConfigDict(extra="forbid", title="SummaryFields")

    item_id: str = Field(pattern=ITEM_ID_PATTERN, description="Order number or item code from the transcript; empty if none.")
    request_type: RequestType
    sentiment: Sentiment
    summary_text: str = Field(min_length=1, max_length=SUMMARY_MAX_CHARS)


class Confidence(BaseModel):
    """Log-probabilities at the tokens where the model chose (forced tokens report 0)."""

    request_type: float = Field(le=0)
    sentiment: float = Field(le=0)


class Timings(BaseModel):
    trigger_at: AwareDatetime = Field(
        description="When this summary fell due: the timestamp of the message that triggered it; for an `update`, "
        "that of the burst's last message plus the debounce (CHATSUM_DEBOUNCE_S), the wait for the burst to end."
    )
    published_at: AwareDatetime
    latency_ms: float = Field(description="published_at - trigger_at: what the SLA measures.")
    queue_ms: float = Field(0.0, description="From trigger_at to the start of the run: transit through Kafka and the "
                            "worker, and the wait for a free engine slot.")
    llm_ms: float = Field(0.0, description="Time in the summarizer: few-shot retrieval and the engine.")


class SummaryEvent(BaseModel):
    """Published to `chat.summaries` keyed by `session_id`.

    One `summary_id` per conversation; `version` grows with every event of that conversation
    (a `partial` then the full one for each trigger). Consumers keep the highest version and
    may drop any (summary_id, version) they have already seen.
    """

    model_config = ConfigDict(extra="forbid", title="SummaryEvent")

    session_id: str
    summary_id: str
    version: int = Field(ge=1)
    trigger: Trigger
    status: Status
    item_id: str | None = None
    request_type: RequestType | None = None
    sentiment: Sentiment | None = None
    summary_text: str | None = Field(None, max_length=SUMMARY_MAX_CHARS)
    confidence: Confidence | None = None
    fallback_reason: FallbackReason | None = None
    message_count: int = Field(ge=0, description="Messages in the session when it was summarised.")
    timings: Timings
    model: str


class DeadLetter(BaseModel):
    """A rejected input, on `chat.summaries.dlq`. The payload excerpt is cleaned and masked."""

    model_config = ConfigDict(extra="forbid", title="DeadLetter")

    reason: DeadLetterReason
    detail: str = Field(description="What was wrong, without the offending values.")
    topic: str
    partition: int
    offset: int
    payload_excerpt: str = Field(max_length=500)
    received_at: datetime


class FeedbackEvent(BaseModel):
    """An agent's verdict on a summary, on `chat.feedback` keyed by `session_id`."""

    model_config = ConfigDict(extra="forbid", title="FeedbackEvent")

    summary_id: str
    session_id: str
    version: int = Field(ge=1)
    verdict: Literal["accept", "reject"]
    error_type: Literal["ID错误", "类型错误", "情绪错误", "摘要冗长"] | None = None
    corrected: dict[str, str] | None = Field(None, description="Corrected SummaryFields values, if any.")
    agent_id: str = ""


def summary_id_for(session_id: str) -> str:
    """Stable id of a conversation's summary: the same on every worker and after restarts."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"chatsum:{session_id}"))


SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
EXPORTED: dict[str, type[BaseModel]] = {
    "chat_event.json": ChatEvent,
    "summary_fields.json": SummaryFields,
    "summary_event.json": SummaryEvent,
    "dead_letter.json": DeadLetter,
    "feedback_event.json": FeedbackEvent,
}


def schema_text(model: type[BaseModel]) -> str:
    return json.dumps(model.model_json_schema(), ensure_ascii=False, indent=2) + "\n"


def export_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, model in EXPORTED.items():
        path = directory / name
        path.write_text(schema_text(model), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    for path in export_schemas():
        print(path)
