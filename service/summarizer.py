"""One summary: prompt, constrained decode, partial fields, confidence, validation, fallback.

The worker, `chatsum eval` and `chatsum bench` all call `Summarizer.summarize`, so what is
evaluated is what runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from .contracts import Confidence, FallbackReason, SummaryFields
from .engine import Engine
from .prompt import Case, Turn, build_messages

log = logging.getLogger("chatsum.summarizer")
OUTPUT_SCHEMA = SummaryFields.model_json_schema()
# Fields are decoded in schema order, so once `sentiment` starts, item_id and request_type are final.
_PARTIAL = re.compile(r'^\{"item_id":"((?:[^"\\]|\\.)*)","request_type":"([^"]+)","sentiment"')

PartialCallback = Callable[[dict[str, str]], Awaitable[None]]


class Retriever:
    """No retrieval: the base for the few-shot retriever (`service.fewshot`)."""

    async def retrieve(self, turns: Sequence[Turn]) -> list[Case]:
        return []


@dataclass
class Outcome:
    fields: SummaryFields | None
    confidence: Confidence | None = None
    fallback_reason: FallbackReason | None = None
    partial: dict[str, str] | None = None
    llm_ms: float = 0.0
    prompt_tokens: int = 0
    output_tokens: int = 0
    raw: str = ""
    cases: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.fallback_reason is None


@dataclass
class SummaryPolicy:
    timeout_s: float = 3.0
    confidence_threshold: float = -1.0
    max_tokens: int = 128
    max_prompt_chars: int = 3000


def value_logprob(text: str, key: str, char_ends: list[int], logprobs: list[float]) -> float | None:
    """Logprob of the token that starts the value of `key`: where the model chose among enum
    values. Tokens the grammar forces report 0, so summing over all tokens would mean nothing."""
    marker = f'"{key}":"'
    at = text.find(marker)
    if at < 0:
        return None
    start = at + len(marker)
    for end, logprob in zip(char_ends, logprobs):
        if end > start:
            return logprob
    return None


def transcript_text(turns: Sequence[Turn]) -> str:
    return "\n".join(t.text for t in turns)


class Summarizer:
    def __init__(self, engine: Engine, retriever: Retriever | None = None, policy: SummaryPolicy | None = None) -> None:
        self.engine = engine
        self.retriever = retriever or Retriever()
        self.policy = policy or SummaryPolicy()

    async def build_prompt(self, turns: Sequence[Turn]) -> tuple[str, list[Case]]:
        cases = await self.retriever.retrieve(turns)
        messages = build_messages(turns, cases, self.policy.max_prompt_chars)
        return self.engine.render_chat(messages), cases

    async def summarize(
        self, turns: Sequence[Turn], on_partial: PartialCallback | None = None, request_id: str | None = None
    ) -> Outcome:
        request_id = request_id or uuid.uuid4().hex
        started = time.perf_counter()
        prompt, cases = await self.build_prompt(turns)
        state = _Decode()
        try:
            await asyncio.wait_for(self._decode(prompt, request_id, state, on_partial), self.policy.timeout_s)
        except TimeoutError:
            await self.engine.abort(request_id)
            return state.outcome(started, "timeout", cases)
        except asyncio.CancelledError:
            await asyncio.shield(self.engine.abort(request_id))
            raise
        except Exception as exc:
            # The type only: an engine error message may quote the prompt.
            log.error(f"engine error: {type(exc).__name__}", extra={"request_id": request_id})
            await self.engine.abort(request_id)
            return state.outcome(started, "engine_error", cases)
        return self._judge(state, turns, started, cases)

    async def _decode(self, prompt: str, request_id: str, state: _Decode, on_partial: PartialCallback | None) -> None:
        async for delta in self.engine.stream(prompt, OUTPUT_SCHEMA, request_id, self.policy.max_tokens):
            state.add(delta.text, delta.token_ids, delta.logprobs, delta.prompt_tokens)
            if state.partial is None and (match := _PARTIAL.match(state.text)):
                state.partial = {"item_id": json.loads(f'"{match[1]}"'), "request_type": match[2]}
                if on_partial is not None:
                    await on_partial(state.partial)

    def _judge(self, state: _Decode, turns: Sequence[Turn], started: float, cases: list[Case]) -> Outcome:
        try:
            fields = SummaryFields.model_validate(json.loads(state.text))
        except (ValueError, ValidationError):
            return state.outcome(started, "invalid_output", cases)
        ends = self.engine.token_char_ends(state.token_ids)
        rt = value_logprob(state.text, "request_type", ends, state.logprobs)
        se = value_logprob(state.text, "sentiment", ends, state.logprobs)
        confidence = Confidence(request_type=min(rt or 0.0, 0.0), sentiment=min(se or 0.0, 0.0))
        outcome = state.outcome(started, None, cases)
        outcome.fields, outcome.confidence = fields, confidence
        if fields.item_id and fields.item_id not in transcript_text(turns):
            outcome.fallback_reason = "invented_item_id"
        elif confidence.request_type < self.policy.confidence_threshold:
            outcome.fallback_reason = "low_confidence"
        return outcome


@dataclass
class _Decode:
    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    partial: dict[str, str] | None = None

    def add(self, text: str, token_ids: list[int], logprobs: list[float], prompt_tokens: int) -> None:
        self.text += text
        self.token_ids += token_ids
        self.logprobs += logprobs
        self.prompt_tokens = prompt_tokens or self.prompt_tokens

    def outcome(self, started: float, reason: FallbackReason | None, cases: list[Case]) -> Outcome:
        return Outcome(
            fields=None,
            fallback_reason=reason,
            partial=self.partial,
            llm_ms=(time.perf_counter() - started) * 1000,
            prompt_tokens=self.prompt_tokens,
            output_tokens=len(self.token_ids),
            raw=self.text,
            cases=[getattr(c, "case_id", "") for c in cases],
        )
