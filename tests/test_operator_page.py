"""The operator page (GET /, service/static/operator.html) and its data (GET /api/overview).

- `overview()` and friends, unit-tested on a registry of their own.
- A real headless Chromium (Debian's `chromium`, driven by Playwright; installed by
  scripts/install-test-tools.sh) against a real worker with its web server, the real broker and
  the real engine: the page shows what /api/overview and /metrics say, lists the summaries just
  published, and refreshes by itself. It takes a screenshot; with CHATSUM_UPDATE_SCREENSHOT=1 it
  replaces docs/operator-page.png (a plain run leaves the tree clean).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.parser import text_string_to_metric_families

from service.metrics import LATENCY_BUCKETS
from service.overview import RateWindow, histogram_quantile, overview, recent_rows
from service.replay import load_conversations

from .conftest import REPO, RunningWorker, chat_event, collect, producer

pytestmark = pytest.mark.asyncio(loop_scope="session")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOT = REPO / "docs" / "operator-page.png"


# ---- overview(), unit ----------------------------------------------------------------------------

def small_registry() -> tuple[CollectorRegistry, dict]:
    """The metrics overview() reads, with the names and labels of service/metrics.py."""
    r = CollectorRegistry()
    m = {
        "events": Counter("chatsum_events_total", "", ["role"], registry=r),
        "summaries": Counter("chatsum_summaries_total", "", ["status"], registry=r),
        "within": Counter("chatsum_summaries_within_sla_total", "", registry=r),
        "latency": Histogram("chatsum_trigger_to_publish_seconds", "", ["status"], buckets=LATENCY_BUCKETS, registry=r),
        "fallbacks": Counter("chatsum_fallbacks_total", "", ["reason"], registry=r),
        "dlq": Counter("chatsum_dlq_total", "", ["reason"], registry=r),
        "lag": Gauge("chatsum_consumer_lag", "", ["partition"], registry=r),
        "sessions": Gauge("chatsum_sessions_open", "", registry=r),
        "tokens": Counter("chatsum_llm_tokens_total", "", ["direction"], registry=r),
        "kv": Gauge("chatsum_vllm_kv_cache_usage_ratio", "", registry=r),
        "build": Info("chatsum_build", "", registry=r),
    }
    return r, m


async def test_overview_of_an_empty_registry_has_no_rates_or_percentiles():
    data = overview(small_registry()[0])
    assert data["summaries"] == {"total": 0, "final": 0, "by_status": {}}
    assert data["sla_rate"] is None
    assert data["latency_s"] == {"p50": None, "p95": None, "p99": None, "count": 0, "mean": None, "max_bucket": None}
    assert data["consumer_lag"] == {"total": 0, "by_partition": {}}
    assert data["model"] is None
    json.dumps(data)  # what the endpoint returns must serialise


async def test_overview_totals_sla_rate_latency_and_breakdowns():
    r, m = small_registry()
    m["events"].labels("user").inc(30)
    m["events"].labels("agent").inc(20)
    m["summaries"].labels("partial").inc(10)
    m["summaries"].labels("ok").inc(8)
    m["summaries"].labels("fallback").inc(2)
    m["within"].inc(9)
    for s in (0.2, 0.4, 0.6, 0.8, 0.9, 1.1, 1.1, 1.1, 2.5):
        m["latency"].labels("ok").observe(s)
    m["latency"].labels("fallback").observe(31.0)  # beyond the last bucket: +Inf
    m["latency"].labels("partial").observe(0.05)   # partials are not in the final latency
    m["fallbacks"].labels("timeout").inc(2)
    m["dlq"].labels("invalid_json").inc(3)
    m["lag"].labels("1").set(4)
    m["lag"].labels("0").set(7)
    m["lag"].labels("10").set(1)
    m["sessions"].set(5)
    m["tokens"].labels("in").inc(1200)
    m["tokens"].labels("out").inc(300)
    m["kv"].set(0.25)
    m["build"].info({"model": "qwen", "version": "0.1.0"})

    data = overview(r)
    assert data["events"] == {"total": 50, "by_role": {"agent": 20, "user": 30}}
    assert data["summaries"] == {"total": 20, "final": 10, "by_status": {"fallback": 2, "ok": 8, "partial": 10}}
    assert data["within_sla"] == 9 and data["sla_rate"] == pytest.approx(0.9)
    lat = data["latency_s"]
    assert lat["count"] == 10 and lat["mean"] == pytest.approx((0.2 + 0.4 + 0.6 + 0.8 + 0.9 + 3 * 1.1 + 2.5 + 31) / 10)
    # rank 5 of 10: 5th observation falls in (0.75, 1.0], which holds 2 (cumulative 3 -> 5): its top
    assert lat["p50"] == pytest.approx(1.0)
    # rank 9.5: in the +Inf bucket (cumulative 9 -> 10): the highest finite bound, as PromQL
    assert lat["p95"] == pytest.approx(30.0) and lat["p99"] == pytest.approx(30.0)
    assert lat["max_bucket"] == 30.0  # the page shows "≥ 30.00 s": a lower bound
    assert data["partial_latency_s"]["count"] == 1 and data["partial_latency_s"]["p50"] == pytest.approx(0.05)
    assert data["fallbacks"] == {"timeout": 2} and data["dlq"] == {"invalid_json": 3}
    assert data["consumer_lag"] == {"total": 12, "by_partition": {"0": 7, "1": 4, "10": 1}}
    assert list(data["consumer_lag"]["by_partition"]) == ["0", "1", "10"]  # numeric order
    assert data["sessions_open"] == 5
    assert data["llm"]["tokens_in"] == 1200 and data["llm"]["tokens_out"] == 300 and data["llm"]["kv_cache_usage"] == 0.25
    assert data["model"] == "qwen" and data["version"] == "0.1.0"


async def test_histogram_quantile_interpolates_like_promql():
    inf = math.inf
    buckets = [(0.5, 0.0), (1.0, 10.0), (2.0, 20.0), (inf, 20.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(1.0)
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.75)   # halfway through (0.5, 1.0]
    assert histogram_quantile(0.75, buckets) == pytest.approx(1.5)
    assert histogram_quantile(0.99, [(1.0, 1.0), (inf, 1.0)]) == pytest.approx(0.99)  # first bucket from 0
    assert histogram_quantile(0.5, [(1.0, 0.0), (inf, 4.0)]) == 1.0  # all in +Inf: the highest bound
    assert histogram_quantile(0.5, [(1.0, 0.0), (inf, 0.0)]) is None
    assert histogram_quantile(0.5, []) is None


async def test_rate_window():
    window = RateWindow(window_s=10.0, min_span_s=1.0)
    assert window.observe({"x": 0.0}, now=100.0) == {"x": None}
    assert window.observe({"x": 5.0}, now=100.5) == {"x": None}   # too close to the first reading
    assert window.observe({"x": 10.0}, now=102.0) == {"x": pytest.approx(5.0)}
    for t in range(103, 130):
        rates = window.observe({"x": 10.0 + (t - 102) * 2.0}, now=float(t))
    assert rates["x"] == pytest.approx(2.0)  # only the last ~10 s count
    assert len(window.readings) <= 12
    assert window.observe({"x": 1.0}, now=130.0) == {"x": None}  # a counter reset restarts


async def test_recent_rows_keep_only_table_fields():
    event = {"session_id": "s1", "version": 4, "status": "ok", "trigger": "end_of_chat", "request_type": "物流查询",
             "sentiment": "焦虑", "item_id": None, "summary_text": "客户询问快递", "timings": {"latency_ms": 812.5,
             "published_at": "2026-01-01T00:00:00Z"}, "confidence": {"request_type": -0.1}, "message_count": 8}
    (row,) = recent_rows([event] * 30, 1)
    assert row["latency_ms"] == 812.5 and row["summary_text"] == "客户询问快递" and "confidence" not in row
    assert len(recent_rows([event] * 30)) == 20


# ---- the page in a real browser ------------------------------------------------------------------

def js_secs(x: float | None, cap: float | None = None) -> str:
    """The page's `secs()`: JavaScript's Math.round and toFixed (half up), in Python; "≥ " when
    the value is the last bucket's bound (a percentile that fell in the +Inf bucket)."""
    if x is None:
        return "—"
    if cap is not None and x >= cap:
        return "≥ " + js_secs(x)
    if x < 1:
        return f"{math.floor(x * 1000 + 0.5)} ms"
    return f"{Decimal(x).quantize(Decimal('0.01'), ROUND_HALF_UP)} s"


def js_pct(x: float | None) -> str:
    return "—" if x is None else f"{Decimal(x * 100).quantize(Decimal('0.01'), ROUND_HALF_UP)} %"


def scrape(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def finals_for(sessions: set[str]):
    def done(events: list[dict]) -> bool:
        return sessions <= {e["session_id"] for e in events if e["trigger"] == "end_of_chat" and e["status"] != "partial"}
    return done


async def get(session, url: str):
    async with session.get(url) as response:
        assert response.status == 200, url
        return await (response.json() if url.endswith("/api/overview") else response.text())


async def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.2)


async def test_operator_page_in_chromium(settings, summarizer, tmp_path):
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} not found: run scripts/install-test-tools.sh (as root; it installs Debian's chromium)")
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.fail("playwright is not installed: it is in requirements/cpu.lock (scripts/setup.sh)")
    import aiohttp

    conversations = [c for c in load_conversations(REPO / "samples" / "conversations.jsonl") if len(c["messages"]) <= 10][:3]
    first, later = conversations[:2], conversations[2]
    raw_phone = "13812345678"  # in demo-001's last message, unmasked at the source

    def send(p, conv) -> None:
        sid = conv["session_id"]
        for i, m in enumerate(conv["messages"]):
            last = i == len(conv["messages"]) - 1
            p.produce(settings.topic_events, key=sid.encode(), value=chat_event(sid, i, m["role"], m["text"], last))
        p.flush(10)

    running = RunningWorker(settings, summarizer)
    worker = await running.start(web_enabled=True)
    base = f"http://{settings.web_host}:{settings.web_port}"
    try:
        p = producer(settings)
        for conv in first:
            send(p, conv)
        wanted = {c["session_id"] for c in first}
        events = await collect(settings, settings.topic_summaries, finals_for(wanted), timeout_s=300)
        finals = {e["session_id"]: e for e in events if e["trigger"] == "end_of_chat" and e["status"] != "partial"}
        assert set(finals) == wanted
        # The worker counts a summary right after sending it: wait until it has counted them all.
        await wait_until(lambda: wanted <= {r["session_id"] for r in worker.recent if r["trigger"] == "end_of_chat"}, 30, "recent")
        await asyncio.sleep(1.0)

        async with aiohttp.ClientSession() as http, async_playwright() as pw:
            # Faust's own index view also mounts at "/": ours must be the one served.
            async with http.get(base + "/") as response:
                assert response.status == 200 and response.content_type == "text/html"
                assert "chatsum · operator" in await response.text()

            browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1440, "height": 900}, device_scale_factor=1)
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                await page.goto(base + "/")
                for sid in wanted:
                    await page.wait_for_selector(f'#recent tbody tr[data-session="{sid}"]', timeout=20_000)

                # Quiet now: what the page shows after its next refresh equals what the API and
                # the Prometheus exposition say.
                api = await get(http, base + "/api/overview")
                metrics = scrape(await get(http, base + "/metrics"))
                await page.wait_for_function(
                    "ts => Number(document.getElementById('last-updated').dataset.ts) > ts", arg=api["generated_at"], timeout=10_000)

                by_status = {labels["status"]: v for labels, v in metrics["chatsum_summaries_total"]}
                final_count = by_status.get("ok", 0) + by_status.get("fallback", 0)
                within = sum(v for _, v in metrics["chatsum_summaries_within_sla_total"])
                assert api["summaries"]["final"] == final_count >= len(wanted)
                assert api["summaries"]["total"] == sum(by_status.values())
                assert api["within_sla"] == within
                assert api["sla_rate"] == pytest.approx(within / final_count)
                assert api["events"]["total"] == sum(v for _, v in metrics["chatsum_events_total"])
                buckets: dict[float, float] = {}
                for labels, v in metrics["chatsum_trigger_to_publish_seconds_bucket"]:
                    if labels["status"] in ("ok", "fallback"):
                        buckets[float(labels["le"])] = buckets.get(float(labels["le"]), 0.0) + v
                for q, key in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
                    assert api["latency_s"][key] == pytest.approx(histogram_quantile(q, sorted(buckets.items())))
                # The histogram agrees with the published events: our final latencies are in it.
                assert api["latency_s"]["count"] == final_count

                text = lambda sel: page.locator(sel).inner_text()  # noqa: E731
                assert await text("#summaries-final") == f"{final_count:,.0f}"
                assert await text("#summaries-total") == f"{sum(by_status.values()):,.0f}"
                assert await text("#events-total") == f"{api['events']['total']:,.0f}"
                assert await text("#sla-rate") == js_pct(within / final_count)
                for key in ("p50", "p95", "p99"):
                    assert await text(f"#lat-{key}") == js_secs(api["latency_s"][key], api["latency_s"]["max_bucket"])
                    assert float(await page.locator(f"#lat-{key}").get_attribute("data-value")) == pytest.approx(api["latency_s"][key])
                assert await text("#sessions-open") == f"{api['sessions_open']:,.0f}"
                assert await text("#model") == api["model"] == summarizer.engine.model_name
                assert await text("#rate-summaries") != "—"  # two readings at least 1 s apart exist by now
                for reason, count in api["fallbacks"].items():
                    assert await page.locator(f'#fallbacks dd[data-key="{reason}"]').inner_text() == str(count)

                # The table: one row per published summary, masked, text as text.
                for sid, final in finals.items():
                    row = page.locator(f'#recent tbody tr[data-session="{sid}"][data-version="{final["version"]}"]')
                    assert await row.count() == 1
                    cells = await row.locator("td").all_inner_texts()
                    assert cells[0] == sid and cells[1] == str(final["version"]) and cells[2] == final["status"]
                    assert cells[3] == "end_of_chat"
                    if final["status"] == "ok":
                        assert cells[4] == final["request_type"] and cells[5] == final["sentiment"]
                        assert cells[7] == final["summary_text"]
                    assert cells[8] == js_secs(final["timings"]["latency_ms"] / 1000)
                body = await page.locator("body").inner_text()
                assert raw_phone not in body.replace(" ", "")
                assert await page.locator("#recent script, #recent img, #fallbacks *[onerror]").count() == 0

                # Live: one more conversation shows up without a reload.
                await page.evaluate("window.__no_reload = 42")
                stamp = await page.locator("#last-updated").get_attribute("data-ts")
                shown = await text("#last-updated")
                assert await page.locator(f'#recent tbody tr[data-session="{later["session_id"]}"]').count() == 0
                send(p, later)
                await page.wait_for_selector(
                    f'#recent tbody tr[data-session="{later["session_id"]}"] td:nth-child(4):text-is("end_of_chat")', timeout=300_000)
                assert await page.evaluate("window.__no_reload") == 42
                assert float(await page.locator("#last-updated").get_attribute("data-ts")) > float(stamp)
                assert await text("#last-updated") != shown
                after = await get(http, base + "/api/overview")
                assert after["summaries"]["final"] > final_count
                await page.wait_for_function(
                    "n => Number(document.getElementById('summaries-final').dataset.value) >= n",
                    arg=after["summaries"]["final"], timeout=10_000)
                assert not errors, errors

                await asyncio.sleep(2.5)  # let the highlight of the new row fade before the picture
                shot = SCREENSHOT if os.environ.get("CHATSUM_UPDATE_SCREENSHOT") == "1" else tmp_path / SCREENSHOT.name
                await page.screenshot(path=str(shot), full_page=True)
            finally:
                await browser.close()
    finally:
        await running.stop()
    assert shot.stat().st_size > 10_000
