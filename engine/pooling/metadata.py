"""What one pooler sees of a batch: spans of its sequences in the flat token layout."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from poolq.engine.batch import BatchMetadata
from poolq.engine.request import PoolingParams


@dataclass(frozen=True)
class PoolingMetadata:
    """The sequences of one task group in a batch.

    ``starts_cpu``/``ends_cpu`` index the batch's flat token layout; ``input_ids`` is that
    layout's token ids on the hidden states' device (STEP and SPLADE need them).
    """

    starts_cpu: torch.Tensor  # [num_seqs] int64
    ends_cpu: torch.Tensor  # [num_seqs] int64
    input_ids: torch.Tensor  # [num_tokens] int64
    params: tuple[PoolingParams, ...]

    @classmethod
    def for_rows(
        cls, batch: BatchMetadata, rows: list[int], params: list[PoolingParams], device: torch.device
    ) -> "PoolingMetadata":
        """Metadata for the batch sequences at positions ``rows`` (in that order)."""
        cu_seqlens_cpu = torch.from_numpy(batch.cu_seqlens).long()  # [num_seqs_in_batch + 1]
        rows_cpu = torch.tensor(rows, dtype=torch.long)
        return cls(
            starts_cpu=cu_seqlens_cpu[rows_cpu],
            ends_cpu=cu_seqlens_cpu[rows_cpu + 1],
            input_ids=torch.from_numpy(batch.input_ids).to(device),
            params=tuple(params),
        )

    @property
    def num_seqs(self) -> int:
        return len(self.starts_cpu)

    def spans(self) -> list[tuple[int, int]]:
        return list(zip(self.starts_cpu.tolist(), self.ends_cpu.tolist()))
