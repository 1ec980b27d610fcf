"""infra/bench/families_long_documents.py's core at a minuscule size (hidden 32, 2 layers, 2 short
documents, 1 round), so the benchmark keeps working: its tokenizer, its sentence-transformers saves of
both families, the engine on them packed, and sentence-transformers agreeing with it."""
import families_long_documents as bench
import pytest

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
FAMILIES = [bench.MODERNBERT.with_config(**TINY, local_attention=8),
            bench.QWEN3.with_config(**TINY, num_key_value_heads=2, head_dim=8)]
LENGTHS = (60, 25)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tokenizer")
    bench.train_tokenizer(directory, vocab_size=600)
    return directory


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_both_systems_embed_the_documents_alike_in_each_dtype(tokenizer_dir, family):
    import transformers

    texts = bench.documents(transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir)), LENGTHS)
    rows = bench.run_family(family, tokenizer_dir, texts, dtypes=["float32", "bfloat16"], rounds=1, batch_size=2)
    assert [(row["family"], row["dtype"], row["layers"]) for row in rows] == [
        (family.name, "float32", 2), (family.name, "bfloat16", 2)]
    float32, bfloat16 = rows
    # the documents are about as long as asked (cut at token boundaries, specials included)
    assert abs(float32["tokens"] - sum(LENGTHS)) <= len(LENGTHS)
    assert all(row["poolq_tok_s"] > 0 and row["st_tok_s"] > 0 and len(row["ratios"]) == 1 for row in rows)
    assert float32["min_centred_cosine"] >= 0.9999
    assert bfloat16["min_centred_cosine"] >= 0.99 and bfloat16["poolq_min_cos_to_st_fp32"] >= 0.99
    assert len(bench.markdown(rows).splitlines()) == 2 + len(rows)
