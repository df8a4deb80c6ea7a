"""The bench's own arithmetic: how many summaries a conversation asks for, and where the knee is."""

from __future__ import annotations

from service.bench import _runs_per_conversation, knee


def _conversation(roles: str) -> dict:
    return {"messages": [{"role": "user" if r == "u" else "agent", "text": "x"} for r in roles]}


def test_runs_per_conversation_follow_the_trigger_rules():
    assert _runs_per_conversation(_conversation("uau"), 3) == 1  # two customer messages: only the final
    assert _runs_per_conversation(_conversation("uauau"), 3) == 2  # the third message, then the final
    assert _runs_per_conversation(_conversation("uauauuau"), 3) == 4  # plus an update per later message


def _level(fraction: float, p99: float, summaries: int = 20, overload: int = 0) -> dict:
    return {"fraction_of_capacity": fraction, "p99_s": p99, "summaries": summaries,
            "fallbacks": {"overload": overload} if overload else {}}


def test_knee_is_where_p99_doubles_or_overload_starts():
    assert knee([_level(0.25, 4.0), _level(0.5, 5.0), _level(0.7, 9.0), _level(1.0, 30.0)]) == 0.7
    assert knee([_level(0.25, 4.0), _level(0.5, 5.0, overload=3), _level(0.7, 6.0)]) == 0.5
    assert knee([_level(0.25, 4.0), _level(0.5, 4.5)]) is None
    assert knee([]) is None
