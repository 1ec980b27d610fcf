"""How much memory a loaded model keeps, and what its checkpoint suggests before it is loaded: what a
worker's model-memory budget (``jobs/engine_pool.py``) counts."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

import torch

from poolq.engine.loading.model_loader import LoadedModel

# Files that hold weights in the checkpoint layouts the loader reads (a sentence-transformers
# module's projector sits in a subdirectory; a GGUF model is one file).
_WEIGHT_SUFFIXES = frozenset({".safetensors", ".bin", ".pt", ".pth", ".gguf"})


def resident_bytes(loaded: LoadedModel) -> int:
    """Bytes of every tensor the model keeps: its runner's and its poolers' (projector, heads, the
    classifier) parameters, buffers and plain tensor attributes; storage shared by several tensors
    (tied weights, a view) counted once. Packed int8 weights held outside tensors are not counted."""
    storages: dict[int, int] = {}
    for tensor in _tensors([loaded.runner, *loaded.dispatcher.poolers.values()]):
        storage = tensor.untyped_storage()
        if storage.nbytes() and storage.data_ptr():
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def checkpoint_bytes(model_dir: Path) -> int:
    """The size of a model's weight files: what loading it will about take, known before it is loaded
    (more than it takes where the compute dtype is narrower than the checkpoint's)."""
    if model_dir.is_file():
        return model_dir.stat().st_size
    return sum(path.stat().st_size for path in model_dir.rglob("*") if path.suffix in _WEIGHT_SUFFIXES and path.is_file())


def _tensors(roots: Iterable[object]) -> Iterator[torch.Tensor]:
    """The tensors reachable from ``roots`` through modules, containers and this package's own objects."""
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, torch.nn.Module) or type(item).__module__.startswith("poolq."):
            stack.extend(getattr(item, "__dict__", {}).values())  # a module's _parameters, _buffers and _modules among them
