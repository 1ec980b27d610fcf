"""A GGUF file's header metadata, read without torch, numpy or dequantizing anything.

The API validates jobs against a model's declarations (window, hidden size, pooling). For a
GGUF checkpoint those live in the key-value header at the start of the file; converting the
whole checkpoint to read them (``poolq.engine.loading.gguf_cache``) would cost the API tens of seconds and a
torch install. Arrays (the tokenizer's vocabulary and merges) are skipped, not decoded.

Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (little-endian, version 2+).
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from poolq.engine.model_spec import ModelKind, ModelSpec, ModelSpecError, PoolingType
from poolq.engine.st_config import DEFAULT_PROMPTS

_MAGIC = b"GGUF"
_STRING, _ARRAY = 8, 9
# Value type id -> struct format of its scalar.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
# A header value once read: a string or a scalar (arrays are skipped).
GgufValue = str | int | float | bool

# GGUF ``general.architecture`` -> the transformers class a converted checkpoint declares.
# Every GGUF architecture transformers loads as a decoder; others are refused up front.
GGUF_ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "gemma2": "Gemma2ForCausalLM",
    "gemma3": "Gemma3ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
    "starcoder2": "Starcoder2ForCausalLM",
    "stablelm": "StableLmForCausalLM",
    "falcon": "FalconForCausalLM",
    "bloom": "BloomForCausalLM",
    "nemotron": "NemotronForCausalLM",
}


def read_gguf_metadata(path: str | Path) -> dict[str, GgufValue]:
    """The header's scalar and string values by key (arrays are skipped)."""
    path = Path(path)
    with path.open("rb") as handle:
        if handle.read(4) != _MAGIC:
            raise ModelSpecError(f"{path} is not a GGUF file (bad magic)")
        version, _tensor_count, kv_count = struct.unpack("<IQQ", _read(handle, 20, path))
        if version < 2:
            raise ModelSpecError(f"{path}: GGUF version {version} is not supported (need 2 or later)")
        metadata: dict[str, GgufValue] = {}
        for _ in range(kv_count):
            key = _read_string(handle, path)
            (value_type,) = struct.unpack("<I", _read(handle, 4, path))
            value = _read_value(handle, value_type, path)
            if value is not None:  # None: an array, skipped
                metadata[key] = value
        return metadata


def read_gguf_model_spec(path: str | Path) -> ModelSpec:
    """The :class:`ModelSpec` a GGUF decoder will have once converted: LAST pooling, no normalize."""
    path = Path(path)
    metadata = read_gguf_metadata(path)
    arch = str(metadata.get("general.architecture", ""))
    if arch not in GGUF_ARCHITECTURES:
        raise ModelSpecError(
            f"{path}: GGUF architecture {arch!r} is not supported; supported: {', '.join(sorted(GGUF_ARCHITECTURES))}"
        )
    try:
        hidden_size = int(metadata[f"{arch}.embedding_length"])
        context = int(metadata[f"{arch}.context_length"])
    except KeyError as exc:
        raise ModelSpecError(f"{path}: GGUF header lacks {exc.args[0]!r}") from None
    return ModelSpec(
        path=path,
        architecture=GGUF_ARCHITECTURES[arch],
        hidden_size=hidden_size,
        window_tokens=context,
        max_position_tokens=context,
        pooling=PoolingType.LAST,
        normalize=False,
        is_causal=True,
        kind=ModelKind.ENCODER,
        prompts=dict(DEFAULT_PROMPTS),  # what sentence-transformers gives a model without its own (as the converted dir)
    )


def _read(handle: BinaryIO, size: int, path: Path) -> bytes:
    data = handle.read(size)
    if len(data) != size:
        raise ModelSpecError(f"{path}: GGUF header is truncated")
    return data


def _read_string(handle: BinaryIO, path: Path) -> str:
    (length,) = struct.unpack("<Q", _read(handle, 8, path))
    return _read(handle, length, path).decode("utf-8", errors="replace")


def _read_value(handle: BinaryIO, value_type: int, path: Path) -> GgufValue | None:
    if value_type == _STRING:
        return _read_string(handle, path)
    if value_type == _ARRAY:
        item_type, count = struct.unpack("<IQ", _read(handle, 12, path))
        _skip_array(handle, item_type, count, path)
        return None
    fmt = _SCALARS.get(value_type)
    if fmt is None:
        raise ModelSpecError(f"{path}: unknown GGUF value type {value_type}")
    return struct.unpack(fmt, _read(handle, struct.calcsize(fmt), path))[0]


def _skip_array(handle: BinaryIO, item_type: int, count: int, path: Path) -> None:
    """Seek past an array: fixed-size items in one jump, strings one length prefix at a time."""
    if item_type in _SCALARS:
        handle.seek(struct.calcsize(_SCALARS[item_type]) * count, 1)
        return
    for _ in range(count):
        _read_value(handle, item_type, path)
