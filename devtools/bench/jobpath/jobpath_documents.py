"""Documents of an exact token count for one model's tokenizer, cut from the demo corpus: what
`poolq bench jobpath` runs as jobs (every text distinct, so no reuse of a repeated text skews it)."""
from __future__ import annotations

import random
from functools import lru_cache

from poolq.devtools.demo.sample_corpus import load_sample_corpus
from poolq.engine.tokenizer import TextTokenizer

_GROUP = 256  # candidates decoded and counted per tokenizer call


class CorpusTooSmall(ValueError):
    """The corpus holds fewer distinct texts of that length than asked for."""


def documents(tokenizer: TextTokenizer, length: int, count: int, *, prefix: str, seed: int = 0) -> list[dict]:
    """``count`` records ``{"id", "text"}``, each text ``length`` tokens once tokenized (the model's
    special tokens included): windows of the corpus' token stream at distinct random starts, decoded,
    kept where they count exactly ``length`` again (decoding can merge or split word pieces)."""
    content = length - tokenizer.num_special_tokens
    if content < 1:
        raise ValueError(f"length {length}: a document needs more tokens than the model's {tokenizer.num_special_tokens} "
                         "special ones")
    stream = _stream(tokenizer)
    starts = list(range(max(0, len(stream) - content)))
    random.Random(seed).shuffle(starts)
    texts: dict[str, None] = {}  # insertion-ordered and distinct
    for first in range(0, len(starts), _GROUP):
        candidates = [tokenizer.decode(list(stream[s: s + content])) for s in starts[first: first + _GROUP]]
        for text, ids in zip(candidates, tokenizer.count_and_tokenize(candidates)):
            if len(ids) == content:
                texts.setdefault(text)
        if len(texts) >= count:
            return [{"id": f"{prefix}-{i:06d}", "text": text} for i, text in enumerate(list(texts)[:count])]
    raise CorpusTooSmall(f"the demo corpus holds {len(texts)} distinct texts of {length} tokens, fewer than the {count} asked "
                         "for: ask for fewer tokens per run")


@lru_cache(maxsize=2)
def _stream(tokenizer: TextTokenizer) -> tuple[int, ...]:
    """The corpus' content tokens back to back (tokenized once per tokenizer, whatever the lengths asked)."""
    return tuple(token for ids in tokenizer.count_and_tokenize([d["text"] for d in load_sample_corpus()]) for token in ids)
