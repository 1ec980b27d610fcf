"""The estimate's tokenizer (tokenizer.json through ``tokenizers``, what the API image carries)
gives the engine's own ids, offsets and special tokens (``TextTokenizer``, through transformers)."""
from poolq.engine import ModelRegistry
from poolq.products.estimate.sample_tokenizer import SampleTokenizer


def test_the_sample_tokenizer_is_the_engines(minilm_engine, sample_documents, long_documents):
    engine_tokenizer = minilm_engine.tokenizer
    sample = SampleTokenizer(ModelRegistry.with_packaged_models().resolve("all-MiniLM-L6-v2"))
    texts = [d["text"] for d in sample_documents] + [d["text"] for d in long_documents[:3]]
    texts += ["", "  ", "naïve café ☕ 東京 \u200b", "x" * 250_000 + " tail", "a " * 120_000]
    assert sample.special_token_counts == engine_tokenizer.special_token_counts
    assert sample.token_counts(texts) == [len(ids) for ids in engine_tokenizer.count_and_tokenize(texts)]
    assert sample.tokenize_with_offsets(texts[:12]) == engine_tokenizer.tokenize_with_offsets(texts[:12])
    assert sample.pair_tokens("what is it?", texts[0]) == engine_tokenizer.tokenize_pair("what is it?", texts[0], 10**6,
                                                                                          False).num_tokens

