"""A worker inside the current process and event loop, sharing an already started engine: for
the tests and `chatsum bench` (which must not pay for a second engine)."""

from __future__ import annotations

import asyncio
import itertools
import time

from .settings import Settings
from .summarizer import Summarizer
from .topics import ensure_topics
from .worker import ChatsumWorker


_members = itertools.count(1)


class RunningWorker:
    def __init__(self, settings: Settings, summarizer: Summarizer) -> None:
        # Several in one process share a host and (web disabled) a port: each needs its own member id.
        self.settings = settings if settings.instance_id else settings.model_copy(
            update={"instance_id": f"{settings.app_id}-inproc-{next(_members)}"})
        self.summarizer = summarizer
        self.worker: ChatsumWorker | None = None

    async def start(self, timeout_s: float = 60.0, web_enabled: bool = False) -> ChatsumWorker:
        ensure_topics(self.settings)
        self.worker = ChatsumWorker(self.settings, self.summarizer, model_name=self.summarizer.engine.model_name,
                                    web_enabled=web_enabled)
        await self.worker.app.start()
        deadline = time.monotonic() + timeout_s
        while not self.worker.ready:
            if time.monotonic() > deadline:
                raise TimeoutError("worker did not finish its first rebalance")
            await asyncio.sleep(0.1)
        return self.worker

    async def stop(self) -> None:
        if self.worker is not None:
            tasks = list(self.worker.inflight.values())
            for task in tasks:
                task.cancel()
            # Their engine requests are aborted as they unwind: done before the engine's next user.
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.worker.app.stop()
            self.worker = None
