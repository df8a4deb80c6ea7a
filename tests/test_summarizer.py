"""The summarizer with the real engine: partial then full, confidence where the model chose,
and a fallback with its reason for every way a summary can go wrong."""

from __future__ import annotations

import asyncio
import time

import pytest

from service.contracts import REQUEST_TYPES
from service.evaluate import masked_turns, rouge_l_chars
from service.replay import load_conversations
from service.summarizer import OUTPUT_SCHEMA, Summarizer, SummaryPolicy, _Decode, transcript_text, value_logprob

from .conftest import REPO

pytestmark = pytest.mark.asyncio(loop_scope="session")
SAMPLES = load_conversations(REPO / "samples" / "conversations.jsonl")


def with_policy(summarizer: Summarizer, **changes) -> Summarizer:
    policy = SummaryPolicy(**{**summarizer.policy.__dict__, **changes})
    return Summarizer(summarizer.engine, summarizer.retriever, policy)


async def test_partial_fields_arrive_before_the_full_summary_and_agree_with_it(summarizer):
    turns = masked_turns(SAMPLES[0])
    seen: list[tuple[float, dict]] = []

    async def on_partial(fields):
        seen.append((time.perf_counter(), fields))

    started = time.perf_counter()
    outcome = await summarizer.summarize(turns, on_partial=on_partial)
    done = time.perf_counter()
    assert outcome.fields is not None
    assert len(seen) == 1
    at, partial = seen[0]
    assert started < at < done
    assert partial == {"item_id": outcome.fields.item_id, "request_type": outcome.fields.request_type}


async def test_confidence_is_read_where_the_model_chose(summarizer):
    outcome = await summarizer.summarize(masked_turns(SAMPLES[1]))
    assert outcome.fields is not None and outcome.confidence is not None
    # All four request types are legal at that token, so it is a real choice: not forced to 0.
    assert outcome.confidence.request_type <= 0
    text = outcome.raw
    ends = summarizer.engine.token_char_ends(summarizer.engine.tokenizer.encode(text, add_special_tokens=False))
    forced = value_logprob(text, "item_id", ends, [0.0] * len(ends))
    assert forced == 0.0  # the helper reads the token at the value, nothing else


async def test_timeout_gives_a_timeout_fallback_and_the_engine_stays_usable(summarizer):
    impatient = with_policy(summarizer, timeout_s=0.05)
    outcome = await impatient.summarize(masked_turns(SAMPLES[2]))
    assert outcome.fallback_reason == "timeout" and outcome.fields is None
    again = await summarizer.summarize(masked_turns(SAMPLES[2]))
    assert again.fields is not None


async def test_low_confidence_gives_a_fallback(summarizer):
    strict = with_policy(summarizer, confidence_threshold=-1e-9)
    outcome = await strict.summarize(masked_turns(SAMPLES[3]))
    assert outcome.confidence is not None
    if outcome.confidence.request_type < -1e-9:
        assert outcome.fallback_reason == "low_confidence"
    else:  # the model was certain to float precision: nothing to fall back on
        assert outcome.fallback_reason is None


async def test_published_item_ids_always_occur_in_the_transcript(summarizer):
    """Run the real model on chats with and without order numbers: an `ok` outcome never carries
    an item_id that the (masked) transcript does not contain."""
    chats = [c for c in SAMPLES if not c["expected"]["item_id"]][:3] + [c for c in SAMPLES if c["expected"]["item_id"]][:3]
    outcomes = await asyncio.gather(*(summarizer.summarize(masked_turns(c)) for c in chats))
    for chat, outcome in zip(chats, outcomes):
        text = transcript_text(masked_turns(chat))
        if outcome.ok:
            assert outcome.fields.item_id == "" or outcome.fields.item_id in text
        elif outcome.fields is not None and outcome.fields.item_id not in text:
            assert outcome.fallback_reason == "invented_item_id"


def judged(summarizer: Summarizer, text: str, turns) -> object:
    """Judge a decoded text as if the model had produced it (the model cannot be made to
    invent an id or stop mid-JSON on demand)."""
    ids = summarizer.engine.tokenizer.encode(text, add_special_tokens=False)
    state = _Decode(text=text, token_ids=ids, logprobs=[-0.01] * len(ids))
    return summarizer._judge(state, turns, time.perf_counter(), [])


async def test_an_invented_item_id_is_a_fallback(summarizer):
    turns = masked_turns(SAMPLES[0])
    outcome = judged(summarizer, '{"item_id":"ZZ0000INVENTED","request_type":"其他","sentiment":"中性","summary_text":"客户咨询"}', turns)
    assert outcome.fallback_reason == "invented_item_id"


@pytest.mark.parametrize("text", [
    '{"item_id":"","request_type":"其他","sentiment":"中性","summary_text":"客户',  # cut at max_tokens
    '{"item_id":"","request_type":"其他","sentiment":"中性","summary_text":"' + "长" * 51 + '"}',
    '{"item_id":"","request_type":"退款","sentiment":"中性","summary_text":"x"}',
])
async def test_schema_or_length_violations_are_invalid_output(summarizer, text):
    assert judged(summarizer, text, masked_turns(SAMPLES[0])).fallback_reason == "invalid_output"


async def test_engine_errors_become_engine_error_fallbacks(summarizer):
    """A stand-in engine that fails mid-stream: a crashed engine core cannot be caused safely
    inside the shared test engine."""
    class FailingEngine:
        model_name = "failing"

        def render_chat(self, messages):
            return summarizer.engine.render_chat(messages)

        async def stream(self, *args, **kwargs):
            raise RuntimeError("engine core died")
            yield  # pragma: no cover

        async def abort(self, request_id):
            pass

    outcome = await Summarizer(FailingEngine(), summarizer.retriever, summarizer.policy).summarize(masked_turns(SAMPLES[0]))
    assert outcome.fallback_reason == "engine_error"


def test_output_schema_constrains_the_enums():
    assert OUTPUT_SCHEMA["properties"]["request_type"]["enum"] == list(REQUEST_TYPES)
    assert list(OUTPUT_SCHEMA["properties"])[:2] == ["item_id", "request_type"]  # partial needs this order


def test_rouge_l_chars():
    assert rouge_l_chars("客户要求退款", "客户要求退款") == 1.0
    assert rouge_l_chars("", "x") == 0.0
    assert 0 < rouge_l_chars("客户要退货", "客户要求退款") < 1
