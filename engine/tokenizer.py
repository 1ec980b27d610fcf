"""Tokenization with explicit truncation: the full length is always known and reported."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from poolq.engine.request import TruncationSide
from poolq.engine.st_config import read_st_config

# Texts longer than this are tokenized in pieces cut at whitespace (see split_at_whitespace).
PIECE_CHARS = 100_000


def split_at_whitespace(text: str, max_chars: int) -> list[tuple[int, str]]:
    """``(start, piece)`` pairs covering ``text``, each cut just before a whitespace character.

    Tokenizers split words at whitespace before anything else (WordPiece drops it; byte-level
    BPE attaches it to the *next* word), so cutting right before whitespace tokenizes each
    piece exactly as it would be inside the whole text.
    """
    pieces, start = [], 0
    while len(text) - start > max_chars:
        cut = start + max_chars
        while cut > start and not text[cut].isspace():
            cut -= 1
        if cut == start:  # no whitespace at all in max_chars: cut anyway
            cut = start + max_chars
        pieces.append((start, text[start:cut]))
        start = cut
    pieces.append((start, text[start:]))
    return pieces


@dataclass(frozen=True)
class PromptedText:
    """``prompt + text`` tokenized as one string (as sentence-transformers tokenizes it), cut where the
    prompt ends: ``prompt_ids`` are its leading tokens that lie within the prompt, ``content_ids`` the
    rest, with their character offsets in ``text`` (where asked for)."""

    prompt_ids: list[int]
    content_ids: list[int]
    offsets: list[tuple[int, int]] | None = None


@dataclass(frozen=True)
class TokenizedText:
    """Token ids ready for the model, and what the whole text would have needed."""

    token_ids: list[int]
    num_tokens: int  # of the whole text, special tokens included
    truncated: bool
    token_type_ids: list[int] | None = None  # text pairs only


class TextTokenizer:
    """Wraps the model directory's tokenizer; adds special tokens the way the model expects."""

    def __init__(self, model_dir: Path, *, lower_case: bool | None = None) -> None:
        """``lower_case``: lower-case every text (sentence_bert_config.json's ``do_lower_case``, read from
        ``model_dir`` when None)."""
        from transformers import AutoTokenizer  # heavy import kept off module import

        self._tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        if lower_case if lower_case is not None else read_st_config(Path(model_dir)).do_lower_case:
            _lower_case(self._tokenizer)
        # One call at a time: transformers' fast tokenizers set their truncation state on every call,
        # and two runs' planning threads (a shard and the interactive lane) may tokenize at once.
        self._calls = threading.Lock()
        # We truncate ourselves; stop the tokenizer warning about long inputs.
        self._tokenizer.model_max_length = 1 << 30
        self._prefix_ids, self._suffix_ids = self._special_token_template()
        self.num_special_tokens = len(self._prefix_ids) + len(self._suffix_ids)
        self.pad_token_id = self._tokenizer.pad_token_id or 0
        self._prompt_lengths: dict[str, int] = {}

    def _special_token_template(self) -> tuple[list[int], list[int]]:
        """The special tokens the model's template puts before and after a single text.

        Found by encoding a probe with and without special tokens, which works for every
        single-sequence template (``[CLS] $A [SEP]``, ``<s> $A </s>``, ``$A <eos>``, ...).
        """
        plain = self._tokenizer("probe", add_special_tokens=False)["input_ids"]
        full = self._tokenizer("probe", add_special_tokens=True)["input_ids"]
        for start in range(len(full) - len(plain) + 1):
            if full[start : start + len(plain)] == plain:
                return full[:start], full[start + len(plain) :]
        raise ValueError("cannot locate the text inside the tokenizer's special-token template")

    def count_and_tokenize(self, texts: list[str]) -> list[list[int]]:
        """Content token ids (no special tokens) of each text, untruncated."""
        if all(len(text) <= PIECE_CHARS for text in texts):
            with self._calls:
                return self._encode_batch(texts)
        return [self._tokenize_long(text, with_offsets=False)[0] for text in texts]

    def _encode_batch(self, texts: list[str]) -> list[list[int]]:
        """The texts' ids from the Rust tokenizer directly, as transformers' call gets them: its own
        wrapper (a BatchEncoding, masks and word ids per text) cost ~30 % of a short text's tokenizing on
        the job path, and ``encode_batch_fast`` skips the offsets nobody reads here. Called under ``_calls``."""
        backend = getattr(self._tokenizer, "backend_tokenizer", None)
        if backend is None:  # a slow (Python) tokenizer: transformers' call is the only way
            return self._tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
        # What transformers sets on every call (truncation=False, no padding); a tokenizer.json may carry either.
        backend.no_truncation()
        backend.no_padding()
        encode = getattr(backend, "encode_batch_fast", backend.encode_batch)  # tokenizers >= 0.20.2
        return [encoding.ids for encoding in encode(texts, add_special_tokens=False)]

    def tokenize_with_offsets(self, texts: list[str]) -> tuple[list[list[int]], list[list[tuple[int, int]]]]:
        """Content token ids and each token's (char_start, char_end) in its text."""
        ids, offsets = [], []
        for text in texts:
            text_ids, text_offsets = self._tokenize_long(text, with_offsets=True)
            ids.append(text_ids)
            offsets.append(text_offsets)
        return ids, offsets

    def _tokenize_long(self, text: str, with_offsets: bool) -> tuple[list[int], list[tuple[int, int]]]:
        """Tokenize piece by piece, so the tokenizer's per-token bookkeeping (strings, masks,
        word ids: ~700 bytes a token) never exists for a whole very long document at once."""
        ids: list[int] = []
        offsets: list[tuple[int, int]] = []
        for start, piece in split_at_whitespace(text, PIECE_CHARS):
            with self._calls:
                encoded = self._tokenizer(piece, add_special_tokens=False, truncation=False,
                                          return_offsets_mapping=with_offsets)
            ids.extend(encoded["input_ids"])
            if with_offsets:
                offsets.extend((start + a, start + b) for a, b in encoded["offset_mapping"])
        return ids, offsets

    def prompted(self, prompt: str, text: str, content_ids: list[int],
                 offsets: list[tuple[int, int]] | None) -> PromptedText:
        """``prompt + text`` as one string's tokens, from the text's own (``content_ids``, ``offsets``).

        Only the text's head (up to its first whitespace) is tokenized again, behind the prompt: cut
        right before whitespace, the rest tokenizes as inside the whole string (``split_at_whitespace``).
        Should the head alone not tokenize as the text's first tokens, the whole string is tokenized."""
        cut = next((index for index, char in enumerate(text) if char.isspace()), len(text))
        with self._calls:
            head = self._tokenizer(text[:cut], add_special_tokens=False, truncation=False)["input_ids"]
        if content_ids[: len(head)] != head:
            joint_ids, joint_offsets = self._tokenize_long(prompt + text, with_offsets=True)
        else:
            with self._calls:
                joint = self._tokenizer(prompt + text[:cut], add_special_tokens=False, truncation=False,
                                        return_offsets_mapping=True)
            joint_ids = [*joint["input_ids"], *content_ids[len(head):]]
            tail = [(a + len(prompt), b + len(prompt)) for a, b in offsets[len(head):]] if offsets is not None else []
            joint_offsets = [*joint["offset_mapping"], *tail]
        # The prompt's tokens: those ending within it (a token across the seam, BPE's " word", is the text's)
        count = next((index for index, (_, end) in enumerate(joint_offsets) if end > len(prompt)), len(joint_ids))
        text_offsets = None
        if offsets is not None:
            text_offsets = [(max(a - len(prompt), 0), max(b - len(prompt), 0)) for a, b in joint_offsets[count:]]
        return PromptedText(joint_ids[:count], joint_ids[count:], text_offsets)

    def prompt_ids(self, prompt: str) -> list[int]:
        """The prompt's own tokens, no special tokens (put before a text given as token ids)."""
        with self._calls:
            return list(self._tokenizer(prompt, add_special_tokens=False, truncation=False)["input_ids"])

    def prompt_length(self, prompt: str) -> int:
        """How many leading tokens of a prompted sequence sentence-transformers counts as the prompt's (its
        ``prompt_length``, which a Pooling with include_prompt=False leaves out): the prompt tokenized alone
        with the special tokens, less the last one if it is special."""
        if prompt not in self._prompt_lengths:
            with self._calls:
                ids = self._tokenizer(prompt, add_special_tokens=True, truncation=False)["input_ids"]
            special = set(self._tokenizer.all_special_ids)
            self._prompt_lengths[prompt] = len(ids) - (1 if ids and ids[-1] in special else 0)
        return self._prompt_lengths[prompt]

    def decode(self, token_ids: list[int]) -> str:
        """Text for ``token_ids`` (benchmarks cut texts at exact token counts with it)."""
        text = self._tokenizer.decode(token_ids)
        if not isinstance(text, str):  # transformers types decode as str | list[str]; one id list gives one str
            raise TypeError(f"decode returned {type(text).__name__}, not str")
        return text

    @property
    def special_ids(self) -> tuple[list[int], list[int]]:
        """The special token ids the template puts before and after a single text."""
        return list(self._prefix_ids), list(self._suffix_ids)

    @property
    def unused_token_ids(self) -> tuple[int, ...]:
        """Ids that carry no lexical weight (BGE-M3's sparse output drops them): CLS, EOS/SEP, pad, unknown."""
        tokenizer = self._tokenizer
        found = (tokenizer.cls_token_id, tokenizer.eos_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id,
                 tokenizer.unk_token_id)
        return tuple(sorted({token_id for token_id in found if token_id is not None}))

    @property
    def special_token_counts(self) -> tuple[int, int]:
        """How many special tokens the template puts before and after a single text."""
        return len(self._prefix_ids), len(self._suffix_ids)

    def tokenize_pair(self, text: str, text_pair: str, window_tokens: int, truncate: bool) -> TokenizedText | None:
        """A text pair (cross-encoders: query, document), with segment ids. Truncation, if allowed,
        cuts the second text only (a rerank's query is never cut); None when the first text alone
        leaves the second no room in the window."""
        with self._calls:
            full = self._tokenizer(text, text_pair, truncation=False, return_token_type_ids=True)
        num_tokens = len(full["input_ids"])
        if num_tokens <= window_tokens or not truncate:
            return TokenizedText(full["input_ids"], num_tokens, num_tokens > window_tokens, full["token_type_ids"])
        with self._calls:
            first_alone = len(self._tokenizer(text, "", truncation=False)["input_ids"])
            if first_alone >= window_tokens:
                return None
            cut = self._tokenizer(text, text_pair, truncation="only_second", max_length=window_tokens,
                                  return_token_type_ids=True)
        return TokenizedText(cut["input_ids"], num_tokens, True, cut["token_type_ids"])

    def finish(self, content_ids: list[int], window_tokens: int, side: TruncationSide,
               prompt_ids: list[int] | None = None) -> TokenizedText:
        """Cut content to fit ``window_tokens`` with the special tokens and the prompt's (never cut), then
        add them: ``[prefix, prompt, content, suffix]``."""
        prompt_ids = prompt_ids or []
        num_tokens = len(content_ids) + len(prompt_ids) + self.num_special_tokens
        budget = window_tokens - self.num_special_tokens - len(prompt_ids)
        if budget < 1:
            raise ValueError(f"a window of {window_tokens} tokens leaves no room for text after the special tokens "
                             f"and a prompt of {len(prompt_ids)} tokens")
        truncated = len(content_ids) > budget
        if truncated:
            content_ids = content_ids[:budget] if side is TruncationSide.END else content_ids[-budget:]
        token_ids = [*self._prefix_ids, *prompt_ids, *content_ids, *self._suffix_ids]
        return TokenizedText(token_ids=token_ids, num_tokens=num_tokens, truncated=truncated)


def _lower_case(tokenizer) -> None:
    """Lower-case every text the way sentence-transformers does for ``do_lower_case``: a Lowercase step
    first in the tokenizer's normalizer (offsets stay those of the original text)."""
    from tokenizers.normalizers import Lowercase
    from tokenizers.normalizers import Sequence as NormalizerSequence

    backend = tokenizer.backend_tokenizer
    normalizer = backend.normalizer
    if isinstance(normalizer, NormalizerSequence):
        steps = [normalizer[index] for index in range(len(normalizer))]
    else:
        steps = [normalizer] if normalizer is not None else []
    if not any(isinstance(step, Lowercase) for step in steps):
        backend.normalizer = NormalizerSequence([Lowercase(), *steps])
