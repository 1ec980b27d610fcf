"""The sample priced exactly: each sampled document tokenized with the job's model tokenizer and
run through the long-document policy's arithmetic (``engine/long_documents/document_cost.py``),
then summed per stratum so the estimate can scale each bucket by its own counts."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from poolq.engine import ModelSpec
from poolq.engine.long_documents.document_cost import CostModel, DocumentCost
from poolq.engine.model_spec import resolve_prompt
from poolq.jobs.spec.job_spec import JobSpec
from poolq.products.estimate.sample_tokenizer import SampleTokenizer
from poolq.products.estimate.stratified_sample import SampledDocument, Stratum

_TOKEN_TASKS = ("token_embed", "token_classify")
_TOKENIZE_GROUP = 64  # documents tokenized per call


@dataclass
class PricedStratum:
    """One bucket's sample, priced: sums over its sampled documents."""

    documents: int  # every document of the bucket (the scan's count)
    characters: int
    sampled: int = 0
    sampled_characters: int = 0
    tokens: int = 0  # processed tokens of the sampled documents that would succeed, every repeat counted
    document_tokens: int = 0  # whole-document tokens, special tokens included
    rows: int = 0
    truncated: int = 0
    chunked: int = 0
    split: int = 0
    reusable_tokens: int = 0
    # Of ``tokens``: the first sampled document of each content (a job computes a repeated text once),
    # and of those, the ones already stored for reuse. Exact sums when the sample is the whole input.
    distinct_tokens: int = 0
    distinct_reusable_tokens: int = 0
    failed: Counter[str] = field(default_factory=Counter)

    def add(self, document: SampledDocument, cost: DocumentCost, reusable: bool, first: bool = True) -> None:
        self.sampled += 1
        self.sampled_characters += document.characters
        self.document_tokens += cost.num_tokens
        if cost.error is not None:
            self.failed[cost.error] += 1
            return
        self.tokens += cost.processed_tokens
        self.rows += cost.rows
        self.truncated += cost.truncated
        self.chunked += cost.windows > 1 or cost.rows > 1
        self.split += cost.split_chunks > 0
        self.reusable_tokens += cost.processed_tokens if reusable else 0
        self.distinct_tokens += cost.processed_tokens if first else 0
        self.distinct_reusable_tokens += cost.processed_tokens if first and reusable else 0


def cost_model(spec: JobSpec, model_spec: ModelSpec, tokenizer: SampleTokenizer, max_chunks: int) -> CostModel:
    """The planner's arithmetic for the job; the prompt's tokens count as the engine computes them, before
    the text of each window (so they add to every window's cost and take its room)."""
    tasks = spec.task if isinstance(spec.task, list) else [spec.task]
    prompt = resolve_prompt(model_spec, spec.prompt_name, spec.prompt)
    prompt_tokens = tokenizer.token_counts([prompt])[0] if prompt else 0
    prefix, suffix = tokenizer.special_token_counts
    policy = spec.long_documents.policy()
    if prompt:  # every window is the model's specials around the prompt and its piece (engine/long_documents)
        policy = replace(policy, window_specials=True)
    return CostModel.of(model_spec, policy, (prefix + prompt_tokens, suffix), max_chunks,
                        per_token=any(task in _TOKEN_TASKS for task in tasks))


def price_stratum(stratum: Stratum, model: CostModel, tokenizer: SampleTokenizer, reusable: dict[str, bool]) -> PricedStratum:
    priced = PricedStratum(stratum.documents, stratum.characters)
    sample = stratum.sample
    seen: set[str] = set()  # contents priced so far: a repeat has its first's length, so it is in this stratum
    for start in range(0, len(sample), _TOKENIZE_GROUP):
        group = sample[start:start + _TOKENIZE_GROUP]
        for document, cost in zip(group, _costs(group, model, tokenizer)):
            priced.add(document, cost, reusable.get(document.content_hash, False), document.content_hash not in seen)
            seen.add(document.content_hash)
    return priced


def _costs(group: list[SampledDocument], model: CostModel, tokenizer: SampleTokenizer) -> list[DocumentCost]:
    if any(document.query is not None for document in group):
        return [_pair_cost(document, model, tokenizer) for document in group]
    texts = [document.text for document in group]
    if model.needs_offsets:
        ids, offsets = tokenizer.tokenize_with_offsets(texts)
        return [model.cost(len(content), document.text, text_offsets, document.chunk_spans)
                for document, content, text_offsets in zip(group, ids, offsets)]
    return [model.cost(count) for count in tokenizer.token_counts(texts)]


def _pair_cost(document: SampledDocument, model: CostModel, tokenizer: SampleTokenizer) -> DocumentCost:
    """A score job's pair, tokenized together with the pair template, as the engine does
    (cross-encoders); truncation cuts the second text only, so the tokens are at most a window."""
    if document.query is None:
        return model.cost(tokenizer.token_counts([document.text])[0])
    num_tokens = tokenizer.pair_tokens(document.query, document.text)
    if num_tokens <= model.window:
        return DocumentCost(num_tokens, num_tokens, 1, windows=1)
    if model.policy.mode.value != "truncate":
        return DocumentCost(num_tokens, truncated=True, error="document_too_long")
    if tokenizer.pair_tokens(document.query, "") >= model.window:
        return DocumentCost(num_tokens, error="query_too_long")
    return DocumentCost(num_tokens, model.window, 1, True, windows=1)
