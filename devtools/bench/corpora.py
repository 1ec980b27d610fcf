"""Benchmark corpora cut from real text, with exact token counts for one tokenizer."""
from __future__ import annotations

import random
from dataclasses import dataclass

from poolq.devtools.demo.sample_corpus import load_sample_corpus


@dataclass(frozen=True)
class Corpus:
    name: str
    texts: list[str]
    num_tokens: int  # what the model runs, special tokens included


def build_corpora(tokenizer, *, num_mixed: int = 200, window: int = 512, seed: int = 0,
                  num_long: int | None = None) -> list[Corpus]:
    """``mixed``: token lengths uniform in 16..window; ``long``: long documents cut into full windows
    (all of them, or the first ``num_long``).

    ``tokenizer`` is poolq's ``TextTokenizer``; texts are decoded from token windows so both
    systems see exactly the same token counts.
    """
    content = tokenizer.count_and_tokenize([doc["text"] for doc in load_sample_corpus()])
    stream = [token for ids in content for token in ids]
    budget = window - tokenizer.num_special_tokens
    rng = random.Random(seed)
    mixed_ids = []
    for _ in range(num_mixed):
        length = rng.randint(16, window) - tokenizer.num_special_tokens
        start = rng.randrange(0, len(stream) - length)
        mixed_ids.append(stream[start : start + length])
    long_ids = [stream[i : i + budget] for i in range(0, len(stream) - budget, budget)][:num_long]
    return [_corpus("mixed", mixed_ids, tokenizer), _corpus("long", long_ids, tokenizer)]


def _corpus(name: str, id_lists: list[list[int]], tokenizer) -> Corpus:
    texts = [tokenizer.decode(ids) for ids in id_lists]
    # Re-tokenize: decoding can merge or split word pieces; count what will actually run.
    counts = [len(ids) + tokenizer.num_special_tokens for ids in tokenizer.count_and_tokenize(texts)]
    return Corpus(name, texts, sum(counts))
