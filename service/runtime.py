"""Assembling the parts from settings: the engine (started and warmed), the retriever, the
summarizer. Used by the worker, `chatsum eval`, `chatsum bench` and the tests alike."""

from __future__ import annotations

import logging
import time

from . import metrics
from .assets import ensure_llm
from .engine import Engine, EngineSettings, is_cpu_build
from .prompt import Turn
from .sessions import Message
from .settings import Settings
from .summarizer import OUTPUT_SCHEMA, Retriever, Summarizer, SummaryPolicy

log = logging.getLogger("chatsum.runtime")

WARMUP_TRANSCRIPT: list[Turn] = [
    Message(role="user", text="你好，我昨天买的鞋子尺码不对，订单号 WARMUP0001", ts=0.0),
    Message(role="agent", text="您好，请问需要换成什么尺码？", ts=0.0),
    Message(role="user", text="换大一码，42的", ts=0.0),
]


def engine_from_settings(settings: Settings) -> Engine:
    model_dir = ensure_llm(settings.model, settings.cache_dir)
    return Engine(
        EngineSettings(
            model_dir=model_dir,
            max_model_len=settings.max_model_len,
            max_num_seqs=settings.max_num_seqs,
            gpu_memory_utilization=settings.gpu_memory_utilization,
        )
    )


def retriever_from_settings(settings: Settings) -> Retriever:
    if settings.fewshot_k <= 0:
        return Retriever()
    from .fewshot import FewShotRetriever

    return FewShotRetriever.from_settings(settings)


def policy_from_settings(settings: Settings) -> SummaryPolicy:
    return SummaryPolicy(
        # 2 CPU cores decode ~18 tok/s: a 3 s budget would turn every summary into a fallback.
        timeout_s=settings.summary_timeout_s or (30.0 if is_cpu_build() else 3.0),
        confidence_threshold=settings.confidence_threshold,
        max_tokens=settings.max_tokens,
        max_prompt_chars=settings.max_prompt_chars,
    )


async def warm_up(summarizer: Summarizer) -> None:
    """Compile the grammar, fill the prefix cache and run the first (slow) step before the worker
    consumes: the first request on a cold engine takes several times as long as later ones."""
    started = time.perf_counter()
    policy = summarizer.policy
    timeout, policy.timeout_s = policy.timeout_s, max(policy.timeout_s, 300.0)
    # One bare request first: a broken engine fails here with its own error, not as a fallback.
    prompt, _ = await summarizer.build_prompt(WARMUP_TRANSCRIPT)
    async for _ in summarizer.engine.stream(prompt, OUTPUT_SCHEMA, "warmup-raw", 16):
        pass
    try:
        outcome = await summarizer.summarize(WARMUP_TRANSCRIPT, request_id="warmup")
    finally:
        policy.timeout_s = timeout
    if outcome.fallback_reason in ("engine_error", "timeout", "invalid_output"):
        raise RuntimeError(f"engine warm-up failed: {outcome.fallback_reason}")
    summarizer.engine.ready = True
    metrics.READY.set(1)
    log.info("engine warm", extra={"warmup_s": round(time.perf_counter() - started, 2)})


def build_summarizer(settings: Settings, engine: Engine | None = None) -> Summarizer:
    """Model prepared and retriever loaded; the engine is not started yet (see `start`)."""
    engine = engine or engine_from_settings(settings)
    metrics.BUILD.info({"model": engine.model_name, "version": "0.1.0"})
    return Summarizer(engine, retriever_from_settings(settings), policy_from_settings(settings))


async def start(summarizer: Summarizer) -> Summarizer:
    """Engine started (blocking: tens of seconds on CPU) and warm."""
    if not summarizer.engine.started:
        summarizer.engine.start()
    await warm_up(summarizer)
    return summarizer
