"""Pooling methods and heads on hand-made flat layouts."""
import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from poolq.engine.batch import BatchMetadata
from poolq.engine.model_spec import ModelSpecError, PoolingType
from poolq.engine.pooling import AllPool, PoolingMetadata, StepPool, methods, pooling_method
from poolq.engine.pooling.heads.activation import Softmax, resolve_activation
from poolq.engine.pooling.heads.classifier_heads import Calibration, ClassifierHead, TokenClassifierHead
from poolq.engine.pooling.heads.task_heads import EmbeddingHead, TokenEmbeddingHead
from poolq.engine.request import PoolingParams

HIDDEN = torch.arange(6 * 4, dtype=torch.float32).reshape(6, 4)  # [num_tokens, hidden]
BATCH = BatchMetadata.from_sequences([0, 1, 2], [[101, 7, 102], [101], [5, 102]])


@pytest.fixture(autouse=True)
def _inference_mode():
    # The engine runs heads under inference mode (Pooler.forward); direct head calls do the same.
    with torch.inference_mode():
        yield


def meta(rows=(0, 1, 2), params=None):
    rows = list(rows)
    return PoolingMetadata.for_rows(BATCH, rows, params or [PoolingParams()] * len(rows), torch.device("cpu"))


def test_mean_cls_last_over_segments():
    expected_mean = torch.stack([HIDDEN[0:3].mean(0), HIDDEN[3:4].mean(0), HIDDEN[4:6].mean(0)])
    torch.testing.assert_close(pooling_method(PoolingType.MEAN).forward(HIDDEN, meta()), expected_mean)
    torch.testing.assert_close(pooling_method(PoolingType.CLS).forward(HIDDEN, meta()), HIDDEN[[0, 3, 4]])
    torch.testing.assert_close(pooling_method(PoolingType.LAST).forward(HIDDEN, meta()), HIDDEN[[2, 3, 5]])


def test_methods_pool_only_the_rows_they_are_given():
    pooled = pooling_method(PoolingType.MEAN).forward(HIDDEN, meta(rows=[2, 0]))
    torch.testing.assert_close(pooled, torch.stack([HIDDEN[4:6].mean(0), HIDDEN[0:3].mean(0)]))


def test_mean_accumulates_in_fp32_for_half_inputs():
    hidden = torch.full((4096, 2), 0.1, dtype=torch.bfloat16)
    batch = BatchMetadata.from_sequences([0], [[1] * 4096])
    m = PoolingMetadata.for_rows(batch, [0], [PoolingParams()], torch.device("cpu"))
    pooled = pooling_method(PoolingType.MEAN).forward(hidden, m)
    assert pooled.dtype == torch.float32
    torch.testing.assert_close(pooled, torch.full((1, 2), float(torch.tensor(0.1, dtype=torch.bfloat16))))


class _SumCalls(TorchFunctionMode):
    """Counts sums (``torch.sum``, ``Tensor.sum``) made in the mode."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += func in (torch.sum, torch.Tensor.sum)
        return func(*args, **(kwargs or {}))


def _per_span_means(hidden, m):  # the old CPU MeanPool: one fp32 sum per span
    out = torch.empty(m.num_seqs, hidden.shape[1], dtype=torch.float32)
    for row, (start, end) in enumerate(m.spans()):
        torch.sum(hidden[start:end], dim=0, dtype=torch.float32, out=out[row])
        out[row].div_(max(end - start, 1))
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "lengths, rows",
    [([64] * 6, range(6)),  # equal and back to back: one view
     ([7] * 6, [4, 1, 2]),  # equal, some rows out of order: gathered
     ([5, 3, 5, 2, 3, 5], range(6))],  # ragged: one sum per length
)
def test_cpu_mean_sums_each_length_once_bit_identical_to_a_sum_per_span(dtype, lengths, rows):
    torch.manual_seed(0)
    batch = BatchMetadata.from_sequences(list(range(len(lengths))), [[1] * n for n in lengths])
    hidden = torch.randn(sum(lengths), 16).to(dtype)
    m = PoolingMetadata.for_rows(batch, list(rows), [PoolingParams()] * len(rows), torch.device("cpu"))
    with _SumCalls() as sums:
        pooled = pooling_method(PoolingType.MEAN).forward(hidden, m)
    assert torch.equal(pooled, _per_span_means(hidden, m))
    assert sums.calls == len({lengths[row] for row in rows})


def test_cpu_mean_blocks_bound_the_widened_values(monkeypatch):
    monkeypatch.setattr(methods, "_WIDE_VALUES", 2 * 3 * 16)  # two spans of 3 tokens a block
    torch.manual_seed(0)
    batch = BatchMetadata.from_sequences(list(range(5)), [[1] * 3] * 5)
    hidden = torch.randn(15, 16).to(torch.bfloat16)
    m = PoolingMetadata.for_rows(batch, [0, 1, 2, 4, 3], [PoolingParams()] * 5, torch.device("cpu"))
    with _SumCalls() as sums:
        pooled = pooling_method(PoolingType.MEAN).forward(hidden, m)
    assert torch.equal(pooled, _per_span_means(hidden, m))
    assert sums.calls == 3


def test_all_and_step_return_token_states():
    states = AllPool().forward(HIDDEN, meta())
    assert [s.shape[0] for s in states] == [3, 1, 2]
    step = StepPool().forward(HIDDEN, meta(params=[PoolingParams(step_tag_id=102)] * 3))
    torch.testing.assert_close(step[0], HIDDEN[[2]])
    assert step[1].shape[0] == 0
    torch.testing.assert_close(step[2], HIDDEN[[5]])


def test_embedding_head_applies_projector_dimensions_and_normalize_per_request():
    projector = torch.nn.Linear(4, 3, bias=False)
    head = EmbeddingHead(projector, normalize=True)
    pooled = HIDDEN[:2]
    outs = head.forward(pooled, (PoolingParams(), PoolingParams(dimensions=2, normalize=False)))
    projected = projector(pooled).detach()
    np.testing.assert_allclose(outs[0], (projected[0] / projected[0].norm()).numpy(), rtol=1e-6)
    np.testing.assert_allclose(outs[1], projected[1, :2].numpy(), rtol=1e-6)


def test_matryoshka_truncates_before_normalizing():
    (out,) = EmbeddingHead(None, normalize=True).forward(HIDDEN[1:2], (PoolingParams(dimensions=2),))
    np.testing.assert_allclose(out, (HIDDEN[1, :2] / HIDDEN[1, :2].norm()).numpy(), rtol=1e-6)
    assert np.linalg.norm(out) == pytest.approx(1.0)


def test_token_embedding_head_normalizes_each_token():
    (out,) = TokenEmbeddingHead(None, normalize=True).forward([HIDDEN[:3]], (PoolingParams(),))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)


def test_classifier_head_calibrates_then_activates():
    classifier = torch.nn.Linear(4, 3)
    head = ClassifierHead(classifier, Softmax(), Calibration(logit_mean=1.0, logit_sigma=2.0))
    probs, logits = head.forward(HIDDEN[:2], (PoolingParams(), PoolingParams(activation=False)))
    raw = (classifier(HIDDEN[:2]).detach() - 1.0) / 2.0
    np.testing.assert_allclose(probs, torch.softmax(raw[0], -1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(logits, raw[1].numpy(), rtol=1e-6)


def test_token_classifier_head_keeps_returned_token_ids():
    classifier = torch.nn.Linear(4, 5)
    head = TokenClassifierHead(classifier, Softmax(), None)
    (out,) = head.forward([HIDDEN[:3]], (PoolingParams(returned_token_ids=(4, 1)),))
    expected = torch.softmax(classifier(HIDDEN[:3]).detach(), -1)[:, [4, 1]]
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize(
    "problem_type, st_fn, labels, expected",
    [
        ("regression", None, 1, torch.nn.Identity),
        ("single_label_classification", None, 1, Softmax),
        ("multi_label_classification", None, 3, torch.nn.Sigmoid),
        (None, "torch.nn.modules.activation.Tanh", 1, torch.nn.Tanh),
        (None, None, 1, torch.nn.Sigmoid),
        (None, None, 4, Softmax),
    ],
)
def test_activation_resolution_order(problem_type, st_fn, labels, expected):
    assert isinstance(resolve_activation(problem_type, st_fn, labels), expected)


def test_activation_from_outside_torch_nn_is_refused():
    with pytest.raises(ModelSpecError, match="only torch.nn.modules"):
        resolve_activation(None, "os.system", 1)
