"""The numbers of the operator page (`GET /api/overview`), read from the Prometheus registry.

`overview(registry)` is a pure function of the collectors' current samples: totals by label,
the SLA rate, latency percentiles interpolated from the histogram buckets the way PromQL's
`histogram_quantile` does, fallback and DLQ counts by reason, lag by partition, engine gauges.
Everything here is cumulative since the worker started (a counter has no rate by itself);
rates come from `RateWindow`, a tiny ring of (time, totals) readings that the web endpoint
feeds on every call, so a rate is the change of the totals over the last `window_s` seconds of
readings (the page polls every 2 s, which keeps the ring fed while someone looks at it).
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any

from prometheus_client import CollectorRegistry

FINAL_STATUSES = ("ok", "fallback")
PERCENTILES = (0.5, 0.95, 0.99)
#: The fields of a published summary that the page's table shows (all masked at the source).
RECENT_FIELDS = (
    "session_id", "summary_id", "version", "status", "trigger", "request_type", "sentiment",
    "item_id", "summary_text", "fallback_reason", "model",
)


def _samples(registry: CollectorRegistry) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)] over every collector of the registry."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in registry.collect():
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), float(sample.value)))
    return out


def _by(samples: dict[str, list[tuple[dict[str, str], float]]], name: str, label: str) -> dict[str, float]:
    """Values of `name` summed by one label."""
    totals: dict[str, float] = {}
    for labels, value in samples.get(name, []):
        key = labels.get(label, "")
        totals[key] = totals.get(key, 0.0) + value
    return totals


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float:
    return sum(value for _, value in samples.get(name, []))


def _num(x: float) -> int | float:
    """Counts as ints in the JSON (a counter of events is whole), other values as floats."""
    return int(x) if float(x).is_integer() else x


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """The q-quantile of a cumulative histogram [(le, count)], as PromQL's histogram_quantile:
    linear interpolation inside the bucket that holds the rank, the lower bound of the first
    bucket taken as 0, and the highest finite bound when the rank falls in the +Inf bucket.
    None when the histogram is empty."""
    if not buckets:
        return None
    buckets = sorted(buckets)
    total = buckets[-1][1]
    if total <= 0 or not math.isinf(buckets[-1][0]):
        return None
    rank = q * total
    prev_le, prev_count = 0.0, 0.0
    for le, count in buckets:
        if count >= rank:
            if math.isinf(le):
                return prev_le
            if count == prev_count:
                return le
            lower = prev_le if prev_le < le else 0.0
            return lower + (le - lower) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return prev_le


def _histogram(
    samples: dict[str, list[tuple[dict[str, str], float]]], name: str, match: dict[str, tuple[str, ...]] | None = None
) -> dict[str, Any]:
    """Percentiles, count and mean of histogram `name`, summed over the series whose labels match."""

    def wanted(labels: dict[str, str]) -> bool:
        return all(labels.get(k) in allowed for k, allowed in (match or {}).items())

    per_le: dict[float, float] = {}
    for labels, value in samples.get(f"{name}_bucket", []):
        if wanted(labels):
            le = float(labels["le"])
            per_le[le] = per_le.get(le, 0.0) + value
    count = sum(v for labels, v in samples.get(f"{name}_count", []) if wanted(labels))
    total = sum(v for labels, v in samples.get(f"{name}_sum", []) if wanted(labels))
    buckets = sorted(per_le.items())
    out: dict[str, Any] = {f"p{round(q * 100)}": histogram_quantile(q, buckets) for q in PERCENTILES}
    out["count"] = _num(count)
    out["mean"] = total / count if count else None
    # A percentile equal to this is only a lower bound: the rank fell in the +Inf bucket.
    out["max_bucket"] = max((le for le, _ in buckets if not math.isinf(le)), default=None)
    return out


def overview(registry: CollectorRegistry) -> dict[str, Any]:
    """Everything the operator page shows except recent summaries and rates, from `registry`."""
    s = _samples(registry)
    events = _by(s, "chatsum_events_total", "role")
    summaries = _by(s, "chatsum_summaries_total", "status")
    finals = sum(summaries.get(status, 0.0) for status in FINAL_STATUSES)
    within = _value(s, "chatsum_summaries_within_sla_total")
    lag = {p: _num(v) for p, v in sorted(_by(s, "chatsum_consumer_lag", "partition").items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else 0)}
    build = next((labels for labels, _ in s.get("chatsum_build_info", [])), {})
    tokens = _by(s, "chatsum_llm_tokens_total", "direction")
    return {
        "events": {"total": _num(sum(events.values())), "by_role": {k: _num(v) for k, v in sorted(events.items())}},
        "duplicates": _num(_value(s, "chatsum_events_duplicate_total")),
        "summaries": {
            "total": _num(sum(summaries.values())),
            "final": _num(finals),
            "by_status": {k: _num(v) for k, v in sorted(summaries.items())},
        },
        "within_sla": _num(within),
        "sla_rate": within / finals if finals else None,
        "latency_s": _histogram(s, "chatsum_trigger_to_publish_seconds", {"status": FINAL_STATUSES}),
        "partial_latency_s": _histogram(s, "chatsum_trigger_to_publish_seconds", {"status": ("partial",)}),
        "llm_seconds": _histogram(s, "chatsum_llm_seconds"),
        "retrieval_seconds": _histogram(s, "chatsum_retrieval_seconds"),
        "fallbacks": {k: _num(v) for k, v in sorted(_by(s, "chatsum_fallbacks_total", "reason").items())},
        "dlq": {k: _num(v) for k, v in sorted(_by(s, "chatsum_dlq_total", "reason").items())},
        "triggers": {k: _num(v) for k, v in sorted(_by(s, "chatsum_triggers_total", "trigger").items())},
        "pii_masked": {k: _num(v) for k, v in sorted(_by(s, "chatsum_pii_masked_total", "type").items())},
        "consumer_lag": {"total": _num(sum(lag.values())), "by_partition": lag},
        "sessions_open": _num(_value(s, "chatsum_sessions_open")),
        "llm": {
            "inflight": _num(_value(s, "chatsum_llm_inflight")),
            "queue_depth": _num(_value(s, "chatsum_llm_queue_depth")),
            "tokens_in": _num(tokens.get("in", 0.0)),
            "tokens_out": _num(tokens.get("out", 0.0)),
            "kv_cache_usage": _value(s, "chatsum_vllm_kv_cache_usage_ratio"),
            "vllm_waiting": _num(_value(s, "chatsum_vllm_requests_waiting")),
            "vllm_running": _num(_value(s, "chatsum_vllm_requests_running")),
        },
        "ready": _value(s, "chatsum_ready") >= 1,
        "model": build.get("model"),
        "version": build.get("version"),
    }


def recent_rows(recent: list[dict[str, Any]], n: int = 20) -> list[dict[str, Any]]:
    """The table rows of the last `n` published summaries (already masked by the worker)."""
    rows = []
    for event in recent[:n]:
        row = {k: event.get(k) for k in RECENT_FIELDS}
        timings = event.get("timings") or {}
        row["latency_ms"] = timings.get("latency_ms")
        row["published_at"] = timings.get("published_at")
        rows.append(row)
    return rows


class RateWindow:
    """Per-second rates of a few totals from successive readings kept for `window_s` seconds.

    `observe(totals)` records a reading (at most one per `min_span_s`, so many open pages do not
    grow the ring) and returns {name: rate or None}: the change since the oldest reading still
    in the window, over the time between them (None until readings `min_span_s` apart exist).
    A total that went down (a counter reset) restarts the ring."""

    def __init__(self, window_s: float = 60.0, min_span_s: float = 1.0, clock: Any = time.monotonic) -> None:
        self.window_s = window_s
        self.min_span_s = min_span_s
        self.clock = clock
        self.readings: deque[tuple[float, dict[str, float]]] = deque()

    def observe(self, totals: dict[str, float], now: float | None = None) -> dict[str, float | None]:
        now = self.clock() if now is None else now
        if self.readings and any(totals.get(k, 0.0) < v for k, v in self.readings[-1][1].items()):
            self.readings.clear()
        if not self.readings or now - self.readings[-1][0] >= self.min_span_s:
            self.readings.append((now, dict(totals)))
        # Keep one reading at or beyond the window's start, so a rate always spans the window.
        while len(self.readings) > 2 and now - self.readings[1][0] >= self.window_s:
            self.readings.popleft()
        first_t, first = self.readings[0]
        span = now - first_t
        if span < self.min_span_s:
            return {k: None for k in totals}
        return {k: (v - first.get(k, 0.0)) / span for k, v in totals.items()}
