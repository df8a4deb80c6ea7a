"""Trigger rules of a session, as pure functions."""

from service.sessions import Session, TriggerRules, apply_idle, apply_message, apply_published, is_due

RULES = TriggerRules(user_messages=3, debounce_s=1.0, idle_timeout_s=60.0, max_messages=5)


def send(session, i, role="user", text="x", now=100.0, end=False):
    return apply_message(session, message_id=f"m{i}", role=role, text=text, ts=now, end_of_chat=end, now=now, rules=RULES)


def test_third_customer_message_triggers_at_once_agent_messages_do_not_count():
    s = Session(session_id="s", partition=0)
    send(s, 1)
    send(s, 2, role="agent")
    send(s, 3)
    assert s.version == 0
    send(s, 4, now=105.0)
    assert (s.version, s.trigger, s.trigger_ts, s.due_at) == (1, "third_message", 105.0, 105.0)
    assert is_due(s, 105.0)


def test_later_messages_are_debounced_and_a_burst_coalesces():
    s = Session(session_id="s", partition=0)
    for i in range(3):
        send(s, i)
    apply_published(s, 1)
    send(s, 3, now=200.0)
    send(s, 4, now=200.5)
    assert s.trigger == "update" and s.due_at == 201.5
    assert s.trigger_ts == 201.5  # the SLA clock starts when the burst is over, not at its first message
    assert not is_due(s, 201.0) and is_due(s, 201.5)
    assert s.owes_summary  # one run at 201.5 covers both messages


def test_redelivered_message_is_ignored():
    s = Session(session_id="s", partition=0)
    assert send(s, 1)
    assert not send(s, 1)
    assert s.user_messages == 1 and len(s.messages) == 1


def test_end_of_chat_triggers_and_closes_then_finishes_once_published():
    s = Session(session_id="s", partition=0)
    send(s, 1)
    send(s, 2, end=True)
    assert s.closed and s.trigger == "end_of_chat" and s.owes_summary and not s.finished
    apply_published(s, s.version)
    assert s.finished


def test_end_of_chat_without_customer_words_just_closes():
    s = Session(session_id="s", partition=0)
    send(s, 1, role="agent", end=True)
    assert s.finished and s.version == 0


def test_idle_timeout_closes_and_summarises():
    s = Session(session_id="s", partition=0)
    send(s, 1, now=0.0)
    assert not apply_idle(s, now=30.0, rules=RULES)
    assert apply_idle(s, now=61.0, rules=RULES)
    assert s.closed and s.trigger == "idle" and s.owes_summary


def test_transcript_is_bounded_oldest_dropped_after_the_opening_and_counted():
    s = Session(session_id="s", partition=0)
    send(s, 0, role="agent", text="greeting")
    for i in range(1, 8):
        send(s, i, text=f"t{i}")
    # The opening (up to the customer's first message) states the problem: it stays.
    assert [m.text for m in s.messages] == ["greeting", "t1", "t5", "t6", "t7"]
    assert s.dropped_messages == 3


def test_a_flood_of_long_messages_keeps_the_row_small_and_the_newest_message():
    """Every message rewrites the row to the changelog: 200 messages of 4,000 CJK characters
    would make a 2.4 MB record, past Kafka's default 1 MB limit."""
    rules = TriggerRules(max_messages=200, max_chars=20_000)
    s = Session(session_id="s", partition=0)
    for i in range(200):
        apply_message(s, message_id=f"m{i}", role="user", text=f"{i:03d}" + "退" * 3997, ts=float(i), end_of_chat=False,
                      now=float(i), rules=rules)
        assert sum(len(m.text) for m in s.messages) <= 20_000
    assert len(s.encode()) < 100_000
    assert s.messages[-1].text.startswith("199") and s.dropped_messages == 200 - len(s.messages)
    assert s.messages[0].text.startswith("000")
    huge = Session(session_id="h", partition=0)  # one message over the cap alone is kept (it was cut at ingest)
    apply_message(huge, message_id="x", role="user", text="退" * 30_000, ts=0.0, end_of_chat=False, now=0.0, rules=rules)
    assert len(huge.messages) == 1


def test_published_never_goes_backwards():
    s = Session(session_id="s", partition=0, version=5)
    apply_published(s, 4)
    apply_published(s, 2)
    assert s.published == 4 and s.owes_summary
