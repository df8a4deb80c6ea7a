"""Every Prometheus metric chatsum exports, in one place. Labels carry only enums (never text,
ids or personal data), so their cardinality is fixed."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

REGISTRY = CollectorRegistry()

LATENCY_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.2, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 20.0, 30.0)

EVENTS = Counter("chatsum_events_total", "Chat events consumed, by role.", ["role"], registry=REGISTRY)
DUPLICATES = Counter("chatsum_events_duplicate_total", "Redelivered events ignored (same message id).", registry=REGISTRY)
DLQ = Counter("chatsum_dlq_total", "Events sent to the dead-letter topic, by reason.", ["reason"], registry=REGISTRY)
SESSIONS_OPEN = Gauge("chatsum_sessions_open", "Sessions held by this worker.", registry=REGISTRY)
SESSIONS_CLOSED = Counter("chatsum_sessions_closed_total", "Sessions closed and evicted, by how they ended.", ["trigger"], registry=REGISTRY)
TRIGGERS = Counter("chatsum_triggers_total", "Summary triggers, by kind.", ["trigger"], registry=REGISTRY)
PUBLISH_LATENCY = Histogram(
    "chatsum_trigger_to_publish_seconds",
    "From the triggering message's timestamp to the summary's publication.",
    ["status"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
WITHIN_SLA = Counter("chatsum_summaries_within_sla_total", "Final summaries published within the SLA.", registry=REGISTRY)
SUMMARIES = Counter("chatsum_summaries_total", "Summary events published, by status.", ["status"], registry=REGISTRY)
FALLBACKS = Counter("chatsum_fallbacks_total", "Fallback summaries, by reason.", ["reason"], registry=REGISTRY)
CONFIDENCE = Histogram(
    "chatsum_confidence_logprob",
    "Logprob at the token where the model chose the field's value.",
    ["field"],
    buckets=(-8, -4, -2, -1.5, -1, -0.75, -0.5, -0.25, -0.1, -0.01, 0),
    registry=REGISTRY,
)
PII_MASKED = Counter("chatsum_pii_masked_total", "Personal data replaced by placeholders, by type.", ["type"], registry=REGISTRY)
LLM_INFLIGHT = Gauge("chatsum_llm_inflight", "Summaries in the engine now.", registry=REGISTRY)
LLM_QUEUE = Gauge("chatsum_llm_queue_depth", "Sessions due for a summary and waiting for an engine slot.", registry=REGISTRY)
STALE_DROPPED = Counter("chatsum_summaries_stale_dropped_total", "Update summaries dropped: newer messages arrived while decoding.", registry=REGISTRY)
LLM_SECONDS = Histogram("chatsum_llm_seconds", "Time in the engine per summary.", buckets=LATENCY_BUCKETS, registry=REGISTRY)
TOKENS = Counter("chatsum_llm_tokens_total", "Tokens through the engine.", ["direction"], registry=REGISTRY)
KV_CACHE = Gauge("chatsum_vllm_kv_cache_usage_ratio", "vLLM KV-cache use (0-1).", registry=REGISTRY)
VLLM_WAITING = Gauge("chatsum_vllm_requests_waiting", "Requests waiting in vLLM's scheduler.", registry=REGISTRY)
VLLM_RUNNING = Gauge("chatsum_vllm_requests_running", "Requests running in vLLM's scheduler.", registry=REGISTRY)
CONSUMER_LAG = Gauge("chatsum_consumer_lag", "Messages behind the end of chat.events, by partition.", ["partition"], registry=REGISTRY)
RETRIEVAL_SECONDS = Histogram(
    "chatsum_retrieval_seconds", "Few-shot retrieval per query.", buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1),
    registry=REGISTRY,
)
FEWSHOT_CASES = Gauge("chatsum_fewshot_cases", "Cases in the retrieval library, by source.", ["source"], registry=REGISTRY)
FEEDBACK = Counter("chatsum_feedback_total", "Agent feedback, by verdict and error type.", ["verdict", "error_type"], registry=REGISTRY)
READY = Gauge("chatsum_ready", "1 once the engine is warm and the worker consumes.", registry=REGISTRY)
BUILD = Info("chatsum_build", "Model and version of this worker.", registry=REGISTRY)
