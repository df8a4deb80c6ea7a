"""Few-shot retrieval: the k solved cases most similar to a conversation go into its prompt.

The library is `fewshot/cases.jsonl` (curated, format in fewshot/README.md) plus cases learned
from agent feedback. Cases are embedded once; the normalised matrix is cached on disk under a
key made of the model and the library content, so a restart does not re-embed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from . import metrics
from .prompt import Turn
from .settings import Settings

log = logging.getLogger("chatsum.fewshot")
DUPLICATE_COSINE = 0.97


@dataclass(frozen=True)
class CaseTurn:
    role: str
    text: str


@dataclass
class FewShotCase:
    case_id: str
    transcript: list[CaseTurn]
    answer: dict[str, str]
    tags: list[str] = field(default_factory=list)
    source: str = "curated"

    @classmethod
    def from_json(cls, row: dict) -> FewShotCase:
        return cls(
            case_id=row["case_id"],
            transcript=[CaseTurn(t["role"], t["text"]) for t in row["transcript"]],
            answer={k: row["summary"][k] for k in ("item_id", "request_type", "sentiment", "summary_text")},
            tags=list(row.get("tags", [])),
            source=row.get("source", "curated"),
        )

    def to_json(self) -> dict:
        return {
            "case_id": self.case_id,
            "transcript": [{"role": t.role, "text": t.text} for t in self.transcript],
            "summary": self.answer,
            "tags": self.tags,
            "source": self.source,
        }


class Embedder(Protocol):
    name: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


def query_text(turns: Sequence[Turn], max_chars: int = 400) -> str:
    """What a conversation is about: the customer's words. In a long chat, the start of the
    first message (the problem as first stated) and the most recent words; "好的", "还在吗"
    at the end of a long wait say little about what it is about."""
    said = [t.text for t in turns if t.role == "user"]
    text = " ".join(said)
    if len(text) <= max_chars:
        return text
    opening = said[0][: max_chars // 3]
    return opening + " " + text[len(text) - (max_chars - len(opening) - 1):]


def load_cases(path: Path) -> list[FewShotCase]:
    with open(path, encoding="utf-8") as f:
        return [FewShotCase.from_json(json.loads(line)) for line in f if line.strip()]


class CaseIndex:
    """Cases and their normalised embeddings; top-k by cosine with two guards: near-duplicates
    are skipped, and the k are not all of one request type (so the prompt shows a contrast)."""

    def __init__(self, embedder: Embedder, cache_dir: Path | None = None) -> None:
        self.embedder = embedder
        self.cache_dir = cache_dir
        self.cases: list[FewShotCase] = []
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.excluded: set[str] = set()

    def build(self, cases: list[FewShotCase]) -> None:
        texts = [query_text(c.transcript) for c in cases]
        key = hashlib.sha256(json.dumps([self.embedder.name, texts], ensure_ascii=False).encode()).hexdigest()[:16]
        cached = self.cache_dir / f"fewshot-{key}.npy" if self.cache_dir else None
        if cached is not None and cached.exists():
            matrix = np.load(cached)
        else:
            matrix = self.embedder.encode(texts).astype(np.float32) if texts else np.zeros((0, 1), np.float32)
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                np.save(cached, matrix)
        self.cases, self.matrix = list(cases), matrix
        self._count()

    def put(self, case: FewShotCase, vector: np.ndarray) -> None:
        """A learned case with its embedding: replaces the case with the same id, if any."""
        vector = vector.astype(np.float32).reshape(1, -1)
        for i, old in enumerate(self.cases):
            if old.case_id == case.case_id:
                self.cases[i], self.matrix[i] = case, vector[0]
                break
        else:
            self.cases.append(case)
            self.matrix = np.vstack([self.matrix, vector]) if len(self.matrix) else vector
        self.excluded.discard(case.case_id)
        self._count()

    def exclude(self, case_id: str) -> None:
        self.excluded.add(case_id)

    def _count(self) -> None:
        for source in ("curated", "feedback"):
            metrics.FEWSHOT_CASES.labels(source).set(sum(c.source == source for c in self.cases))

    def search(self, vector: np.ndarray, k: int) -> list[FewShotCase]:
        if k <= 0 or not self.cases:
            return []
        scores = self.matrix @ vector
        # Only the best few candidates need sorting: argpartition is O(n), a full sort is not.
        pool = min(len(scores), max(8 * k, 32) + len(self.excluded))
        top = np.argpartition(-scores, pool - 1)[:pool] if pool < len(scores) else np.arange(len(scores))
        order = top[np.argsort(-scores[top])]
        chosen: list[int] = []
        for i in order:
            if self.cases[i].case_id in self.excluded:
                continue
            if any(float(self.matrix[i] @ self.matrix[j]) > DUPLICATE_COSINE for j in chosen):
                continue
            chosen.append(int(i))
            if len(chosen) == k:
                break
        types = {self.cases[i].answer["request_type"] for i in chosen}
        if k > 1 and len(chosen) == k and len(types) == 1:
            other = next((int(i) for i in order if self.cases[i].answer["request_type"] not in types
                          and self.cases[i].case_id not in self.excluded), None)
            if other is not None:
                chosen[-1] = other
        # Most similar last: closest to the transcript it should inform.
        return [self.cases[i] for i in reversed(chosen)]


class FewShotRetriever:
    """Embeds concurrent queries in one batch (a summary burst is many sessions at once)."""

    def __init__(self, index: CaseIndex, k: int) -> None:
        self.index = index
        self.k = k
        self._queue: list[tuple[str, asyncio.Future[np.ndarray]]] = []
        self._flush: asyncio.Task[None] | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> FewShotRetriever:
        from .embeddings import SentenceEmbedder

        index = CaseIndex(SentenceEmbedder.from_settings(settings), settings.cache_dir / "index")
        index.build(load_cases(settings.fewshot_dir / "cases.jsonl"))
        return cls(index, settings.fewshot_k)

    async def retrieve(self, turns: Sequence[Turn]) -> list[FewShotCase]:
        started = time.perf_counter()
        vector = await self._embed(query_text(turns))
        cases = self.index.search(vector, self.k)
        metrics.RETRIEVAL_SECONDS.observe(time.perf_counter() - started)
        return cases

    async def _embed(self, text: str) -> np.ndarray:
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._queue.append((text, future))
        if self._flush is None or self._flush.done():
            self._flush = asyncio.ensure_future(self._embed_batch())
        return await future

    async def _embed_batch(self) -> None:
        await asyncio.sleep(0)  # let the other sessions of this tick queue up
        # Queries that arrive while a batch encodes wait for the next round of this loop: no new
        # flush starts while this one runs, so leaving them queued would strand them for good.
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                vectors = await asyncio.to_thread(self.index.embedder.encode, [t for t, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), vector in zip(batch, vectors):
                if not future.done():  # its summary may have timed out meanwhile
                    future.set_result(vector)
