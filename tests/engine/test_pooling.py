import torch

from engine.model_spec import PoolingType
from engine.pooling import EmbeddingHead, Pooler, pooling_method

HIDDEN = torch.arange(6 * 4, dtype=torch.float32).reshape(6, 4)  # [num_tokens, hidden]
CU_SEQLENS = torch.tensor([0, 3, 4, 6], dtype=torch.int32)


def test_mean_is_the_mean_of_each_segment():
    pooled = pooling_method(PoolingType.MEAN).forward(HIDDEN, CU_SEQLENS)
    expected = torch.stack([HIDDEN[0:3].mean(0), HIDDEN[3:4].mean(0), HIDDEN[4:6].mean(0)])
    torch.testing.assert_close(pooled, expected)


def test_mean_accumulates_in_fp32_for_half_inputs():
    hidden = torch.full((4096, 2), 0.1, dtype=torch.bfloat16)
    pooled = pooling_method(PoolingType.MEAN).forward(hidden, torch.tensor([0, 4096], dtype=torch.int32))
    assert pooled.dtype == torch.float32
    torch.testing.assert_close(pooled, torch.full((1, 2), float(torch.tensor(0.1, dtype=torch.bfloat16))))


def test_cls_and_last_pick_the_segment_ends():
    cls = pooling_method(PoolingType.CLS).forward(HIDDEN, CU_SEQLENS)
    last = pooling_method(PoolingType.LAST).forward(HIDDEN, CU_SEQLENS)
    torch.testing.assert_close(cls, HIDDEN[[0, 3, 4]])
    torch.testing.assert_close(last, HIDDEN[[2, 3, 5]])


def test_pooler_normalizes_when_asked():
    normalized = Pooler(pooling_method(PoolingType.MEAN), EmbeddingHead(normalize=True)).forward(HIDDEN, CU_SEQLENS)
    raw = Pooler(pooling_method(PoolingType.MEAN), EmbeddingHead(normalize=False)).forward(HIDDEN, CU_SEQLENS)
    torch.testing.assert_close(normalized.norm(dim=1), torch.ones(3))
    torch.testing.assert_close(normalized, raw / raw.norm(dim=1, keepdim=True))
