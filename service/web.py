"""HTTP endpoints served by the worker's own (Faust) web server.

- `/metrics`: Prometheus exposition.
- `/ready`: 200 once the engine is warm and the worker consumes (readiness probe), else 503.
- `/live`: 200 while the process runs (liveness probe).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .metrics import REGISTRY

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
