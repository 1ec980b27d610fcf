"""The special tokens a model's tokenizer puts around one text, read from tokenizer.json without
torch: what lets the API refuse a long-document window they fill alone."""
import shutil

from tokenizers import Tokenizer

from poolq.engine.loading.registry import ModelRegistry
from poolq.engine.loading.tokenizer_specials import special_token_counts, special_tokens_in

MINILM = ModelRegistry.with_packaged_models().description_dir("all-MiniLM-L6-v2")


def test_a_wordpiece_tokenizer_that_pads_every_encoding_still_counts_its_cls_and_sep():
    tokenizer = Tokenizer.from_file(str(MINILM / "tokenizer.json"))
    assert tokenizer.padding is not None  # the packaged file pads to 128: the count clears that
    assert special_tokens_in(MINILM) == 2
    tokenizer.no_padding()
    assert special_token_counts(tokenizer) == (1, 1)


def test_a_model_without_tokenizer_json_has_no_count_before_it_loads(tmp_path):
    shutil.copy(MINILM / "config.json", tmp_path / "config.json")
    assert special_tokens_in(tmp_path) is None
