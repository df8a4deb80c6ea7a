"""A randomly initialised model of a real model's shape, with a tokenizer trained on the spot,
for measuring speed where no weights can be fetched (the lent GPU machine): speed depends on
the shape and the number of tokens, not on what the weights say.

Usage: python make_random_qwen.py OUT_DIR [--shape qwen2-7b|qwen2.5-0.5b]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SHAPES = {
    "qwen2-7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                     num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
}
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def corpus(root: Path) -> list[str]:
    texts = []
    for path in (root / "eval" / "devset.jsonl", root / "samples" / "conversations.jsonl", root / "fewshot" / "cases.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            texts += [m["text"] for m in row.get("messages", row.get("transcript", []))]
    return texts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--shape", default="qwen2-7b", choices=sorted(SHAPES))
    args = parser.parse_args()
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    from service.prompt import SYSTEM_PROMPT

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shape = SHAPES[args.shape]
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=32000, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(root) + [SYSTEM_PROMPT] * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    config = Qwen2Config(**shape, max_position_embeddings=32768, rope_theta=1_000_000.0, torch_dtype="bfloat16",
                         eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"), bos_token_id=None)
    torch.manual_seed(0)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    print(json.dumps({"out": str(out), "shape": args.shape, "params": params, "tokenizer_vocab": fast.vocab_size}))


if __name__ == "__main__":
    main()
