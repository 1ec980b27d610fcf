"""BGE-M3's checkpoint layout on a random-weight model: dense, sparse and ColBERT outputs of one
forward pass against a reference written straight on transformers + torch (FlagEmbedding's
definitions: normalized CLS; max per token id of relu(sparse_linear(h)) without CLS/EOS/pad/unk;
normalized colbert_linear(h[1:]))."""
import numpy as np
import pytest
import torch
from support.random_models import save_random_m3_model

from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine, PoolingParams, PoolingRequest, PoolingTask
from poolq.engine.model_spec import ModelKind, read_model_spec

TEXTS = ["George Orwell wrote Animal Farm.", "Foxes eat rodents, rabbits and berries, and foxes eat eggs."]
TRUNCATE = LongDocumentPolicy(mode=LongDocumentMode.TRUNCATE)
ALL = (PoolingTask.EMBED, PoolingTask.SPARSE_EMBED, PoolingTask.TOKEN_EMBED)


@pytest.fixture(scope="module")
def m3(tmp_path_factory):
    path = tmp_path_factory.mktemp("m3")
    modules = save_random_m3_model(path, seed=5)
    return path, modules, PoolingEngine.from_pretrained(str(path), dtype="float32")


@torch.no_grad()
def _reference(path, modules, text):
    from transformers import AutoTokenizer

    encoder, sparse_linear, colbert_linear = modules
    tokenizer = AutoTokenizer.from_pretrained(path)
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    hidden = encoder(input_ids=ids).last_hidden_state[0]  # [n, hidden]
    dense = torch.nn.functional.normalize(hidden[0], dim=-1)
    weights = torch.relu(sparse_linear(hidden)).squeeze(-1)
    unused = {tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id}
    sparse: dict[int, float] = {}
    for token_id, weight in zip(ids[0].tolist(), weights.tolist()):
        if token_id not in unused and weight > 0:
            sparse[token_id] = max(sparse.get(token_id, 0.0), weight)
    colbert = torch.nn.functional.normalize(colbert_linear(hidden[1:]), dim=-1)
    return dense.numpy(), sparse, colbert.numpy(), ids[0].tolist()


def test_the_layout_is_recognized_from_its_files(m3):
    path, _, engine = m3
    spec = read_model_spec(path)
    assert spec.kind is ModelKind.M3_ENCODER and spec.normalize and engine.supported_tasks == ALL


def test_one_forward_pass_gives_dense_sparse_and_colbert_equal_to_the_reference(m3):
    path, modules, engine = m3
    requests = [PoolingRequest(i, text, PoolingTask.EMBED, also=ALL[1:]) for i, text in enumerate(TEXTS)]
    for result, text in zip(engine.run(requests, TRUNCATE), TEXTS):
        dense, sparse, colbert, ids = _reference(path, modules, text)
        outputs = result.data.outputs
        np.testing.assert_allclose(outputs[PoolingTask.EMBED], dense, atol=1e-5)
        got = outputs[PoolingTask.SPARSE_EMBED]
        assert got.token_ids.tolist() == sorted(sparse)
        np.testing.assert_allclose(got.weights, [sparse[i] for i in sorted(sparse)], atol=1e-5)
        np.testing.assert_allclose(outputs[PoolingTask.TOKEN_EMBED], colbert, atol=1e-5)
        assert result.token_ids.tolist() == ids[1:]  # ColBERT rows: every token but CLS
        assert result.processed_tokens == len(ids)  # one pass, not three


def test_each_task_alone_equals_its_share_of_the_combined_pass(m3):
    _, _, engine = m3
    (combined,) = engine.run([PoolingRequest("t", TEXTS[1], PoolingTask.EMBED, also=ALL[1:])], TRUNCATE)
    for task in ALL:
        (alone,) = engine.run([PoolingRequest("t", TEXTS[1], task)], TRUNCATE)
        expected = combined.data.outputs[task]
        if task is PoolingTask.SPARSE_EMBED:
            np.testing.assert_array_equal(alone.data.token_ids, expected.token_ids)
            np.testing.assert_allclose(alone.data.weights, expected.weights, atol=1e-6)
        else:
            np.testing.assert_allclose(alone.data, expected, atol=1e-6)


def test_several_tasks_refuse_modes_beyond_one_window(m3):
    _, _, engine = m3
    policy = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED)
    (result,) = engine.run([PoolingRequest("t", TEXTS[0], PoolingTask.EMBED, also=ALL[1:])], policy)
    assert result.code == "unsupported_mode" and "several tasks" in result.message


@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("mode", [LongDocumentMode.TRUNCATE, LongDocumentMode.CHUNKED])
def test_colbert_rows_honour_a_requests_dimensions_and_normalize(m3, mode, normalize):
    # Given a request for 8 of the 24 ColBERT dimensions (the engine accepts up to 24), with or without normalization
    path, modules, engine = m3
    params = PoolingParams(dimensions=8, normalize=normalize)
    (result,) = engine.run([PoolingRequest("t", TEXTS[1], PoolingTask.TOKEN_EMBED, params=params)], LongDocumentPolicy(mode=mode))
    # Then each token's row is colbert_linear's first 8 columns, L2-normalized if asked, as every embedding head's rows
    encoder, _, colbert_linear = modules
    ids = engine.tokenizer._tokenizer(TEXTS[1], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        raw = colbert_linear(encoder(input_ids=ids).last_hidden_state[0, 1:])[:, :8]  # every token but CLS
    expected = torch.nn.functional.normalize(raw, dim=-1) if normalize else raw
    assert result.data.shape == (ids.shape[1] - 1, 8) and len(result.token_ids) == len(result.data)
    np.testing.assert_allclose(result.data, expected.numpy(), atol=1e-5)
