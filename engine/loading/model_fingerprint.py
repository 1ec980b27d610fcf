"""A model's content fingerprint: changes when its files change, even under the same name.

Incremental reindex carries vectors from an earlier run only if the model that made them is the
one that would make them now. A registry name can point at new files (a new wheel, a fine-tune
re-registered), so names alone cannot tell; hashing gigabytes of weights on every plan is too
slow. The fingerprint hashes each file's relative path and size, small files whole and large
ones by their first and last MiB (safetensors and GGUF headers, which describe every tensor,
sit at the start; data runs to the end).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

_SAMPLE_BYTES = 1 << 20
_FORMAT = "poolq-model-fingerprint-v1"


def model_fingerprint(path: str | Path) -> str:
    """``sha256:<hex>`` over a model directory's files (or one model file, e.g. a GGUF)."""
    root = Path(path)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    digest = hashlib.sha256(_FORMAT.encode())
    for file in files:
        relative = file.name if file == root else file.relative_to(root).as_posix()
        _hash_file(digest, relative, file)
    return f"sha256:{digest.hexdigest()[:32]}"


def _hash_file(digest, relative: str, file: Path) -> None:
    size = file.stat().st_size
    digest.update(f"\0{relative}\0{size}\0".encode())
    with file.open("rb") as handle:
        if size <= 2 * _SAMPLE_BYTES:
            digest.update(handle.read())
            return
        digest.update(handle.read(_SAMPLE_BYTES))
        handle.seek(size - _SAMPLE_BYTES)
        digest.update(handle.read(_SAMPLE_BYTES))
