"""How many special tokens a model's tokenizer puts around one text (BERT's ``[CLS]`` and ``[SEP]``:
one before, one after), read from its ``tokenizer.json`` with Hugging Face's ``tokenizers`` (Rust,
no torch, no transformers), so the API and the control workers can check a long-document window
before a worker runs it: a window of no more tokens than those leaves none for the text."""
from __future__ import annotations

import functools
from pathlib import Path

from tokenizers import Tokenizer


def special_token_counts(tokenizer: Tokenizer) -> tuple[int, int]:
    """The special tokens ``tokenizer`` adds before and after a text (padding and truncation cleared:
    a tokenizer.json may pad every encoding to a fixed length)."""
    plain = tokenizer.encode("probe", add_special_tokens=False).ids
    full = tokenizer.encode("probe", add_special_tokens=True).ids
    start = next(i for i in range(len(full) - len(plain) + 1) if full[i:i + len(plain)] == plain)
    return start, len(full) - start - len(plain)


def special_tokens_in(model_dir: Path) -> int | None:
    """The special tokens around one text for the model in ``model_dir``; None without a tokenizer.json
    (a slow tokenizer only: the engine checks its window when it loads)."""
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        return None
    stat = path.stat()
    return _count(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _count(path: str, modified_ns: int, size: int) -> int:
    """Cached by the file's path, time and size: a tokenizer.json loads in up to a few tenths of a second."""
    tokenizer = Tokenizer.from_file(path)
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return sum(special_token_counts(tokenizer))
