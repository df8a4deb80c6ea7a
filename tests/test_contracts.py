"""The JSON Schemas in schemas/ are what the pydantic contracts say, and they mean it."""

import json

import jsonschema
import pytest

from service.contracts import EXPORTED, SCHEMA_DIR, ChatEvent, SummaryFields, schema_text


@pytest.mark.parametrize("name", sorted(EXPORTED))
def test_schema_files_are_in_sync_with_the_models(name):
    assert (SCHEMA_DIR / name).read_text(encoding="utf-8") == schema_text(EXPORTED[name]), (
        "schemas/ is stale: run `chatsum schemas` and commit the result"
    )


def test_event_schema_accepts_a_good_event_and_rejects_bad_ones():
    schema = json.loads((SCHEMA_DIR / "chat_event.json").read_text())
    good = {"session_id": "s-1", "message_id": "m1", "role": "user", "text": "你好", "timestamp": "2026-11-29T10:00:00+08:00"}
    jsonschema.validate(good, schema)
    ChatEvent.model_validate(good)
    for bad in ({**good, "role": "bot"}, {**good, "session_id": ""}, {k: v for k, v in good.items() if k != "timestamp"},
                {**good, "extra": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


def test_summary_fields_enforce_enums_length_and_item_id_shape():
    ok = {"item_id": "DD2026", "request_type": "退换货", "sentiment": "焦虑", "summary_text": "客户要求退货"}
    SummaryFields.model_validate(ok)
    SummaryFields.model_validate({**ok, "item_id": ""})
    for bad in ({**ok, "request_type": "退款"}, {**ok, "summary_text": "长" * 51}, {**ok, "item_id": "订单123"},
                {**ok, "sentiment": "开心"}):
        with pytest.raises(ValueError):
            SummaryFields.model_validate(bad)
