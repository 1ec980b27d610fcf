"""infra/bench/families_long_documents.py's core at a minuscule size (hidden 32, 2 layers, 2 short
documents, 1 round), so the benchmark keeps working: its tokenizer, its sentence-transformers saves of
both families, the engine on them packed, and sentence-transformers agreeing with it."""
import families_long_documents as bench
import pytest
import random_families

TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
FAMILIES = [random_families.MODERNBERT.with_config(**TINY, local_attention=8),
            random_families.QWEN3.with_config(**TINY, num_key_value_heads=2, head_dim=8)]
LENGTHS = (60, 25)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tokenizer")
    random_families.train_tokenizer(directory, vocab_size=600)
    return directory


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.name)
def test_both_systems_embed_the_documents_alike_in_each_dtype(tokenizer_dir, family):
    import transformers

    texts = random_families.documents(transformers.AutoTokenizer.from_pretrained(str(tokenizer_dir)), LENGTHS)
    rows = bench.run_family(family, tokenizer_dir, texts, dtypes=["float32", "bfloat16"], rounds=1, batch_size=2)
    assert [(row["family"], row["dtype"], row["layers"]) for row in rows] == [
        (family.name, "float32", 2), (family.name, "bfloat16", 2)]
    float32, bfloat16 = rows
    # the documents are about as long as asked (cut at token boundaries, specials included)
    assert abs(float32["tokens"] - sum(LENGTHS)) <= len(LENGTHS)
    assert float32["st_positions"] > float32["tokens"]  # one batch of both: the short one padded
    assert all(row["poolq_tok_s"] > 0 and row["st_tok_s"] > 0 and len(row["ratios"]) == 1 for row in rows)
    assert float32["min_centred_cosine"] >= 0.9999
    assert bfloat16["min_centred_cosine"] >= 0.99 and bfloat16["poolq_min_cos_to_st_fp32"] >= 0.99
    assert len(bench.markdown(rows).splitlines()) == 2 + len(rows)


def test_sentence_transformers_positions_count_each_length_sorted_batch_at_its_longest():
    # ST sorts by characters, longest first: batches (8000, 1000) and (500, 250) of 2
    assert bench.st_positions([500, 8000, 250, 1000], [2500, 40000, 1200, 5100], batch_size=2) == 2 * 8000 + 2 * 500
    assert bench.st_positions([500, 8000, 250, 1000], [2500, 40000, 1200, 5100], batch_size=1) == 9750


def test_the_two_systems_of_a_dtype_run_back_to_back_and_take_turns_first():
    keys = ["poolq32", "st32", "poolq16", "st16"]
    assert [bench.round_order(keys, r) for r in range(3)] == [
        ["poolq32", "st32", "poolq16", "st16"], ["st16", "poolq16", "st32", "poolq32"], ["poolq32", "st32", "poolq16", "st16"]]
