"""Write `eval/long_chats.jsonl`: long, messy variants of dev-set chats, for `chatsum eval`.

Real chats often give the order number early and then wait through a long back-and-forth
("请稍等，正在为您核实" / "还在吗？") before the customer's last words. Each of the first 30
dev-set chats whose expected item_id is quoted in a message gets about 3,300 characters of such
waiting inserted right after that message, which pushes the transcript past the prompt's
3,000-character budget (CHATSUM_MAX_PROMPT_CHARS). Labels are unchanged: the waiting changes
neither what the customer wants nor the item.

    .venv/bin/python eval/make_long_chats.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
AGENT = ("请您稍等，我这边正在为您核实相关信息，马上回复您", "系统正在查询中，还请您耐心等待一下",
         "已经帮您提交给相关同事了，正在跟进处理", "感谢您的耐心等待，这边还在确认中")
USER = ("好的", "嗯嗯，麻烦快一点", "还在吗？", "好吧，我等着", "行，你们查清楚再说")


def main(count: int = 30, filler_chars: int = 3300) -> None:
    rng = random.Random(3)
    rows = [json.loads(line) for line in (HERE / "devset.jsonl").read_text(encoding="utf-8").splitlines() if line]
    out = []
    for row in rows:
        item = row["expected"].get("item_id")
        at = next((i for i, m in enumerate(row["messages"]) if item and item in m["text"]), None)
        if at is None:
            continue
        filler: list[dict[str, str]] = []
        while sum(len(m["text"]) + 4 for m in filler) < filler_chars:
            filler += [{"role": "agent", "text": rng.choice(AGENT)}, {"role": "user", "text": rng.choice(USER)}]
        messages = row["messages"][: at + 1] + filler + row["messages"][at + 1 :]
        out.append(dict(row, session_id=row["session_id"] + "-long", messages=messages))
        if len(out) == count:
            break
    path = HERE / "long_chats.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    print(f"wrote {len(out)} chats to {path}")


if __name__ == "__main__":
    main()
