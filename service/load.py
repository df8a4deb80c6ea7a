"""`chatsum load`: realistic conversations at a target message rate, Poisson arrivals, bounded.

Conversations start as a Poisson process whose rate gives the target messages/s on average;
within a conversation, messages follow with exponential gaps. Every conversation gets a fresh
session id. Only loopback brokers are accepted: this is a test tool, not a traffic cannon.
"""

from __future__ import annotations

import heapq
import ipaddress
import random
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

from confluent_kafka import Producer
from tqdm import tqdm

from .replay import event_bytes


class NotLoopback(ValueError):
    pass


def require_loopback(bootstrap: str) -> None:
    for server in bootstrap.split(","):
        host = server.rsplit(":", 1)[0].strip("[]")
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
        except socket.gaierror as exc:
            raise NotLoopback(f"cannot resolve {host}: {exc}") from exc
        if not all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
            raise NotLoopback(f"chatsum load only targets loopback brokers; {host} is not one")


@dataclass(frozen=True)
class LoadPlan:
    rate: float  # messages/s, on average
    duration_s: float  # no conversation starts after this
    mean_gap_s: float = 2.0  # between messages of one conversation
    end_of_chat: bool = True
    seed: int = 1


def plan_events(conversations: list[dict], plan: LoadPlan, prefix: str) -> Iterator[tuple[float, dict]]:
    """(offset in seconds, event fields), in time order."""
    rng = random.Random(plan.seed)
    mean_len = sum(len(c["messages"]) for c in conversations) / len(conversations)
    starts_per_s = plan.rate / mean_len
    heap: list[tuple[float, int, int, dict]] = []
    at, n = 0.0, 0
    while True:
        at += rng.expovariate(starts_per_s)
        if at > plan.duration_s:
            break
        conv = conversations[n % len(conversations)]
        sid = f"{prefix}-{n:06d}"
        t = at
        for i, message in enumerate(conv["messages"]):
            if i:
                t += rng.expovariate(1 / plan.mean_gap_s)
            fields = {"session_id": sid, "message_id": f"{sid}-{i:03d}", "role": message["role"], "text": message["text"],
                      "channel": conv.get("channel", "web"), "end_of_chat": plan.end_of_chat and i == len(conv["messages"]) - 1}
            heapq.heappush(heap, (t, n, i, fields))
        n += 1
    while heap:
        t, _, _, fields = heapq.heappop(heap)
        yield t, fields


def run_load(producer: Producer, topic: str, conversations: list[dict], plan: LoadPlan, prefix: str | None = None,
             progress: bool = True) -> dict[str, float]:
    """Produce on schedule; returns what was sent and the achieved rate."""
    prefix = prefix or f"load{int(time.time())}"
    events = list(plan_events(conversations, plan, prefix))
    sessions = {f["session_id"] for _, f in events}
    bar = tqdm(total=len(events), desc=f"load {plan.rate:g} msg/s", unit="msg", disable=not progress)
    start = time.monotonic()
    in_window = 0  # due within the arrival window; the conversations' tails after it thin out
    for at, fields in events:
        if at <= plan.duration_s:
            in_window += 1
        delay = start + at - time.monotonic()
        if delay > 0:
            producer.poll(0)
            time.sleep(delay)
        while True:
            try:
                producer.produce(topic, key=fields["session_id"].encode(), value=event_bytes(fields))
                break
            except BufferError:  # local queue full: let it drain rather than drop
                producer.poll(0.05)
        bar.update()
    producer.flush(30)
    bar.close()
    elapsed = time.monotonic() - start
    return {"messages": len(events), "conversations": len(sessions), "seconds": round(elapsed, 2),
            "achieved_rate": round(in_window / plan.duration_s, 1) if plan.duration_s else 0.0}
