"""HTTP endpoints served by the worker's own (Faust) web server.

- `/metrics`: Prometheus exposition.
- `/ready`: 200 once the engine is warm and the worker consumes (readiness probe), else 503.
- `/live`: 200 while the process runs (liveness probe).
- `/`: the operator page (`service/static/operator.html`, static, no build step).
- `/api/overview`: the page's data: `overview.overview(REGISTRY)` (totals, SLA rate, latency
  percentiles, fallbacks, lag...), rates from a ring of recent readings, and the last 20
  published summaries (masked).

Faust registers its own index view at "/" (`production_index`, `{"status": "OK"}`) when the
web server starts, after these views; aiohttp resolves routes in the order they were added,
so the operator page registered here wins and Faust's index is never reached.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .metrics import REGISTRY
from .overview import RateWindow, overview, recent_rows

OPERATOR_PAGE = Path(__file__).resolve().parent / "static" / "operator.html"

if TYPE_CHECKING:
    from .worker import ChatsumWorker


def install(worker: ChatsumWorker) -> None:
    app = worker.app

    @app.page("/metrics")
    async def metrics_view(web: Any, request: Any) -> Any:
        worker.refresh_lag()
        return web.bytes(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST.split(";")[0])

    @app.page("/ready")
    async def ready_view(web: Any, request: Any) -> Any:
        ok = worker.ready and worker.summarizer.engine.ready
        return web.json({"ready": ok}, status=200 if ok else 503)

    @app.page("/live")
    async def live_view(web: Any, request: Any) -> Any:
        return web.json({"live": True})

    rates = RateWindow(window_s=30.0)

    @app.page("/")
    async def operator_page(web: Any, request: Any) -> Any:
        return web.html(OPERATOR_PAGE.read_text(encoding="utf-8"), headers={"Cache-Control": "no-store"})

    @app.page("/api/overview")
    async def overview_view(web: Any, request: Any) -> Any:
        worker.refresh_lag()
        data = overview(REGISTRY)
        data["rates"] = rates.observe({
            "events_per_s": float(data["events"]["total"]),
            "summaries_per_s": float(data["summaries"]["total"]),
            "final_summaries_per_s": float(data["summaries"]["final"]),
        })
        data["sla_s"] = worker.settings.sla_s
        data["ready"] = bool(worker.ready and worker.summarizer.engine.ready)
        data["model"] = data["model"] or worker.model_name
        data["recent"] = recent_rows(worker.recent, 20)
        data["generated_at"] = time.time()
        return web.json(data, headers={"Cache-Control": "no-store"})
