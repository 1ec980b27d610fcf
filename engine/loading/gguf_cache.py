"""Turn a GGUF checkpoint into a plain Hugging Face model directory, once.

Loading a GGUF file through transformers dequantizes every tensor and parses the
embedded tokenizer, which takes tens of seconds on CPU. ``materialize_gguf`` does
that once and keeps the result (``config.json``, ``model.safetensors``, tokenizer
files) under ``cache_root/<key>/``, so later loads are ordinary ``from_pretrained``
calls on a local directory. Needs the ``gguf`` and ``accelerate`` packages for the
one-time conversion only.

A suggested cache root is ``default_cache_root()`` (``~/.cache/poolq/models``, or
``$POOLQ_MODEL_CACHE`` when set); the caller decides.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Bump when the layout of a converted directory changes, so old entries are not reused.
_FORMAT_VERSION = "gguf-v1"
_SAMPLE_BYTES = 1 << 20
_KEY_CHARS = 32


def default_cache_root() -> Path:
    """The suggested cache root: ``$POOLQ_MODEL_CACHE`` or ``~/.cache/poolq/models``."""
    configured = os.environ.get("POOLQ_MODEL_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "poolq" / "models"


def gguf_cache_key(gguf_path: Path) -> str:
    """A content key for a GGUF file: sha256 of its name, size, first and last MiB.

    The header (architecture, hyper-parameters, tokenizer) sits at the start of the
    file and tensor data runs to the end, so sampling both ends plus the exact size
    tells checkpoints apart without hashing the whole file.
    """
    path = Path(gguf_path)
    size = path.stat().st_size
    digest = hashlib.sha256(f"{_FORMAT_VERSION}\0{path.name}\0{size}\0".encode())
    with path.open("rb") as handle:
        digest.update(handle.read(_SAMPLE_BYTES))
        handle.seek(max(size - _SAMPLE_BYTES, 0))
        digest.update(handle.read(_SAMPLE_BYTES))
    return digest.hexdigest()[:_KEY_CHARS]


def _convert(gguf_path: Path, out_dir: Path) -> None:
    """Dequantize ``gguf_path`` to float32 and save model and tokenizer into ``out_dir``.

    The tokenizer's ``model_max_length`` is set to the model's context window
    (GGUF tokenizers carry none, so transformers would report a huge sentinel).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    with _gguf_parsed_once():
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    _drop_gguf_quantization(model)
    tokenizer.model_max_length = model.config.max_position_embeddings
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


_GGUF_PATCH_LOCK = threading.Lock()


@contextlib.contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """While converting, ``gguf.GGUFReader`` opens each file once and ``gguf.get_tensor_name_map``
    builds each map once.

    transformers parses the file three times (config, tokenizer, weights: ~4.5 CPU-s each for
    SmolLM2's 49k-token vocabulary) and rebuilds the tensor-name map for every module it walks
    (397 times, ~7 CPU-s); both are pure functions of their arguments. It imports the two names
    from ``gguf`` at call time, so swapping the module's attributes for the conversion reaches it;
    the originals are back afterwards, and the cached readers (memory maps) are dropped with them.
    """
    import gguf as gguf_package

    gguf: Any = gguf_package  # its two attributes are swapped below, which its type hints do not allow
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], object] = {}

    def reader(path, mode: str = "r"):
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = reader_class(path, mode)
        return readers[key]

    with _GGUF_PATCH_LOCK:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(name_map)
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader_class, name_map
            readers.clear()


def _drop_gguf_quantization(model) -> None:
    """Forget the GGUF "quantization" marker: the weights are already plain float32."""
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    model.is_quantized = False


def _publish(tmp_dir: Path, final_dir: Path) -> Path:
    """Atomically move a finished ``tmp_dir`` to ``final_dir``; a racing winner is kept."""
    try:
        os.rename(tmp_dir, final_dir)
    except OSError:
        if not final_dir.is_dir():
            raise
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return final_dir


def converted_dir(gguf_path: Path, cache_root: Path) -> Path | None:
    """The converted directory of ``gguf_path`` if it is already cached, else None (no conversion)."""
    final_dir = Path(cache_root) / gguf_cache_key(Path(gguf_path).resolve())
    return final_dir if final_dir.is_dir() else None


def materialize_gguf(gguf_path: Path, cache_root: Path) -> Path:
    """Return a plain HF model directory for ``gguf_path``, converting it on first use.

    The directory ``cache_root/<gguf_cache_key>/`` holds ``config.json``,
    ``model.safetensors`` (float32) and the tokenizer files. It is built in a
    temporary sibling directory and renamed into place, so it either exists complete
    or not at all; concurrent callers may both convert, and the first rename wins.
    """
    gguf_path = Path(gguf_path).resolve()
    cache_root = Path(cache_root)
    if (cached := converted_dir(gguf_path, cache_root)) is not None:
        return cached
    final_dir = cache_root / gguf_cache_key(gguf_path)
    cache_root.mkdir(parents=True, exist_ok=True)
    tmp_dir = Path(tempfile.mkdtemp(prefix=f".{final_dir.name}.", suffix=".tmp", dir=cache_root))
    # Said before and after: the conversion takes a while and writes float32 weights (SmolLM2-135M: about 517 MB).
    log.info("model cache: converting %s once into %s (float32; later loads reuse it; POOLQ_MODEL_CACHE moves the "
             "cache, deleting the folder frees it)", gguf_path.name, final_dir)
    try:
        _convert(gguf_path, tmp_dir)
        tmp_dir.chmod(0o755)  # mkdtemp makes it owner-only
    except BaseException:
        shutil.rmtree(tmp_dir, ignore_errors=True)
        raise
    published = _publish(tmp_dir, final_dir)
    log.info("model cache: %s holds %.0f MB (rm -r %s frees it; it is made again on the next load)", published,
             _megabytes(published), published)
    return published


def _megabytes(directory: Path) -> float:
    return sum(path.stat().st_size for path in directory.rglob("*") if path.is_file()) / 1e6
