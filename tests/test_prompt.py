"""How a transcript is fitted into the prompt's budget: long, messy chats keep their opening and
their end, and the identifiers of what was left out."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from service.prompt import render_transcript


@dataclass
class Turn:
    role: str
    text: str


def long_chat() -> list[Turn]:
    turns = [Turn("system", "会话开始"), Turn("agent", "您好，请问有什么可以帮您？"),
             Turn("user", "我的订单DD20240501001鞋子开胶了，要退货")]
    for i in range(60):
        text = f"第{i}条：还在等处理结果，麻烦再看一下" * 2
        if i == 20:
            text += "，换货的新单号是 JD88812345，快递单号SF1234567890123，2026-11-03 寄出"
        turns.append(Turn("agent" if i % 2 else "user", text))
    turns.append(Turn("user", "到底什么时候能退款？"))
    return turns


def test_a_short_transcript_is_rendered_whole():
    turns = [Turn("user", "鞋子尺码不对"), Turn("agent", "请问换多大的？"), Turn("user", "42码")]
    assert render_transcript(turns, 3000) == "顾客：鞋子尺码不对\n客服：请问换多大的？\n顾客：42码"


def test_a_long_transcript_keeps_its_opening_its_end_and_the_message_with_an_order_number():
    out = render_transcript(long_chat(), 600)
    lines = out.splitlines()
    assert len(out) <= 600
    assert lines[:3] == ["系统：会话开始", "客服：您好，请问有什么可以帮您？", "顾客：我的订单DD20240501001鞋子开胶了，要退货"]
    assert lines[-1] == "顾客：到底什么时候能退款？"
    # From the omitted middle, the message that gave the new order number, cut around it.
    pinned = next(line for line in lines if "JD88812345" in line)
    assert pinned.startswith("顾客：…") and len(pinned) < 60
    gaps = [line for line in lines if line.startswith("（省略 ")]
    assert len(gaps) == 2 and lines.index(gaps[0]) < lines.index(pinned) < lines.index(gaps[1])
    # Every message is shown or counted in a gap.
    assert sum(int(gap.split()[1]) for gap in gaps) + len(lines) - len(gaps) == len(long_chat())


def test_without_an_order_number_the_middle_is_one_gap():
    turns = [turn for turn in long_chat() if "JD888" not in turn.text]
    lines = render_transcript(turns, 600).splitlines()
    assert [line for line in lines if line.startswith("（省略 ")] == [f"（省略 {len(turns) - len(lines) + 1} 条消息）"]


def test_a_long_opening_is_cut_to_the_customers_first_message():
    turns = [Turn("system", "系统消息" * 100), Turn("user", "订单A1234567的问题：" + "很长的描述" * 200),
             Turn("agent", "收到"), Turn("user", "请尽快")]
    out = render_transcript(turns, 300)
    assert out.startswith("顾客：订单A1234567的问题：")
    assert out.endswith("客服：收到\n顾客：请尽快")
    assert len(out) <= 300


def test_a_single_huge_message_keeps_its_start():
    out = render_transcript([Turn("user", "订单B7654321" + "啊" * 5000)], 300)
    assert out.startswith("顾客：订单B7654321") and len(out) == 300


def test_a_huge_newest_message_keeps_its_label_and_end():
    turns = [Turn("user", "你好"), Turn("agent", "在的"), Turn("user", "开头" + "中" * 2000 + "结尾")]
    out = render_transcript(turns, 400)
    assert out.startswith("顾客：你好")
    assert "\n顾客：…" in out and out.endswith("结尾")
    assert len(out) <= 400


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["user", "agent", "system"]), st.text(min_size=1, max_size=400)), min_size=1,
             max_size=40),
    st.integers(min_value=200, max_value=3000),
)
def test_the_budget_holds_and_the_newest_words_are_kept(messages, max_chars):
    turns = [Turn(role, text) for role, text in messages]
    out = render_transcript(turns, max_chars)
    assert len(out) <= max_chars
    opening_ends = next((i for i, t in enumerate(turns) if t.role == "user"), 0)
    if opening_ends < len(turns) - 1:  # the newest message is not the opening itself
        assert out.endswith(turns[-1].text[-20:])

