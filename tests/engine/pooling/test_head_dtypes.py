"""The dtype policy (engine/pooling/precision.py): every head runs its layers in their own dtype whatever
dtype the states come in, and hands out float32; row-picking methods keep the states' dtype."""
import numpy as np
import pytest
import torch

from poolq.engine import LongDocumentMode, LongDocumentPolicy, PoolingEngine, PoolingRequest, PoolingTask
from poolq.engine.batch import BatchMetadata
from poolq.engine.model_spec import PoolingType
from poolq.engine.pooling import PoolingMetadata, pooling_method
from poolq.engine.pooling.heads.activation import Softmax
from poolq.engine.pooling.heads.classifier_heads import ClassifierHead, TokenClassifierHead
from poolq.engine.pooling.heads.sparse_head import SparseHead
from poolq.engine.pooling.heads.task_heads import EmbeddingHead, TokenEmbeddingHead
from poolq.engine.pooling.m3_poolers import ColbertHead, TokenWeightSparseHead
from poolq.engine.request import PoolingParams, SparseVector

TEXTS = ["a short one", "The quick brown fox jumps over the lazy dog near the river bank.", "x"]
LONG = " ".join(["The quick brown fox jumps over the lazy dog near the river bank."] * 6)  # ~90 tokens
BF16_PROBABILITY_GATE = 0.025  # as in test_dtype_matrix.py: bf16's ~4e-3 relative error, well below 0.03


def _linear(n_in, n_out, dtype):
    torch.manual_seed(0)
    return torch.nn.Linear(n_in, n_out).to(dtype).eval()


# head, its input for 3 tokens of hidden 4 in a given dtype
HEADS = {
    "classifier": lambda dt: (ClassifierHead(_linear(4, 3, dt), Softmax(), None), lambda s: s),
    "token_classifier": lambda dt: (TokenClassifierHead(_linear(4, 3, dt), Softmax(), None), lambda s: [s]),
    "embedding": lambda dt: (EmbeddingHead(_linear(4, 3, dt), normalize=True), lambda s: s),
    "token_embedding": lambda dt: (TokenEmbeddingHead(_linear(4, 3, dt), normalize=True), lambda s: [s]),
    "splade": lambda dt: (SparseHead(_linear(4, 7, dt), "max"), lambda s: [s]),
    "m3_sparse": lambda dt: (TokenWeightSparseHead(_linear(4, 1, dt), ()), lambda s: [(s, torch.tensor([5, 6, 7]))]),
    "m3_colbert": lambda dt: (ColbertHead(_linear(4, 3, dt)), lambda s: [s]),
}


@pytest.mark.parametrize("states_dtype, layer_dtype", [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32),
                                                       (torch.float16, torch.bfloat16)])
@pytest.mark.parametrize("name", HEADS)
def test_every_head_runs_its_layer_in_its_own_dtype_and_returns_float32(name, states_dtype, layer_dtype):
    head, shape_input = HEADS[name](layer_dtype)
    states = torch.randn(3, 4, generator=torch.Generator().manual_seed(1)).to(states_dtype)
    with torch.inference_mode():
        params = (PoolingParams(),) * len(shape_input(states))  # one per sequence: 3 pooled rows, or 1 token sequence
        outputs = head.forward(shape_input(states), params)
        reference = HEADS[name](torch.float32)[0].forward(shape_input(states.float()), params)
    for got, expected in zip(outputs, reference):
        got_values, expected_values = (got.weights, expected.weights) if isinstance(got, SparseVector) else (got, expected)
        assert got_values.dtype == np.float32 and np.isfinite(got_values).all()
        np.testing.assert_allclose(got_values, expected_values, atol=0.05)  # bf16 layer on O(1) values


@pytest.mark.parametrize("pooling", [PoolingType.CLS, PoolingType.LAST])
def test_cls_and_last_keep_the_states_dtype(pooling):
    # Picking a row computes nothing: widening it here would only make a bf16 head meet float32 input.
    hidden = torch.arange(12, dtype=torch.bfloat16).reshape(6, 2)
    batch = BatchMetadata.from_sequences([0, 1], [[1, 2, 3], [4, 5, 6]])
    meta = PoolingMetadata.for_rows(batch, [0, 1], [PoolingParams()] * 2, torch.device("cpu"))
    rows = pooling_method(pooling).forward(hidden, meta)
    assert rows.dtype == torch.bfloat16
    torch.testing.assert_close(rows, hidden[[0, 3] if pooling is PoolingType.CLS else [2, 5]])


def test_bf16_classify_runs_and_agrees_with_float32(model_factory, bert_config):
    from transformers import BertForSequenceClassification

    path, _ = model_factory("bf16-cls", BertForSequenceClassification, bert_config(num_labels=3, initializer_range=0.2))
    bf16 = PoolingEngine.from_pretrained(str(path), dtype="bfloat16").classify(TEXTS)
    fp32 = PoolingEngine.from_pretrained(str(path), dtype="float32").classify(TEXTS)
    assert bf16.dtype == np.float32
    np.testing.assert_allclose(bf16, fp32, atol=BF16_PROBABILITY_GATE)
    assert np.abs(fp32 - fp32[[1, 2, 0]]).max() > BF16_PROBABILITY_GATE  # the inputs' probabilities do differ


def test_bf16_chunked_token_classify_runs_and_agrees_with_float32(model_factory, bert_config):
    # Chunked token plans stitch the windows' states and run the head once over them: the states must
    # reach the bf16 classifier in bf16 (they were widened to float32 on the host).
    from transformers import BertForTokenClassification

    path, _ = model_factory("bf16-tok", BertForTokenClassification, bert_config(num_labels=5, initializer_range=0.2))
    policy = LongDocumentPolicy(mode=LongDocumentMode.CHUNKED, window_tokens=16)

    def run(dtype):
        engine = PoolingEngine.from_pretrained(str(path), dtype=dtype)
        (result,) = engine.run([PoolingRequest("doc", LONG, PoolingTask.TOKEN_CLASSIFY)], policy)
        return result

    bf16, fp32 = run("bfloat16"), run("float32")
    assert bf16.num_tokens > 3 * 16 and bf16.data.shape == (bf16.num_tokens, 5)  # several windows stitched
    assert bf16.data.dtype == np.float32
    np.testing.assert_allclose(bf16.data, fp32.data, atol=BF16_PROBABILITY_GATE)
