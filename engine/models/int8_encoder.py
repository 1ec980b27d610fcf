"""int8 for a packed BERT-family encoder: calibrate, quantize, then measure before serving.

Which GEMMs become int8 (``LayerInt8``): Q/K/V and the FFN's input projection, smoothed
(SmoothQuant, alpha 0.8: their inputs are LayerNorm outputs whose few outlier channels would
otherwise set the per-tensor scale), and the attention output projection as is. The FFN's
output projection stays float32: its GELU inputs are the most outlier-heavy, and quantizing
it cost MiniLM about 0.02 of cosine (measured with infra/bench/int8_quality.py's probe).

Nothing is assumed: ``quantize_encoder`` runs the calibration passages through the float32
encoder, quantizes, and compares mean-pooled states of held-out passages; under
``MIN_COSINE`` the model is refused (``Int8Refused``), never served worse.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from poolq.engine.models.int8_linear import Int8Linear, LayerInt8
from poolq.engine.models.packed_bert import PackedBertEncoder, PackedLayer, _bias

SMOOTHING_ALPHA = 0.8
MIN_COSINE = 0.99
CALIBRATION_TEXTS = Path(__file__).with_name("int8_calibration.txt")
_CALIBRATION_SHARE = 2 / 3  # of the passages set the ranges; the rest measure the result


class Int8Refused(ValueError):
    """int8 would serve vectors too far from float32's for this model."""


Forward = Callable[[list[str]], list[torch.Tensor]]  # texts -> each one's token states [n_tokens, hidden]


def calibration_texts() -> list[str]:
    return [line for line in CALIBRATION_TEXTS.read_text(encoding="utf-8").splitlines() if line.strip()]


def quantize_encoder(encoder: PackedBertEncoder, forward: Forward, texts: list[str] | None = None) -> float:
    """Make ``encoder``'s layers int8 in place, or raise ``Int8Refused`` (then it stays float32).
    Returns the lowest cosine measured on the held-out passages."""
    texts = texts or calibration_texts()
    cut = int(len(texts) * _CALIBRATION_SHARE)
    ranges = _input_ranges(encoder, lambda: forward(texts[:cut]))
    reference = _mean_states(forward(texts[cut:]))
    for layer, (qkv_range, ffn_range) in zip(_layers(encoder), ranges):
        layer.int8 = _layer_int8(layer, qkv_range, ffn_range)
    lowest = float(torch.nn.functional.cosine_similarity(reference, _mean_states(forward(texts[cut:]))).min())
    if lowest < MIN_COSINE:
        for layer in _layers(encoder):
            layer.int8 = None
        raise Int8Refused(f"int8 keeps this model's vectors only to cosine {lowest:.4f} of float32's (the gate is "
                          f"{MIN_COSINE}); use dtype float32 or bfloat16")
    return lowest


def _input_ranges(encoder: PackedBertEncoder, run: Callable[[], object]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, the largest |value| of each input channel of QKV (the layer's input) and of
    the FFN (the attention LayerNorm's output), over the calibration passages."""
    seen: dict[tuple[int, str], torch.Tensor] = {}

    def note(key: tuple[int, str], x: torch.Tensor) -> None:
        found = x.detach().abs().amax(0).float()  # read now: the layer updates its input in place
        seen[key] = torch.maximum(seen[key], found) if key in seen else found

    hooks = []
    for index, layer in enumerate(_layers(encoder)):
        hooks.append(layer.register_forward_pre_hook(lambda _m, args, i=index: note((i, "qkv"), args[0])))
        hooks.append(layer.attn_norm.register_forward_hook(lambda _m, _a, out, i=index: note((i, "ffn"), out)))
    try:
        run()
    finally:
        for hook in hooks:
            hook.remove()
    return [(seen[(i, "qkv")], seen[(i, "ffn")]) for i in range(len(encoder.layers))]


def _layers(encoder: PackedBertEncoder) -> list[PackedLayer]:
    return [layer for layer in encoder.layers if isinstance(layer, PackedLayer)]


def _smoothing(activation_range: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    weight_range = weight.detach().abs().amax(0).float().clamp_min(1e-5)  # [in]
    return (activation_range.clamp_min(1e-5) ** SMOOTHING_ALPHA / weight_range ** (1 - SMOOTHING_ALPHA)).clamp_min(1e-5)


def _layer_int8(layer: PackedLayer, qkv_range: torch.Tensor, ffn_range: torch.Tensor) -> LayerInt8:
    return LayerInt8(
        qkv=Int8Linear(layer.qkv_weight, None, _smoothing(qkv_range, layer.qkv_weight)),
        attn_out=Int8Linear(layer.attn_out.weight, None),
        ffn_in=Int8Linear(layer.ffn_in.weight, _bias(layer.ffn_in), _smoothing(ffn_range, layer.ffn_in.weight)),
    )


def _mean_states(states: list[torch.Tensor]) -> torch.Tensor:  # [n_texts, hidden]
    return torch.stack([s.float().mean(0) for s in states])
