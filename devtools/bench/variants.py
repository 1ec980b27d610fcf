"""What `poolq bench` compares: poolq's engine in each compute dtype, and sentence-transformers
as users run it (torch fp32; ONNX Runtime and OpenVINO where importable). Each variant is a
name, the dtype it computes in, and ``encode(texts) -> [n, d] float32``."""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

Encode = Callable[[list[str]], np.ndarray]

# The backends SentenceTransformer(backend=...) knows.
StBackend = Literal["torch", "onnx", "openvino"]
ST_BACKEND_NAMES: tuple[StBackend, ...] = ("torch", "onnx", "openvino")
# sentence-transformers' backends beyond torch, and the modules each needs (its optional extras;
# keep them in their own environment: optimum pins transformers, optimum-intel a newer torch).
ST_BACKENDS = {"onnx": ("onnxruntime", "optimum"), "openvino": ("openvino", "optimum.intel")}


@dataclass(frozen=True)
class Variant:
    name: str
    dtype: str
    encode: Encode


# DTYPE+OPTION: the engine settings an option changes (auto+compiled: the default dtype, the layer stack compiled).
POOLQ_OPTIONS: dict[str, dict[str, bool]] = {
    "": {},
    "fused": {"fuse_norms": True},  # the experimental fused bias + LayerNorm (its layers are not compiled then)
    "eager": {"compile_encoder": False},
    "compiled": {"compile_encoder": True},
}


def poolq_variant(model: str, dtype: str, registry, device: str = "cpu") -> Variant | str:
    """poolq's engine in ``dtype``, with an option after ``+`` (``POOLQ_OPTIONS``: ``auto+compiled``, the
    default dtype with the layer stack compiled); a string saying why not (int8 refused by its quality gate)."""
    from poolq.engine import EngineConfig, LongDocumentMode, LongDocumentPolicy, PoolingEngine
    from poolq.engine.models.int8_encoder import Int8Refused

    requested, _, option = dtype.partition("+")
    if option not in POOLQ_OPTIONS:
        raise ValueError(f"poolq variant {dtype!r}: unknown option {option!r} after '+' "
                         f"(one of {', '.join(o for o in POOLQ_OPTIONS if o)})")
    # compiled (where it is) at the warm-up: the rounds measure the steady state a long-running worker reaches
    config = EngineConfig(device=device, dtype=requested, compile_after_tokens=0, **POOLQ_OPTIONS[option])
    try:
        engine = PoolingEngine.from_pretrained(model, registry=registry, config=config)
    except Int8Refused as refused:
        return f"poolq {dtype}: {refused}"
    policy = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, window_tokens=engine.spec.max_position_tokens)
    name = f"poolq {dtype}" if requested != "auto" else f"poolq auto={engine.config.dtype}{'+' + option if option else ''}"
    return Variant(name, engine.config.dtype, lambda texts: engine.embed(texts, policy=policy))


def st_variant(model_dir: str, backend: str, window: int, batch_size: int, device: str = "cpu") -> Variant | str:
    """sentence-transformers with ``backend`` (torch, onnx, openvino) at its default settings."""
    missing = [name for name in ST_BACKENDS.get(backend, ()) if importlib.util.find_spec(name.split(".")[0]) is None]
    if missing:
        return f"ST {backend}: not importable here ({', '.join(missing)} missing)"
    st_backend = _st_backend(backend)
    if st_backend is None:
        return f"ST {backend}: not a sentence-transformers backend ({', '.join(ST_BACKEND_NAMES)})"
    from sentence_transformers import SentenceTransformer

    try:
        model = SentenceTransformer(model_dir, device=device, backend=st_backend)
    except Exception as exc:  # noqa: BLE001 - an optional baseline that fails to load is reported, not fatal
        return f"ST {backend}: failed to load ({type(exc).__name__}: {exc})"[:300]
    if device != "cpu":
        model.half()
    model.max_seq_length = window
    dtype = "float16" if device != "cpu" else "float32" if backend in ("torch", "onnx") else "default"
    return Variant(f"ST {backend}", dtype, lambda texts: model.encode(texts, batch_size=batch_size, convert_to_numpy=True))


def _st_backend(name: str) -> StBackend | None:
    """``name`` as one of sentence-transformers' backends; None if it names none (a typo on the command line)."""
    return next((backend for backend in ST_BACKEND_NAMES if backend == name), None)
