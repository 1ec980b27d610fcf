"""`poolq bench families`' parts that need no model: how sentence-transformers' padding is counted, the
order of a round, the sizes of the models, and a run refused before it builds anything."""
import pytest

from poolq.devtools.bench.families import families_run as bench
from poolq.devtools.bench.families.random_families import MODERNBERT, QWEN3, sized_family


def test_sentence_transformers_positions_count_each_length_sorted_batch_at_its_longest():
    # ST sorts by characters, longest first: batches (8000, 1000) and (500, 250) of 2
    assert bench.st_positions([500, 8000, 250, 1000], [2500, 40000, 1200, 5100], batch_size=2) == 2 * 8000 + 2 * 500
    assert bench.st_positions([500, 8000, 250, 1000], [2500, 40000, 1200, 5100], batch_size=1) == 9750


def test_the_two_systems_of_a_dtype_run_back_to_back_and_take_turns_first():
    keys = ["poolq32", "st32", "poolq16", "st16"]
    assert [bench.round_order(keys, r) for r in range(3)] == [
        ["poolq32", "st32", "poolq16", "st16"], ["st16", "poolq16", "st32", "poolq32"], ["poolq32", "st32", "poolq16", "st16"]]


def test_the_default_size_is_the_real_models_and_layers_can_be_cut():
    assert (sized_family("modernbert").config, sized_family("qwen3").config) == (MODERNBERT.config, QWEN3.config)
    assert (MODERNBERT.layers, MODERNBERT.config["hidden_size"], QWEN3.layers, QWEN3.config["hidden_size"]) == (12, 768, 28, 1024)
    cut = sized_family("qwen3", layers=4)
    assert cut.layers == 4 and cut.config["hidden_size"] == 1024
    tiny = sized_family("modernbert", "tiny")
    assert (tiny.layers, tiny.config["hidden_size"], tiny.config["global_attn_every_n_layers"]) == (2, 64, 3)


@pytest.mark.parametrize(("name", "size", "layers", "message"), [
    ("bert", "realistic", None, "unknown family 'bert'; known: modernbert, qwen3"),
    ("qwen3", "huge", None, "unknown size 'huge'; known: realistic, tiny"),
    ("qwen3", "tiny", 0, "qwen3: layers must be at least 1, got 0"),
])
def test_a_family_that_cannot_be_built_is_named(name, size, layers, message):
    with pytest.raises(ValueError, match=message):
        sized_family(name, size, layers)


def test_a_run_that_cannot_be_measured_is_refused_with_each_problem_named():
    with pytest.raises(bench.InvalidRun) as refused:
        bench.run_families([], lengths=(9000,), dtypes=("float32", "int8"), rounds=0)
    assert str(refused.value) == (
        "poolq bench families: no families to run; 1 length(s): the centred cosines need at least 2 documents; "
        "rounds 0: at least 1; length 9000: each document must be 3..8192 tokens; "
        "dtype 'int8': one of float32, float16, bfloat16, auto")
