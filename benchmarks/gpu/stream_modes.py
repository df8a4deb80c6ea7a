"""How much of the gap between `chatsum bench`'s raw engine and the service is the engine's
token streaming, and how much is the rest of the service (Kafka, Faust, scheduling).

The worker streams every summary from vLLM's async engine (for partial summaries and the
logprobs); the raw baseline is `LLM.generate` with final outputs only. On the bench's own
prompts, all at once, this runs the raw engine, then the async engine `--runs` times (each in a
fresh process), every request streamed the way the summarizer reads it (deltas accumulated, the
partial fields looked for after each one). It prints summaries/s, the ratio to raw and the time
to the partial fields. Run it on a quiet machine: the engine started first after the raw run was
the fastest in every run seen (benchmarks/results/stream-modes-gpu-qwen2-7b.json).

    python benchmarks/gpu/stream_modes.py --conversations 179 --runs 2 [--out report.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from service.bench import raw_engine
from service.evaluate import load_labelled, masked_turns, percentile
from service.runtime import build_summarizer, start
from service.settings import Settings
from service.summarizer import _PARTIAL, OUTPUT_SCHEMA


async def prompts_for(settings: Settings, devset: Path, n: int) -> tuple[list[str], list[dict]]:
    summarizer = build_summarizer(settings)
    summarizer.engine.load_tokenizer()
    conversations = load_labelled(devset)[:n]
    return [(await summarizer.build_prompt(masked_turns(c)))[0] for c in conversations], conversations


async def streamed(prompts: list[str]) -> dict[str, float]:
    summarizer = await start(build_summarizer(Settings()))
    engine, max_tokens = summarizer.engine, summarizer.policy.max_tokens

    async def one(i: int, prompt: str) -> tuple[float | None, int]:
        text, tokens, partial_at = "", 0, None
        async for delta in engine.stream(prompt, OUTPUT_SCHEMA, f"s{i}", max_tokens):
            text += delta.text
            tokens += len(delta.token_ids)
            if partial_at is None and _PARTIAL.match(text):
                partial_at = time.perf_counter() - began
        return partial_at, tokens

    began = time.perf_counter()
    results = await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
    wall = time.perf_counter() - began
    partials = [p for p, _ in results if p is not None]
    engine.shutdown()
    return {"summaries": len(prompts), "seconds": round(wall, 2),
            "summaries_per_s": round(len(prompts) / wall, 3),
            "output_tokens_per_s": round(sum(t for _, t in results) / wall, 1),
            "partial_p50_s": round(percentile(partials, 50), 3) if partials else None,
            "partial_p99_s": round(percentile(partials, 99), 3) if partials else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--conversations", type=int, default=179)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--devset", default="eval/devset.jsonl")
    p.add_argument("--out", default="")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--prompts", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        prompts = json.loads(Path(args.prompts).read_text())
        print("RESULT " + json.dumps(asyncio.run(streamed(prompts))), flush=True)
        return
    settings = Settings()
    prompts, conversations = asyncio.run(prompts_for(settings, Path(args.devset), args.conversations))
    summarizer = build_summarizer(settings)
    report: dict = {"raw": asyncio.run(raw_engine(summarizer, conversations)), "streamed": []}
    print("raw", json.dumps(report["raw"]), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prompts.json"
        path.write_text(json.dumps(prompts))
        for run in range(1, args.runs + 1):
            child = subprocess.run([sys.executable, __file__, "--child", "--prompts", str(path)],
                                   capture_output=True, text=True)
            line = next((x for x in child.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                sys.stderr.write(child.stdout[-4000:] + child.stderr[-4000:])
                raise SystemExit(f"streamed run {run}: the engine run failed (exit {child.returncode})")
            result = json.loads(line.removeprefix("RESULT "))
            result["ratio_to_raw"] = round(result["summaries_per_s"] / report["raw"]["summaries_per_s"], 3)
            report["streamed"].append(result)
            print("streamed", json.dumps(result), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
