"""Topics are created up front with their partition counts, never auto-created.

Every topic that carries a session is keyed by session id and has the same partition count, so
one worker partition owns a conversation's events, the feedback on it and its table row.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka.admin import AdminClient, NewTopic

from .settings import Settings


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str]


def sessions_changelog(settings: Settings) -> str:
    """Faust's name for the changelog of the `sessions` table."""
    return f"{settings.app_id}-sessions-changelog"


def topic_specs(settings: Settings) -> list[TopicSpec]:
    n = settings.partitions
    compact = {"cleanup.policy": "compact"}
    week = {"retention.ms": str(7 * 24 * 3600 * 1000)}
    return [
        TopicSpec(settings.topic_events, n, week),
        TopicSpec(settings.topic_summaries, n, week),
        TopicSpec(settings.topic_dlq, n, week),
        TopicSpec(settings.topic_feedback, n, week),
        TopicSpec(sessions_changelog(settings), n, compact),
        # One partition: every worker reads all of it, from the start, to build its index.
        TopicSpec(settings.topic_cases, 1, compact),
    ]


class TopicError(RuntimeError):
    pass


def ensure_topics(settings: Settings, timeout_s: float = 15.0) -> list[str]:
    """Create missing topics; fail clearly when an existing one has the wrong partition count."""
    admin = AdminClient(settings.kafka_client_config())
    existing = admin.list_topics(timeout=timeout_s).topics
    wanted = topic_specs(settings)
    for spec in wanted:
        if spec.name in existing and len(existing[spec.name].partitions) != spec.partitions:
            raise TopicError(
                f"topic {spec.name} has {len(existing[spec.name].partitions)} partitions, chatsum expects "
                f"{spec.partitions} (CHATSUM_PARTITIONS). Recreate it or set CHATSUM_PARTITIONS to match."
            )
    missing = [spec for spec in wanted if spec.name not in existing]
    if missing:
        futures = admin.create_topics(
            [NewTopic(s.name, s.partitions, settings.replication_factor, config=s.config) for s in missing],
            operation_timeout=timeout_s,
        )
        for name, future in futures.items():
            try:
                future.result(timeout_s)
            except Exception as exc:  # a concurrent creator is fine
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise TopicError(f"could not create topic {name}: {exc}") from exc
    return [spec.name for spec in missing]
