"""Precision, recall and throughput of ``clean_text`` + ``mask_text``.

Usage::

    .venv/bin/python benchmarks/bench_mask.py [--data PATH] [--seconds S]

Reads the labelled set written by ``benchmarks/pii_set.py`` (generated in
memory when the file is missing), prints a per-type table and the
throughput of

(a) a baseline: ``json.loads`` of an event line + ``str.strip`` on the
    message, i.e. the cost of merely touching a message;
(b) ``clean_text`` alone;
(c) ``clean_text`` + ``mask_text``;

and writes the figures and the producing command to
``benchmarks/results/mask.json``.

Scoring (per type):

* a labelled span is *found* when its (cleaned) value no longer occurs in
  the masked text and a placeholder of its type does;
* a *false positive* is a placeholder of a type beyond the number of spans
  of that type labelled in the message, or a negative (look-alike) that is no
  longer in the masked text; a lost negative is charged to the type of the
  placeholder that replaced it.

``strict_recall`` is also reported: the whole value lies inside text that
one placeholder of the right type replaced (no fragment of it left over).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shlex
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make "service" importable
    sys.path.insert(0, str(ROOT))

from benchmarks import pii_set  # noqa: E402
from service.clean import clean_text  # noqa: E402
from service.mask import PII_TYPES, PLACEHOLDERS, mask_text  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "pii_labelled.jsonl"
RESULTS = ROOT / "benchmarks" / "results" / "mask.json"

_TYPE_OF = {placeholder: kind for kind, placeholder in PLACEHOLDERS.items()}
_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS.values()))


def load(path: Path = DATA) -> list[dict]:
    if not path.exists():
        return pii_set.generate()
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def replaced_regions(original: str, masked: str) -> list[tuple[int, int, str]]:
    """Map each new placeholder in ``masked`` back to the ``original`` span it replaced.

    Masking only replaces substrings, so ``masked`` is literal pieces of
    ``original`` with placeholders between them; a regex of the escaped
    pieces with lazy gaps recovers where each placeholder sits.  Placeholders
    that were already in ``original`` match themselves and are dropped.
    """
    pieces = _PLACEHOLDER.split(masked)
    kinds = _PLACEHOLDER.findall(masked)
    pattern = "".join(
        re.escape(piece) + ("(.+?)" if i < len(kinds) else "") for i, piece in enumerate(pieces)
    )
    match = re.fullmatch(pattern, original, flags=re.DOTALL)
    if match is None:
        return []
    regions = []
    for i, placeholder in enumerate(kinds, start=1):
        if match.group(i) != placeholder:
            regions.append((match.start(i), match.end(i), _TYPE_OF[placeholder]))
    return regions


def _aligns(pieces: list[str], text: str, open_left: bool, open_right: bool) -> bool:
    """Can ``text`` be ``pieces`` joined by non-empty gaps (plus free ends)?"""
    pattern = "(?:.+?)".join(re.escape(p) for p in pieces)
    pattern = (".*" if open_left else "") + pattern + (".*" if open_right else "")
    return re.fullmatch(pattern, text, flags=re.DOTALL) is not None


def fully_replaced(original: str, masked: str, value: str, kind: str) -> bool:
    """Did one ``kind`` placeholder replace a stretch of ``original`` containing ``value``?

    True when some placeholder of that type can sit over ``value``: the
    masked text before it must align with the text before ``value`` and the
    masked text after it with the text after ``value``.
    """
    at = original.find(value)
    if at < 0:
        return False
    before, after = original[:at], original[at + len(value) :]
    pieces = _PLACEHOLDER.split(masked)
    kinds = _PLACEHOLDER.findall(masked)
    for i, placeholder in enumerate(kinds):
        if _TYPE_OF[placeholder] != kind:
            continue
        if _aligns(pieces[: i + 1], before, False, True) and _aligns(pieces[i + 1 :], after, True, False):
            return True
    return False


def evaluate(records: list[dict]) -> dict[str, dict[str, float]]:
    """Score ``clean_text`` + ``mask_text`` on labelled records, per type."""
    stats = {kind: {"spans": 0, "found": 0, "strict": 0, "fp": 0} for kind in PII_TYPES}
    negatives_total = negatives_lost = 0
    for record in records:
        cleaned = clean_text(record["text"])
        masked = mask_text(cleaned).text
        regions = replaced_regions(cleaned, masked)
        new_counts = {
            kind: masked.count(PLACEHOLDERS[kind]) - cleaned.count(PLACEHOLDERS[kind]) for kind in PII_TYPES
        }
        labelled = {kind: 0 for kind in PII_TYPES}
        for span in record["spans"]:
            kind = span["type"]
            labelled[kind] += 1
            value = clean_text(span["value"])
            stats[kind]["spans"] += 1
            if value not in masked and PLACEHOLDERS[kind] in masked:
                stats[kind]["found"] += 1
            if fully_replaced(cleaned, masked, value, kind):
                stats[kind]["strict"] += 1
        for kind in PII_TYPES:
            stats[kind]["fp"] += max(0, new_counts[kind] - labelled[kind])
        for negative in record["negatives"]:
            value = clean_text(negative)
            negatives_total += 1
            if value in masked:
                continue
            negatives_lost += 1
            at = cleaned.find(value)
            culprits = {k for s, e, k in regions if at >= 0 and s < at + len(value) and at < e}
            for kind in culprits or {"unattributed"}:
                if kind in stats:
                    stats[kind]["fp"] += 1
    report: dict[str, dict[str, float]] = {}
    for kind, s in stats.items():
        tp = s["found"]
        report[kind] = {
            "spans": s["spans"],
            "found": tp,
            "false_positives": s["fp"],
            "recall": tp / s["spans"] if s["spans"] else 1.0,
            "strict_recall": s["strict"] / s["spans"] if s["spans"] else 1.0,
            "precision": tp / (tp + s["fp"]) if tp + s["fp"] else 1.0,
        }
    report["_negatives"] = {
        "total": negatives_total,
        "lost": negatives_lost,
        "survived": 1 - negatives_lost / negatives_total if negatives_total else 1.0,
    }
    return report


def _rate(func, items: list, seconds: float) -> float:
    """Best-of-3 messages per second of ``func`` over ``items``."""
    best = 0.0
    budget = seconds / 3
    for _ in range(3):
        done = 0
        start = time.perf_counter()
        while True:
            func(items)
            done += len(items)
            elapsed = time.perf_counter() - start
            if elapsed >= budget:
                break
        best = max(best, done / elapsed)
    return best


def throughput(records: list[dict], seconds: float) -> dict[str, float]:
    texts = [r["text"] for r in records]
    events = [
        json.dumps({"conversation_id": f"c{i}", "seq": i, "role": "customer", "text": t}, ensure_ascii=False)
        for i, t in enumerate(texts)
    ]

    def baseline(lines: list[str]) -> None:
        for line in lines:
            json.loads(line)["text"].strip()

    def clean_only(items: list[str]) -> None:
        for text in items:
            clean_text(text)

    def clean_and_mask(items: list[str]) -> None:
        for text in items:
            mask_text(clean_text(text))

    # The labelled messages are short (~30 chars); the target is stated for
    # ~40-char messages, so also time each message joined to the next one and
    # cut to exactly 40 characters.
    joined = [f"{a}，{b}"[:40] for a, b in zip(texts, texts[1:] + texts[:1])]

    return {
        "baseline_json_strip": _rate(baseline, events, seconds),
        "clean_text": _rate(clean_only, texts, seconds),
        "clean_text+mask_text": _rate(clean_and_mask, texts, seconds),
        "mean_chars": sum(map(len, texts)) / len(texts),
        "clean_text+mask_text_40": _rate(clean_and_mask, joined, seconds),
        "mean_chars_40": sum(map(len, joined)) / len(joined),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--seconds", type=float, default=3.0, help="timing budget per measurement")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    records = load(args.data)
    report = evaluate(records)
    speed = throughput(records, args.seconds)

    print(f"{len(records)} messages, {report['_negatives']['total']} look-alikes")
    print(f"{'type':<10} {'spans':>6} {'recall':>8} {'strict':>8} {'precision':>10} {'FP':>4}")
    for kind in PII_TYPES:
        r = report[kind]
        print(
            f"{kind:<10} {r['spans']:>6} {r['recall']:>8.2%} {r['strict_recall']:>8.2%}"
            f" {r['precision']:>10.2%} {r['false_positives']:>4}"
        )
    neg = report["_negatives"]
    print(f"look-alikes survived: {neg['survived']:.2%} ({neg['lost']} lost of {neg['total']})")
    print(f"throughput, messages/s (mean {speed['mean_chars']:.1f} chars/message):")
    for name in ("baseline_json_strip", "clean_text", "clean_text+mask_text"):
        print(f"  {name:<22} {speed[name]:>12,.0f}")
    print(
        f"  {'clean_text+mask_text':<22} {speed['clean_text+mask_text_40']:>12,.0f}"
        f"  (40-char messages: two joined, cut to {speed['mean_chars_40']:.0f} chars)"
    )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", "benchmarks/bench_mask.py", *sys.argv[1:]])
    result = {
        "command": command,
        "data": str(args.data.relative_to(ROOT)) if args.data.is_relative_to(ROOT) else str(args.data),
        "messages": len(records),
        "per_type": {k: v for k, v in report.items() if not k.startswith("_")},
        "negatives": report["_negatives"],
        "throughput_msgs_per_s": speed,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
