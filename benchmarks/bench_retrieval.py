"""Few-shot retrieval speed: index search at 10 k cases and query embedding, with baselines
measured in the same run. Usage: .venv/bin/python benchmarks/bench_retrieval.py

The 10 k-case index is the real curated library (embedded with the shipped model) padded with
random unit vectors: search cost depends on the matrix shape, not on what the vectors mean.
Baseline for search: a plain full sort of all scores (what the index does without
argpartition). Baseline for embedding: one query at a time (what retrieval does without
batching concurrent sessions).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from service.embeddings import SentenceEmbedder  # noqa: E402
from service.evaluate import load_labelled, masked_turns  # noqa: E402
from service.fewshot import CaseIndex, load_cases, query_text  # noqa: E402
from service.settings import Settings  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def timed(fn, n: int) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    settings = Settings()
    embedder = SentenceEmbedder.from_settings(settings)
    index = CaseIndex(embedder, settings.cache_dir / "index")
    index.build(load_cases(ROOT / "fewshot" / "cases.jsonl"))
    curated = len(index.cases)
    rng = np.random.default_rng(0)
    pad = rng.standard_normal((10_000 - curated, index.matrix.shape[1])).astype(np.float32)
    pad /= np.linalg.norm(pad, axis=1, keepdims=True)
    index.matrix = np.vstack([index.matrix, pad])
    index.cases = index.cases + [index.cases[i % curated] for i in range(len(pad))]

    queries = [query_text(masked_turns(c)) for c in load_labelled(ROOT / "eval" / "devset.jsonl")]
    vectors = embedder.encode(queries)
    n = len(vectors)
    search_ms = timed(lambda i: index.search(vectors[i % n], 3), 2000)
    full_sort_ms = timed(lambda i: np.argsort(-(index.matrix @ vectors[i % n]))[:3], 2000)

    single_ms = timed(lambda i: embedder.encode([queries[i % n]]), 60)
    batch = 16
    started = time.perf_counter()
    rounds = 6
    for r in range(rounds):
        embedder.encode(queries[r * batch:(r + 1) * batch])
    batched_per_query_ms = (time.perf_counter() - started) * 1000 / (rounds * batch)

    result = {
        "command": "python benchmarks/bench_retrieval.py",
        "cases": len(index.cases),
        "search_ms": {"p50": round(percentile(search_ms, 50), 3), "p99": round(percentile(search_ms, 99), 3)},
        "baseline_full_sort_ms": {"p50": round(percentile(full_sort_ms, 50), 3), "p99": round(percentile(full_sort_ms, 99), 3)},
        "search_queries_per_s": round(1000 / statistics.mean(search_ms), 1),
        "embed_single_query_ms": {"p50": round(percentile(single_ms, 50), 1), "p99": round(percentile(single_ms, 99), 1)},
        "embed_batched_ms_per_query": round(batched_per_query_ms, 1),
        "retrieval_p99_ms_single": round(percentile(single_ms, 99) + percentile(search_ms, 99), 1),
    }
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results" / "retrieval.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
