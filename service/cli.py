"""`chatsum` command line. `chatsum --help` lists the commands; each has its own --help."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from .settings import REPO_ROOT, Settings

SAMPLES = REPO_ROOT / "samples" / "conversations.jsonl"


def cmd_worker(args: argparse.Namespace) -> None:
    """Run one worker: consume chat.events, publish chat.summaries (blocks until stopped)."""
    import asyncio

    import faust

    from .logs import setup_logging
    from .runtime import build_summarizer, start
    from .topics import ensure_topics
    from .worker import ChatsumWorker

    settings = Settings()
    setup_logging(settings.log_level)
    ensure_topics(settings)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    summarizer = build_summarizer(settings)
    worker = ChatsumWorker(settings, summarizer, model_name=summarizer.engine.model_name)
    # The engine starts and warms up before the consumer joins the group, so the worker is
    # never assigned partitions it cannot serve yet.
    loop.run_until_complete(start(summarizer))
    runner = faust.Worker(worker.app, loop=loop, loglevel=settings.log_level, quiet=True,
                          override_logging=False, redirect_stdouts=False)
    try:
        runner.execute_from_commandline()
    finally:
        summarizer.engine.shutdown()


def cmd_broker(args: argparse.Namespace) -> None:
    """Run the embedded Kafka-protocol broker in the foreground, with chatsum's topics."""
    from .broker import EmbeddedBroker
    from .topics import ensure_topics

    settings = Settings()
    broker = EmbeddedBroker(args.data_dir or settings.broker_data_dir, port=args.port)
    broker.start()
    ensure_topics(settings.model_copy(update={"bootstrap": broker.bootstrap}))
    print(f"broker on {broker.bootstrap} (data in {broker.data_dir}); Ctrl-C stops it", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()


def cmd_produce(args: argparse.Namespace) -> None:
    """Send JSONL conversations to chat.events with realistic timing."""
    from confluent_kafka import Producer

    from .replay import Timing, load_conversations, replay

    settings = Settings()
    conversations = load_conversations(Path(args.file))[: args.limit or None]
    producer = Producer(settings.producer_config())
    n = replay(producer, settings.topic_events, conversations, Timing(speed=args.speed), args.stagger, not args.no_end)
    print(f"sent {n} events from {len(conversations)} conversations to {settings.topic_events}")


def format_summary(event: dict) -> str:
    fields = "/".join(str(event.get(k) or "-") for k in ("request_type", "sentiment"))
    conf = event.get("confidence") or {}
    extra = f" reason={event['fallback_reason']}" if event.get("fallback_reason") else ""
    conf_txt = f" conf={conf['request_type']:.2f}" if conf else ""
    return (
        f"[{event['session_id']}] v{event['version']} {event['status']:<8} {event['trigger']:<13} {fields:<8} "
        f"item={event.get('item_id') or '-'} \"{event.get('summary_text') or ''}\" "
        f"({event['timings']['latency_ms'] / 1000:.2f}s{conf_txt}{extra})"
    )


def cmd_tail(args: argparse.Namespace) -> None:
    """Print summaries as they are published."""
    from .replay import summaries

    settings = Settings()
    consumer = summaries(settings.kafka_client_config(), args.topic or settings.topic_summaries, None, args.from_beginning)
    try:
        while True:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            event = json.loads(msg.value())
            print(json.dumps(event, ensure_ascii=False) if args.json else format_summary(event), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()


def cmd_mask(args: argparse.Namespace) -> None:
    """Clean and mask text lines from stdin to stdout."""
    from .mask import main

    main()


def cmd_schemas(args: argparse.Namespace) -> None:
    """Write the JSON Schemas of every contract into schemas/."""
    from .contracts import export_schemas

    for path in export_schemas():
        print(path)


def cmd_eval(args: argparse.Namespace) -> None:
    """Run the summarizer (the worker's code path, no Kafka) over a labelled JSONL; report."""
    import asyncio

    from .evaluate import evaluate, print_report
    from .runtime import build_summarizer, start

    settings = Settings()
    if args.no_fewshot:
        settings = settings.model_copy(update={"fewshot_k": 0})
    if args.model:
        settings = settings.model_copy(update={"model": args.model})

    async def main() -> dict:
        summarizer = await start(build_summarizer(settings))
        try:
            label = f"{summarizer.engine.model_name}, {'no few-shot' if args.no_fewshot else f'{settings.fewshot_k}-shot retrieval'}"
            return await evaluate(summarizer, Path(args.file), label, args.concurrency, args.limit)
        finally:
            summarizer.engine.shutdown()

    result = asyncio.run(main())
    result["command"] = "chatsum eval " + " ".join(sys.argv[2:])
    print_report(result)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"report written to {out}")


def cmd_feedback(args: argparse.Namespace) -> None:
    """Send an agent's verdict on a summary to chat.feedback (confirmed/corrected -> a case)."""
    from confluent_kafka import Producer

    from .contracts import FeedbackEvent, summary_id_for

    corrected = dict(pair.split("=", 1) for pair in args.set) if args.set else None
    feedback = FeedbackEvent(
        summary_id=args.summary_id or summary_id_for(args.session),
        session_id=args.session,
        version=args.version,
        verdict=args.verdict,
        error_type=args.error_type,
        corrected=corrected,
        agent_id=args.agent,
    )
    settings = Settings()
    producer = Producer(settings.producer_config())
    producer.produce(settings.topic_feedback, key=args.session.encode(), value=feedback.model_dump_json().encode())
    producer.flush(10)
    print(f"sent {feedback.verdict} for {feedback.summary_id} v{feedback.version} to {settings.topic_feedback}")


def cmd_load(args: argparse.Namespace) -> None:
    """Replay conversations with Poisson arrivals at a target message rate (loopback only)."""
    from confluent_kafka import Producer

    from .load import LoadPlan, require_loopback, run_load
    from .replay import load_conversations

    settings = Settings()
    require_loopback(settings.bootstrap)
    plan = LoadPlan(rate=args.rate, duration_s=args.duration, mean_gap_s=args.gap)
    result = run_load(Producer(settings.producer_config()), settings.topic_events, load_conversations(Path(args.file)), plan)
    print(json.dumps(result))


def cmd_bench(args: argparse.Namespace) -> None:
    """Raw engine vs the service end to end at several loads, and the non-LLM path; JSON report."""
    import asyncio

    from .bench import run_bench
    from .logs import setup_logging

    setup_logging(Settings().log_level)
    levels = [float(x) for x in args.levels.split(",")] if args.levels else []
    out = Path(args.out)
    report = asyncio.run(run_bench(Settings(), Path(args.devset), args.conversations, levels, args.duration,
                                   args.fast_messages, out, args.skip_raw))
    report["command"] = "chatsum bench " + " ".join(sys.argv[2:])
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in report.items() if k != "levels"}, ensure_ascii=False, indent=2))
    for level in report["levels"]:
        print(f"load {level['fraction_of_capacity']:.0%}: {level['summaries_per_s']} summaries/s, p50 {level['p50_s']}s "
              f"p95 {level['p95_s']}s p99 {level['p99_s']}s, SLA {level['sla_rate']}, max lag {level['max_lag']}")
    print(f"report written to {out}")


def _wait_ready(port: int, proc: subprocess.Popen, timeout_s: float) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(f"the worker exited with {proc.returncode} while starting; its log is above")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        print(f"\r  starting the worker: loading and warming the engine ({time.monotonic() - started:.0f}s)", end="", flush=True)
        time.sleep(1)
    raise SystemExit(f"the worker was not ready after {timeout_s:.0f}s")


def cmd_demo(args: argparse.Namespace) -> None:
    """Embedded broker + a worker + the sample conversations replayed; prints summaries live."""
    from confluent_kafka import Producer
    from pydantic import ValidationError

    from .assets import ensure_llm
    from .broker import EmbeddedBroker, free_port
    from .contracts import SummaryEvent
    from .replay import Timing, load_conversations, replay, summaries
    from .topics import ensure_topics

    settings = Settings()
    conversations = load_conversations(Path(args.file))[: args.count]
    data_dir = settings.cache_dir / "demo-broker"
    shutil.rmtree(data_dir, ignore_errors=True)
    broker = EmbeddedBroker(data_dir, port=free_port())
    worker: subprocess.Popen | None = None
    consumer = None
    try:
        print("1/4 model: ", end="", flush=True)
        print(ensure_llm(settings.model, settings.cache_dir))
        broker.start()
        env_settings = settings.model_copy(update={"bootstrap": broker.bootstrap, "web_port": free_port()})
        ensure_topics(env_settings)
        print(f"2/4 broker: {broker.bootstrap} (embedded noida-db), topics created")
        env = os.environ | {"CHATSUM_BOOTSTRAP": broker.bootstrap, "CHATSUM_WEB_PORT": str(env_settings.web_port),
                            "CHATSUM_LOG_LEVEL": os.environ.get("CHATSUM_LOG_LEVEL", "WARNING")}
        worker = subprocess.Popen([sys.executable, "-m", "service.cli", "worker"], env=env, start_new_session=True)
        _wait_ready(env_settings.web_port, worker, args.ready_timeout)
        print(f"\n3/4 worker ready: metrics and operator page on http://127.0.0.1:{env_settings.web_port}/")
        consumer = summaries(env_settings.kafka_client_config(), settings.topic_summaries, None, True)
        producer = Producer(env_settings.producer_config())
        print(f"4/4 replaying {len(conversations)} conversations (speed x{args.speed}); summaries as they arrive:")
        sender = threading.Thread(
            target=replay, args=(producer, settings.topic_events, conversations, Timing(speed=args.speed), args.stagger), daemon=True
        )
        sender.start()
        finished: set[str] = set()
        invalid = 0
        deadline = time.monotonic() + args.timeout
        wanted = {c["session_id"] for c in conversations}
        while finished != wanted and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            try:
                event = SummaryEvent.model_validate_json(msg.value())
            except ValidationError:
                invalid += 1
                continue
            print("  " + format_summary(event.model_dump(mode="json")), flush=True)
            if event.trigger == "end_of_chat" and event.status != "partial":
                finished.add(event.session_id)
        missing = sorted(wanted - finished)
        print(f"done: {len(finished)}/{len(wanted)} conversations summarised to the end, {invalid} invalid events"
              + (f"; still waiting for {missing}" if missing else ""))
        if missing or invalid:
            raise SystemExit(1)
    except KeyboardInterrupt:
        print("\ninterrupted; stopping")
    finally:
        if consumer is not None:
            consumer.close()
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        broker.stop()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chatsum", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, fn, help_text: str | None = None) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text or fn.__doc__, description=fn.__doc__)
        p.set_defaults(fn=fn)
        return p

    add("worker", cmd_worker)
    p = add("broker", cmd_broker)
    p.add_argument("--port", type=int, default=19092)
    p.add_argument("--data-dir", type=Path)
    p = add("produce", cmd_produce)
    p.add_argument("file")
    p.add_argument("--speed", type=float, default=1.0, help="Time compression (2 = twice as fast as people type).")
    p.add_argument("--stagger", type=float, default=2.0, help="Seconds between conversation starts.")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--no-end", action="store_true", help="Do not mark the last message as end of chat.")
    p = add("tail", cmd_tail)
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--json", action="store_true", help="Print the whole events.")
    p.add_argument("--topic")
    add("mask", cmd_mask)
    p = add("feedback", cmd_feedback)
    p.add_argument("session", help="session_id of the conversation")
    p.add_argument("verdict", choices=["accept", "reject"])
    p.add_argument("--version", type=int, default=1, help="Summary version the verdict is about.")
    p.add_argument("--summary-id", help="Default: derived from the session id.")
    p.add_argument("--error-type", choices=["ID错误", "类型错误", "情绪错误", "摘要冗长"])
    p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="A corrected field, e.g. request_type=退换货.")
    p.add_argument("--agent", default="", help="Agent id.")
    p = add("load", cmd_load)
    p.add_argument("--rate", type=float, default=20.0, help="Messages/s on average.")
    p.add_argument("--duration", type=float, default=60.0, help="Seconds during which conversations start.")
    p.add_argument("--gap", type=float, default=2.0, help="Mean seconds between messages of a conversation.")
    p.add_argument("--file", default=str(SAMPLES))
    p = add("bench", cmd_bench)
    p.add_argument("--devset", default=str(REPO_ROOT / "eval" / "devset.jsonl"))
    p.add_argument("--conversations", type=int, default=32, help="Conversations for the raw vs saturation comparison.")
    p.add_argument("--levels", default="0.25,0.5,0.7,1.0,1.3", help="Load levels as fractions of the measured capacity.")
    p.add_argument("--duration", type=float, default=30.0, help="Seconds of load per level.")
    p.add_argument("--fast-messages", type=int, default=20000, help="Messages for the non-LLM path (0 skips it).")
    p.add_argument("--skip-raw", action="store_true")
    p.add_argument("--out", default="benchmarks/results/bench-cpu.json")
    p = add("eval", cmd_eval)
    p.add_argument("file")
    p.add_argument("--no-fewshot", action="store_true", help="Without retrieval, for comparison.")
    p.add_argument("--out", default="eval/report.json")
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--model", help="Model dir or shipped name (qwen2.5-coder-1.5b-instruct); default CHATSUM_MODEL.")
    add("schemas", cmd_schemas)
    p = add("demo", cmd_demo)
    p.add_argument("--file", default=str(SAMPLES))
    p.add_argument("--count", type=int, default=8, help="How many sample conversations to replay.")
    p.add_argument("--speed", type=float, default=3.0)
    p.add_argument("--stagger", type=float, default=3.0)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--ready-timeout", type=float, default=600.0)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.fn(args)


if __name__ == "__main__":
    main()
