"""Raw bytes to a masked event or a dead letter with the right reason, and no personal data."""

import json

import pytest

from service.ingest import Prepared, dead_letter, prepare

GOOD = {"session_id": "s1", "message_id": "m1", "role": "user", "text": "我的手机号是13812345678，订单DD20261103004512",
        "timestamp": "2026-11-29T10:00:00+08:00"}


def test_good_event_is_masked_and_keeps_the_order_number():
    result = prepare(b"s1", json.dumps(GOOD).encode(), 4000)
    assert isinstance(result, Prepared)
    assert "13812345678" not in result.text and "[手机号]" in result.text
    assert "DD20261103004512" in result.text
    assert result.pii == {"mobile": 1}


@pytest.mark.parametrize("key,value,reason", [
    (b"s1", b"\xff\xfe\x00", "invalid_utf8"),
    (b"s1", b"{not json", "invalid_json"),
    (b"s1", b"[" * 100_000, "invalid_json"),
    (b"s1", None, "invalid_json"),
    (b"s1", json.dumps({**GOOD, "role": "bot"}).encode(), "schema_violation"),
    (b"s1", json.dumps({**GOOD, "timestamp": "yesterday"}).encode(), "schema_violation"),
    (b"s1", json.dumps(["a list"]).encode(), "schema_violation"),
    (None, json.dumps(GOOD).encode(), "missing_key"),
    (b"other", json.dumps(GOOD).encode(), "key_mismatch"),
])
def test_bad_input_gets_its_reason(key, value, reason):
    result = prepare(key, value, 4000)
    assert not isinstance(result, Prepared)
    assert result[0] == reason


def test_dead_letter_carries_no_personal_data():
    value = json.dumps({**GOOD, "role": "bot", "13900001111": "x@example.com"}, ensure_ascii=False).encode()
    reason, detail = prepare(b"s1", value, 4000)
    letter = dead_letter(reason, detail, value, "chat.events", 0, 7).model_dump_json()
    for secret in ("13812345678", "13900001111", "x@example.com"):
        assert secret not in letter
    assert "DD20261103004512" in letter  # business data stays readable for the operator


def test_long_text_is_cut():
    result = prepare(b"s1", json.dumps({**GOOD, "text": "好" * 5000}).encode(), 100)
    assert isinstance(result, Prepared) and len(result.text) == 100 and result.truncated
