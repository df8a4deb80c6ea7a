"""`chatsum eval`: the worker's summarizer over a labelled JSONL, no Kafka, and a report.

Input lines: `{"session_id", "messages": [{"role", "text"}], "expected": {...}}` where any of
`request_type`, `sentiment`, `item_id`, `summary_text` may be given (`eval/README.md`).
Messages are cleaned and masked exactly as the worker does before the model sees them.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
import unicodedata
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .clean import clean_text
from .contracts import REQUEST_TYPES, SENTIMENTS
from .mask import mask_text
from .sessions import Message
from .summarizer import Outcome, Summarizer


def load_labelled(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def masked_turns(conversation: dict[str, Any]) -> list[Message]:
    return [Message(role=m["role"], text=mask_text(clean_text(m["text"])).text, ts=0.0) for m in conversation["messages"]]


def rouge_l_chars(candidate: str, reference: str) -> float:
    """Character-level ROUGE-L F1 (the usual measure for Chinese summaries)."""
    a, b = list(candidate), list(reference)
    if not a or not b:
        return 0.0
    prev = [0] * (len(b) + 1)
    for ca in a:
        row = [0]
        for j, cb in enumerate(b):
            row.append(prev[j] + 1 if ca == cb else max(prev[j + 1], row[j]))
        prev = row
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(a), lcs / len(b)
    return 2 * precision * recall / (precision + recall)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def auroc(scores: list[float], labels: list[bool]) -> float | None:
    """Probability that a right answer scores above a wrong one (ties count half)."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def calibrate(scores: list[float], labels: list[bool]) -> dict[str, Any]:
    """Coverage/accuracy per threshold, and the threshold that maximises right minus wrong
    among kept answers (a wrong summary shown costs as much as a right one gains; a fallback
    costs nothing): keep an answer when it is more likely right than wrong."""
    candidates = sorted({round(s, 3) for s in scores} | {-0.1, -0.25, -0.5, -1.0, -2.0, float("-inf")})
    curve = []
    for t in candidates:
        kept = [y for s, y in zip(scores, labels) if s >= t]
        curve.append({
            "threshold": t if t != float("-inf") else None,
            "coverage": round(len(kept) / len(scores), 3) if scores else 0.0,
            "accuracy": round(sum(kept) / len(kept), 3) if kept else None,
            "net": sum(kept) - (len(kept) - sum(kept)),
        })
    best = max(curve, key=lambda c: (c["net"], c["coverage"]))
    named = [c for c in curve if c["threshold"] in (-0.1, -0.25, -0.5, -1.0, -2.0, None)]
    return {"best": best, "curve": named, "auroc": auroc(scores, labels)}


def normalise_id(value: str) -> str:
    return unicodedata.normalize("NFKC", value or "").strip()


async def run(summarizer: Summarizer, conversations: list[dict[str, Any]], concurrency: int) -> list[tuple[dict, Outcome]]:
    gate = asyncio.Semaphore(concurrency)
    bar = tqdm(total=len(conversations), desc="eval", unit="chat")

    async def one(conversation: dict[str, Any]) -> tuple[dict, Outcome]:
        async with gate:
            outcome = await summarizer.summarize(masked_turns(conversation), request_id=f"eval:{conversation['session_id']}")
        bar.update()
        return conversation, outcome

    try:
        return await asyncio.gather(*(one(c) for c in conversations))
    finally:
        bar.close()


def report(results: list[tuple[dict, Outcome]], wall_s: float, label: str) -> dict[str, Any]:
    n = len(results)
    valid = [(c, o) for c, o in results if o.fields is not None]
    out: dict[str, Any] = {"label": label, "conversations": n, "schema_valid_rate": round(len(valid) / n, 3) if n else 0.0}
    fields: dict[str, Any] = {}
    for name, classes in (("request_type", REQUEST_TYPES), ("sentiment", SENTIMENTS)):
        pairs = [(c["expected"][name], getattr(o.fields, name)) for c, o in valid if c.get("expected", {}).get(name)]
        matrix = {e: {p: 0 for p in classes} for e in classes}
        for expected, predicted in pairs:
            matrix[expected][predicted] += 1
        published = [(c["expected"][name], getattr(o.fields, name)) for c, o in valid if o.ok and c.get("expected", {}).get(name)]
        fields[name] = {
            "accuracy": round(sum(e == p for e, p in pairs) / len(pairs), 3) if pairs else None,
            "accuracy_published": round(sum(e == p for e, p in published) / len(published), 3) if published else None,
            "predicted": dict(Counter(p for _, p in pairs)),
            "confusion": matrix,
        }
    out["fields"] = fields
    ids = [(normalise_id(c["expected"]["item_id"]), o.fields.item_id if o.fields else None) for c, o in results if "item_id" in c.get("expected", {})]
    out["item_id"] = {
        "exact_match": round(sum(e == p for e, p in ids) / len(ids), 3) if ids else None,
        "exact_match_when_given": round(sum(e == p for e, p in ids if e) / max(1, sum(1 for e, _ in ids if e)), 3),
        "empty_when_none_given": round(sum(p == "" for e, p in ids if not e) / max(1, sum(1 for e, _ in ids if not e)), 3),
    }
    rouges = [rouge_l_chars(o.fields.summary_text, c["expected"]["summary_text"]) for c, o in valid if c.get("expected", {}).get("summary_text")]
    out["summary_text"] = {
        "rouge_l_char": round(statistics.mean(rouges), 3) if rouges else None,
        "cut_at_limit": round(sum(len(o.fields.summary_text) >= 50 for _, o in valid) / max(1, len(valid)), 3),
        "addresses_customer": round(sum("您" in o.fields.summary_text for _, o in valid) / max(1, len(valid)), 3),
    }
    reasons = Counter(o.fallback_reason for _, o in results if o.fallback_reason)
    out["fallbacks"] = {"rate": round(sum(reasons.values()) / n, 3) if n else 0.0, "by_reason": dict(reasons)}
    latencies = [o.llm_ms for _, o in results]
    out["latency_ms"] = {q: round(percentile(latencies, float(q[1:])), 1) for q in ("p50", "p95", "p99")}
    out["throughput_per_s"] = round(n / wall_s, 3) if wall_s else None
    out["tokens"] = {"prompt_mean": round(statistics.mean(o.prompt_tokens for _, o in results), 1) if n else 0,
                     "output_mean": round(statistics.mean(o.output_tokens for _, o in results), 1) if n else 0}
    scored = [(o.confidence.request_type, o.fields.request_type == c["expected"]["request_type"])
              for c, o in valid if o.confidence and c.get("expected", {}).get("request_type")]
    out["confidence"] = calibrate([s for s, _ in scored], [y for _, y in scored]) if scored else None
    tags: dict[str, list[bool]] = defaultdict(list)
    for c, o in valid:
        if c.get("expected", {}).get("request_type"):
            for tag in c.get("tags", []):
                tags[tag].append(o.fields.request_type == c["expected"]["request_type"])
    out["request_type_accuracy_by_tag"] = {t: round(sum(v) / len(v), 3) for t, v in sorted(tags.items())}
    return out


def print_report(r: dict[str, Any]) -> None:
    print(f"\n== {r['label']}: {r['conversations']} conversations, schema-valid {r['schema_valid_rate']:.1%}, "
          f"{r['throughput_per_s']} summaries/s")
    for name, f in r["fields"].items():
        print(f"{name:<13} accuracy {f['accuracy']}  (published only: {f['accuracy_published']})  predicted {f['predicted']}")
        print("  confusion (rows expected, columns predicted):")
        for expected, row in f["confusion"].items():
            print(f"    {expected:<5} " + " ".join(f"{p}={v:<3}" for p, v in row.items()))
    print(f"item_id       {r['item_id']}")
    print(f"summary_text  {r['summary_text']}")
    print(f"fallbacks     {r['fallbacks']}")
    print(f"latency_ms    {r['latency_ms']}  tokens {r['tokens']}")
    if r["confidence"]:
        c = r["confidence"]
        print(f"confidence    AUROC {c['auroc']}; best threshold {c['best']}")
        for point in c["curve"]:
            print(f"    threshold {point['threshold']}: coverage {point['coverage']}, accuracy {point['accuracy']}")


async def evaluate(summarizer: Summarizer, path: Path, label: str, concurrency: int, limit: int = 0) -> dict[str, Any]:
    conversations = load_labelled(path)[: limit or None]
    started = time.perf_counter()
    results = await run(summarizer, conversations, concurrency)
    return report(results, time.perf_counter() - started, label)
