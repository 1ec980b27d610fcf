"""The tokenizer an estimate prices its sample with: the model directory's ``tokenizer.json``
read by Hugging Face's ``tokenizers`` (Rust, no torch, no transformers), so the API process can
run it. The engine's ``TextTokenizer`` wraps the same file through transformers' fast tokenizer;
``tests/products/estimate/test_sample_tokenizer.py`` holds the two to the same ids and offsets.

Like the engine, texts over ``PIECE_CHARS`` are tokenized in pieces cut before whitespace."""
from __future__ import annotations

import threading
from pathlib import Path

from tokenizers import Tokenizer

from poolq.engine.loading.tokenizer_specials import special_token_counts
from poolq.engine.tokenizer import PIECE_CHARS, split_at_whitespace


class TokenizerMissing(ValueError):
    """The model directory has no ``tokenizer.json`` (a slow tokenizer only): no estimate for it."""


class SampleTokenizer:
    def __init__(self, model_dir: Path) -> None:
        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise TokenizerMissing(f"{model_dir.name} has no tokenizer.json, which estimates tokenize with")
        self._tokenizer = Tokenizer.from_file(str(path))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self.special_token_counts = special_token_counts(self._tokenizer)

    def token_counts(self, texts: list[str]) -> list[int]:
        """Content tokens (no specials) of each text."""
        return [len(ids) for ids in self.tokenize_with_offsets(texts)[0]]

    def tokenize_with_offsets(self, texts: list[str]) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
        ids: list[list[int]] = []
        offsets: list[list[tuple[int, int]]] = []
        for text in texts:
            text_ids: list[int] = []
            text_offsets: list[tuple[int, int]] = []
            pieces = split_at_whitespace(text, PIECE_CHARS)
            for (start, _), encoding in zip(pieces, self._tokenizer.encode_batch([p for _, p in pieces],
                                                                                add_special_tokens=False)):
                text_ids += encoding.ids
                text_offsets += [(start + a, start + b) for a, b in encoding.offsets]
            ids.append(text_ids)
            offsets.append(text_offsets)
        return ids, offsets

    def pair_tokens(self, first: str, second: str) -> int:
        """Tokens of a text pair with the model's pair template (a cross-encoder's input)."""
        return len(self._tokenizer.encode(first, second, add_special_tokens=True).ids)


class SampleTokenizers:
    """One per model directory, loaded on first use (a tokenizer.json loads in well under a second)."""

    def __init__(self) -> None:
        self._loaded: dict[Path, SampleTokenizer] = {}
        self._lock = threading.Lock()

    def get(self, model_dir: Path) -> SampleTokenizer:
        with self._lock:
            if model_dir not in self._loaded:
                self._loaded[model_dir] = SampleTokenizer(model_dir)
            return self._loaded[model_dir]
