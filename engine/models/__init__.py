"""Native model forwards that run poolq's packed layout directly (no padding tokens).

``packed_encoder(model)`` picks the packed forward for a loaded HF base model by its
``config.model_type`` (one table, ``PACKED_FORWARDS``), or None where there is none or the family's
``supports`` declines this model; the caller then runs the padded transformers forward.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

from poolq.engine.models import packed_bert, packed_decoder, packed_gemma3, packed_modernbert
from poolq.engine.models.packed_bert import PackedBertEncoder
from poolq.engine.models.packed_decoder import PackedDecoder
from poolq.engine.models.packed_gemma3 import PackedGemma3Decoder
from poolq.engine.models.packed_modernbert import PackedModernBertEncoder


@dataclass(frozen=True)
class PackedForward:
    """A packed forward class (built from a loaded HF base model, sharing its parameters) and the
    check of which models of its ``model_type`` it reproduces exactly."""

    build: Callable[[nn.Module], nn.Module]
    supports: Callable[[nn.Module], bool]


_BERT = PackedForward(PackedBertEncoder, packed_bert.supports)
_DECODER = PackedForward(PackedDecoder, packed_decoder.supports)
PACKED_FORWARDS: dict[str, PackedForward] = {
    **dict.fromkeys(("bert", "roberta", "xlm-roberta", "mpnet"), _BERT),
    "modernbert": PackedForward(PackedModernBertEncoder, packed_modernbert.supports),
    **dict.fromkeys(("llama", "mistral", "qwen2", "qwen3"), _DECODER),
    "gemma3_text": PackedForward(PackedGemma3Decoder, packed_gemma3.supports),
}


def packed_forward(model: nn.Module) -> PackedForward | None:
    """The packed forward that reproduces ``model`` (an HF base model) exactly, or None."""
    found = PACKED_FORWARDS.get(getattr(getattr(model, "config", None), "model_type", None) or "")
    return found if found is not None and found.supports(model) else None


def supports(model: nn.Module) -> bool:
    """Whether some packed forward reproduces ``model`` exactly."""
    return packed_forward(model) is not None


def packed_encoder(model: nn.Module) -> nn.Module | None:
    """``model``'s packed forward, sharing its parameters, or None where it has none."""
    found = packed_forward(model)
    return None if found is None else found.build(model)


__all__ = [
    "PACKED_FORWARDS",
    "PackedBertEncoder",
    "PackedDecoder",
    "PackedForward",
    "PackedGemma3Decoder",
    "PackedModernBertEncoder",
    "packed_encoder",
    "packed_forward",
    "supports",
]
