"""`chatsum bench`: the service against the raw engine, on the same machine, model and prompts.

1. Raw engine: `vllm.LLM.generate` on the prompts the service builds (same retrieval, same
   schema, same sampling), all at once: summaries/s and output tokens/s.
2. Service, end to end through Kafka (embedded broker, in-process worker, same engine
   settings): saturation (the same conversations at once, one summary each) gives the
   service/raw ratio; then Poisson load at fractions of that capacity gives trigger->publish
   p50/p95/p99, SLA rate and consumer lag per level, and the knee where latency turns up.
3. The non-LLM path alone (ingest, mask, aggregate, publish) with the engine replaced by an
   instant fallback: messages/s and messages per CPU-second, next to a bare consumer and a
   do-nothing Faust agent reading the same messages.

The raw run goes in a child process; every phase has topics of its own; the report is
rewritten after each phase, so a cut run keeps what it measured.
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import sys
import tempfile
import time
from datetime import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from . import metrics
from .broker import EmbeddedBroker, free_port
from .evaluate import load_labelled, masked_turns, percentile
from .harness import RunningWorker
from .load import LoadPlan, run_load
from .prompt import Turn
from .replay import event_bytes, summaries
from .runtime import WARMUP_TRANSCRIPT, build_summarizer, engine_from_settings, start
from .settings import Settings
from .summarizer import OUTPUT_SCHEMA, Outcome, Summarizer
from .worker import ChatsumWorker, faust_app


def scoped(settings: Settings, tag: str) -> Settings:
    """Topics and group of their own, so no phase reads another phase's events."""
    names = ("topic_events", "topic_summaries", "topic_dlq", "topic_feedback", "topic_cases")
    return settings.model_copy(update={n: f"{tag}.{getattr(settings, n)}" for n in names} | {"app_id": f"{settings.app_id}-{tag}"})


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def raw_engine(summarizer: Summarizer, conversations: list[dict]) -> dict[str, Any]:
    """`vllm.LLM.generate` on the service's own prompts, in a child process: an `LLM` torn down
    in this process left the service's engine, started after it, hanging."""
    summarizer.engine.load_tokenizer()
    prompts = [(await summarizer.build_prompt(masked_turns(c)))[0] for c in conversations]
    warmup = (await summarizer.build_prompt(WARMUP_TRANSCRIPT))[0]  # not a bench prompt: no prefix-cache head start
    with tempfile.TemporaryDirectory() as tmp:
        job, out = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job.write_text(json.dumps({"prompts": prompts, "warmup": warmup, "max_tokens": summarizer.policy.max_tokens}))
        child = await asyncio.create_subprocess_exec(sys.executable, "-m", "service.bench", "raw", str(job), str(out))
        if await child.wait() != 0 or not out.exists():
            raise RuntimeError(f"the raw engine run failed (exit {child.returncode}); its output is above")
        return json.loads(out.read_text())


def _raw_child(job: Path, out: Path) -> None:
    from vllm import LLM

    spec = json.loads(job.read_text())
    engine = engine_from_settings(Settings())
    llm = LLM(**engine.engine_kwargs())
    params = engine.sampling_params(OUTPUT_SCHEMA, spec["max_tokens"], stream=False)
    llm.generate([spec["warmup"]] * 2, params, use_tqdm=False)  # warm, as the worker is
    started = time.perf_counter()
    outputs = llm.generate(spec["prompts"], params, use_tqdm=False)
    wall = time.perf_counter() - started
    tokens = sum(len(o.outputs[0].token_ids) for o in outputs)
    out.write_text(json.dumps({
        "summaries": len(outputs), "seconds": round(wall, 2), "summaries_per_s": round(len(outputs) / wall, 3),
        "output_tokens_per_s": round(tokens / wall, 1),
        "prompt_tokens_mean": round(statistics.mean(len(o.prompt_token_ids) for o in outputs), 1)}))


async def _finals(settings: Settings, worker: ChatsumWorker, prefix: str, expected: int, until: float) -> list[dict]:
    """Final (non-partial) summaries of the sessions with this prefix, read once every one of them
    is finished: no consumer of ours polls meanwhile (the embedded broker answers an empty fetch
    at once instead of waiting, so an idle consumer costs the engine ~0.6 of a core)."""
    key = prefix.encode()
    report_at = time.monotonic() + 10
    while time.monotonic() < until:
        done = sum(1 for sid, s in list(worker.live.items()) if sid.startswith(key) and s.finished)
        if done >= expected:
            break
        if time.monotonic() >= report_at:
            report_at += 10
            print(f"  ... {done}/{expected} conversations finished", flush=True)
        await asyncio.sleep(0.2)
    consumer = summaries(settings.kafka_client_config(), settings.topic_summaries, None, True)
    events: list[dict] = []
    try:
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 3.0:
            msg = await asyncio.to_thread(consumer.poll, 0.2)
            if msg is None or msg.error():
                continue
            quiet_since = time.monotonic()
            event = json.loads(msg.value())
            if event["session_id"].startswith(prefix) and event["status"] != "partial":
                events.append(event)
    finally:
        consumer.close()
    return events


async def saturation(settings: Settings, summarizer: Summarizer, conversations: list[dict]) -> dict[str, Any]:
    """The bench's conversations produced at once, summarised only at their end: one summary each,
    on the same prompts as the raw run."""
    settings = scoped(settings, "sat")
    only_at_end = settings.model_copy(update={"trigger_user_messages": 10_000, "max_queue_wait_s": 3600.0,
                                               "max_inflight": max(settings.max_inflight, len(conversations))})
    # Throughput, like the raw run: no summary is cut by the latency budget.
    timeout, summarizer.policy.timeout_s = summarizer.policy.timeout_s, 3600.0
    running = RunningWorker(only_at_end, summarizer)
    worker = await running.start()
    try:
        producer = Producer(settings.producer_config())
        started_at = time.time()
        for n, conv in enumerate(conversations):
            sid = f"sat-{n:04d}"
            for i, m in enumerate(conv["messages"]):
                fields = {"session_id": sid, "message_id": f"{sid}-{i}", "role": m["role"], "text": m["text"],
                          "channel": "web", "end_of_chat": i == len(conv["messages"]) - 1}
                producer.produce(settings.topic_events, key=sid.encode(), value=event_bytes(fields))
        producer.flush(30)
        finals = await _finals(settings, worker, "sat-", len(conversations), time.monotonic() + 1800)
        # The clock stops at the last publish, not when the topic was read back.
        wall = max(datetime.fromisoformat(e["timings"]["published_at"]).timestamp() for e in finals) - started_at
    finally:
        summarizer.policy.timeout_s = timeout
        await running.stop()
    ok = sum(e["status"] == "ok" for e in finals)
    # Where the wall time went: the last run's start is when the last conversation's end was
    # ingested and scheduled; its summarizer time is the engine's share of the tail.
    started = [datetime.fromisoformat(e["timings"]["trigger_at"]).timestamp() + e["timings"]["queue_ms"] / 1000 for e in finals]
    llm = [e["timings"]["llm_ms"] / 1000 for e in finals]
    return {"summaries": len(finals), "ok": ok, "seconds": round(wall, 2), "summaries_per_s": round(len(finals) / wall, 3),
            "last_run_started_s": round(max(started) - started_at, 2), "llm_p50_s": round(percentile(llm, 50), 3),
            "llm_max_s": round(max(llm), 3)}


async def load_level(settings: Settings, summarizer: Summarizer, conversations: list[dict], rate: float,
                     duration_s: float, tag: str) -> dict[str, Any]:
    settings = scoped(settings, tag)
    running = RunningWorker(settings, summarizer)
    worker = await running.start()
    lag_samples: list[float] = []
    stop = asyncio.Event()

    async def sample_lag() -> None:
        while not stop.is_set():
            worker.refresh_lag()
            lag_samples.append(sum(s.value for m in metrics.CONSUMER_LAG.collect() for s in m.samples))
            await asyncio.sleep(1.0)

    sampler = asyncio.ensure_future(sample_lag())
    try:
        plan = LoadPlan(rate=rate, duration_s=duration_s, mean_gap_s=1.5)
        sent = await asyncio.to_thread(run_load, Producer(settings.producer_config()), settings.topic_events,
                                       conversations, plan, tag, False)
        finals = await _finals(settings, worker, tag, sent["conversations"], time.monotonic() + max(60.0, duration_s * 2))
    finally:
        stop.set()
        await sampler
        await running.stop()
    latencies = [e["timings"]["latency_ms"] / 1000 for e in finals]
    # Where the time goes: the summarizer (retrieval and engine) vs everything around it.
    llm = [e["timings"]["llm_ms"] / 1000 for e in finals]
    around = [lat - t for lat, t in zip(latencies, llm)]
    fallbacks: dict[str, int] = {}
    for e in finals:
        if e["fallback_reason"]:
            fallbacks[e["fallback_reason"]] = fallbacks.get(e["fallback_reason"], 0) + 1
    # The design's SLA is the first summary's (the customer's third message): shown apart from
    # updates and end-of-chat summaries, whose load and timing differ.
    by_trigger: dict[str, dict[str, float | None]] = {}
    for trigger in sorted({e["trigger"] for e in finals}):
        of = [e["timings"]["latency_ms"] / 1000 for e in finals if e["trigger"] == trigger]
        by_trigger[trigger] = {"n": len(of), "p50_s": round(percentile(of, 50), 3), "p99_s": round(percentile(of, 99), 3),
                               "sla_rate": _sla_rate(of, settings.sla_s)}
    return {
        "offered_msgs_per_s": rate, "achieved_msgs_per_s": sent["achieved_rate"], "conversations": sent["conversations"],
        "summaries": len(finals), "summaries_per_s": round(len(finals) / max(sent["seconds"], 1e-9), 3),
        "p50_s": round(percentile(latencies, 50), 3), "p95_s": round(percentile(latencies, 95), 3),
        "p99_s": round(percentile(latencies, 99), 3),
        "llm_p50_s": round(percentile(llm, 50), 3), "llm_p99_s": round(percentile(llm, 99), 3),
        "outside_llm_p50_s": round(percentile(around, 50), 3), "outside_llm_p99_s": round(percentile(around, 99), 3),
        "sla_rate": _sla_rate(latencies, settings.sla_s),
        "max_lag": max(lag_samples or [0.0]), "fallbacks": fallbacks, "by_trigger": by_trigger,
    }


def _sla_rate(latencies: list[float], sla_s: float) -> float | None:
    return round(sum(x <= sla_s for x in latencies) / len(latencies), 3) if latencies else None


class _Instant:
    """The engine disabled: every summary is an immediate fallback (measures everything else)."""

    class engine:
        model_name = "disabled"
        ready = True

        @staticmethod
        def stats() -> dict[str, float]:
            return {}

    retriever = None

    async def summarize(self, turns: Sequence[Turn], on_partial: Any = None, request_id: str | None = None) -> Outcome:
        return Outcome(fields=None, fallback_reason="engine_error")


def _events_total() -> float:
    return sum(s.value for m in metrics.EVENTS.collect() for s in m.samples if s.name.endswith("_total"))


async def non_llm_path(settings: Settings, conversations: list[dict], messages: int) -> dict[str, Any]:
    """Steady state: the messages wait in the topic; the clock starts once the worker has joined
    and stops when every message is ingested and every owed (instant) summary is published."""
    from .topics import ensure_topics

    settings = scoped(settings, "fast").model_copy(update={"debounce_s": 0.0})
    ensure_topics(settings)
    producer = Producer(settings.producer_config() | {"linger.ms": 20, "queue.buffering.max.messages": 1_000_000})
    n = 0
    while n < messages:
        for conv in conversations:
            sid = f"fast-{n:07d}"
            for i, m in enumerate(conv["messages"]):
                fields = {"session_id": sid, "message_id": f"{sid}-{i}", "role": m["role"], "text": m["text"],
                          "channel": "web", "end_of_chat": i == len(conv["messages"]) - 1}
                producer.produce(settings.topic_events, key=sid.encode(), value=event_bytes(fields))
                n += 1
            producer.poll(0)
            if n >= messages:
                break
    producer.flush(60)

    # Baseline: a bare consumer reading the same messages, clocked from its first message.
    consumer = summaries(settings.kafka_client_config(), settings.topic_events, None, True).consumer
    seen = 0
    while not seen:
        seen = sum(1 for m in consumer.consume(1000, 1.0) if not m.error())
    started, cpu0, first = time.perf_counter(), _cpu_s(), seen
    while seen < n:
        seen += sum(1 for m in consumer.consume(1000, 1.0) if not m.error())
    wall, cpu = time.perf_counter() - started, _cpu_s() - cpu0
    bare = {"msgs_per_s": round((n - first) / wall, 1), "msgs_per_cpu_s": round((n - first) / cpu, 1)}
    consumer.close()

    faust_floor = await _bare_faust_agent(settings, n)

    before = _events_total()
    running = RunningWorker(settings, _Instant())  # type: ignore[arg-type]
    worker = await running.start()
    started, cpu0, done0 = time.perf_counter(), _cpu_s(), _events_total()
    deadline = started + 600
    while time.perf_counter() < deadline and (_events_total() - before < n or worker.due or worker.inflight):
        await asyncio.sleep(0.05)
    wall, cpu = time.perf_counter() - started, _cpu_s() - cpu0
    processed = _events_total() - done0
    await running.stop()
    return {"messages": n, "clocked": int(processed), "seconds": round(wall, 2), "msgs_per_s": round(processed / wall, 1),
            "msgs_per_cpu_s": round(processed / cpu, 1), "baseline_bare_consumer": bare,
            "baseline_bare_faust_agent": faust_floor,
            "ratio_to_bare_faust_per_cpu_s": round(processed / cpu / faust_floor["msgs_per_cpu_s"], 3),
            "note": "clocked after the worker joined, until every message is ingested and every owed summary "
                    "published; CPU seconds are this process's (Faust, worker, librdkafka threads), the broker excluded"}


def _runs_per_conversation(conversation: dict, third: int) -> int:
    """Summaries one conversation asks for when its messages come seconds apart (gaps longer than
    the debounce): the first at the `third` customer message, an update for each later one, the
    final. Fewer in practice: updates still in flight are superseded."""
    users = sum(m["role"] == "user" for m in conversation["messages"])
    return (users >= third) + max(users - third, 0) + 1


def knee(levels: list[dict[str, Any]]) -> float | None:
    """The first load level where latency turns up (p99 over twice the lightest level's) or the
    engine can no longer keep up (over 5 % overload fallbacks)."""
    base = levels[0]["p99_s"] if levels else 0.0
    for level in levels:
        overloaded = level["fallbacks"].get("overload", 0) > 0.05 * max(level["summaries"], 1)
        if level["p99_s"] > 2 * base or overloaded:
            return level["fraction_of_capacity"]
    return None


async def _bare_faust_agent(settings: Settings, n: int) -> dict[str, float]:
    """The floor Faust itself sets on this machine: an agent that only counts the messages."""
    app = faust_app(settings.model_copy(update={"app_id": f"{settings.app_id}-bare", "instance_id": "bare"}), web_enabled=False)
    seen = 0

    async def count(stream: Any) -> None:
        nonlocal seen
        async for _ in stream.events():
            seen += 1

    app.agent(app.topic(settings.topic_events, key_serializer="raw", value_serializer="raw"), name="count")(count)
    await app.start()
    try:
        while not seen:
            await asyncio.sleep(0.01)
        started, cpu0, first = time.perf_counter(), _cpu_s(), seen
        while seen < n and time.perf_counter() - started < 600:
            await asyncio.sleep(0.01)
        wall, cpu = time.perf_counter() - started, _cpu_s() - cpu0
    finally:
        await app.stop()
    return {"msgs_per_s": round((seen - first) / wall, 1), "msgs_per_cpu_s": round((seen - first) / cpu, 1)}


async def run_bench(settings: Settings, devset: Path, conversations_n: int, levels: list[float], duration_s: float,
                    fast_messages: int, out: Path, skip_raw: bool = False) -> dict[str, Any]:
    """Runs the phases in order; the report is rewritten after each, so a cut run keeps what it measured."""
    conversations = load_labelled(devset)[:conversations_n]
    report: dict[str, Any] = {"conversations": len(conversations), "levels": []}
    t0 = time.monotonic()

    def checkpoint(phase: str) -> None:
        report.setdefault("phase_seconds", {})[phase] = round(time.monotonic() - t0, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print(f"[{time.monotonic() - t0:7.1f}s] {phase}", flush=True)

    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(Path(tmp), port=free_port()) as broker:
        settings = settings.model_copy(update={"bootstrap": broker.bootstrap, "app_id": f"bench{int(time.time())}"})
        summarizer = build_summarizer(settings)
        report["model"] = summarizer.engine.model_name
        checkpoint("prepared")
        try:
            await _engine_phases(settings, summarizer, conversations, devset, levels, duration_s, skip_raw, report, checkpoint)
        finally:
            summarizer.engine.shutdown()  # a failed phase must not leave the engine core running
        if fast_messages:
            report["non_llm_path"] = await non_llm_path(settings, load_labelled(devset), fast_messages)
            checkpoint("non-LLM path: " + json.dumps(report["non_llm_path"]))
    return report


async def _engine_phases(settings: Settings, summarizer: Summarizer, conversations: list[dict], devset: Path,
                         levels: list[float], duration_s: float, skip_raw: bool, report: dict[str, Any], checkpoint: Any) -> None:
    if not skip_raw:
        report["raw"] = await raw_engine(summarizer, conversations)
        checkpoint("raw engine: " + json.dumps(report["raw"]))
    await start(summarizer)
    checkpoint("service engine started and warm")
    report["saturation"] = await saturation(settings, summarizer, conversations)
    if "raw" in report:
        report["service_raw_ratio"] = round(report["saturation"]["summaries_per_s"] / report["raw"]["summaries_per_s"], 3)
    everything = load_labelled(devset)
    mean_msgs = statistics.mean(len(c["messages"]) for c in everything)
    runs = statistics.mean(_runs_per_conversation(c, settings.trigger_user_messages) for c in everything)
    # Saturation gave one summary per conversation; under load each needs `runs` of them.
    capacity = report["saturation"]["summaries_per_s"] * mean_msgs / runs
    report["estimated_capacity_msgs_per_s"] = round(capacity, 2)
    report["summaries_per_conversation_at_most"] = round(runs, 2)
    checkpoint("saturation: " + json.dumps(report["saturation"]))
    for fraction in levels:
        level = await load_level(settings, summarizer, load_labelled(devset), capacity * fraction, duration_s,
                                 f"l{int(fraction * 100)}")
        level["fraction_of_capacity"] = fraction
        report["levels"].append(level)
        report["knee_fraction_of_capacity"] = knee(report["levels"])
        checkpoint(f"load {fraction:.0%}: " + json.dumps(level))


if __name__ == "__main__" and sys.argv[1:2] == ["raw"]:
    _raw_child(Path(sys.argv[2]), Path(sys.argv[3]))
