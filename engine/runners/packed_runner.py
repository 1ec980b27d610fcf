"""Runs a batch through a native packed encoder: the flat layout goes in as is, no padding."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from poolq.engine.batch import BatchMetadata


class PackedRunner:
    """Same interface as :class:`poolq.engine.runners.runner.ModelRunner`, without the pad/unpad round trip.

    ``BatchMetadata`` already is the packed layout (flat tokens, per-sequence position ids,
    ``cu_seqlens``), so the arrays go to the device unchanged and the encoder computes real
    tokens only. Unlike the padded runner, ``token_type_ids`` from the batch are honoured.
    """

    def __init__(self, encoder: nn.Module, device: torch.device) -> None:
        # A packed forward of engine/models (PackedBertEncoder, PackedDecoder, ...): all take the
        # flat layout as forward(input_ids, position_ids, cu_seqlens_cpu, max_seqlen, token_type_ids).
        self.encoder = encoder
        self.device = device

    @torch.inference_mode()
    def forward(self, batch: BatchMetadata) -> torch.Tensor:  # [num_tokens, hidden]
        """Last hidden state of every token, sequences back to back as in ``batch``."""
        cu_seqlens_cpu = torch.from_numpy(batch.cu_seqlens)  # [num_seqs + 1] int32, drives the CPU loop
        token_type_ids = None if batch.token_type_ids is None else self._to_device(batch.token_type_ids)
        return self.encoder(
            self._to_device(batch.input_ids),  # [num_tokens]
            self._to_device(batch.position_ids),  # [num_tokens]
            cu_seqlens_cpu,
            batch.max_seqlen,
            token_type_ids,  # [num_tokens] or None
            cu_seqlens_dev=self._to_device(batch.cu_seqlens),  # [num_seqs + 1]
        )

    def _to_device(self, array: np.ndarray) -> torch.Tensor:
        tensor_cpu = torch.from_numpy(np.ascontiguousarray(array))
        if self.device.type != "cuda":
            return tensor_cpu.to(self.device)
        # A pinned staging copy lets the H2D transfer run asynchronously; torch's caching host
        # allocator keeps the block alive until the copy has finished.
        return tensor_cpu.pin_memory().to(self.device, non_blocking=True)
