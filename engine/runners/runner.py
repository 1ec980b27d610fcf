"""Runs a batch through the model and returns token states in the flat layout."""
from __future__ import annotations

import numpy as np
import torch

from poolq.engine.batch import BatchMetadata

# The dtype weights load in; int8's are float32 until the encoder is quantized (models/int8_encoder.py).
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.float32}


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


# How much padding one padded forward may carry: a group of sequences is cut where its pad tokens
# would pass this share of its padded cells, or this many tokens, whichever allows more. Padding
# costs as much compute as real tokens, so one long document batched with short texts would
# otherwise run every short text at the long one's length (3 sequences of 1,500 + 6 + 6 tokens:
# 3.7x the work); the absolute allowance keeps batches of short texts in one forward.
MAX_PAD_SHARE = 0.25
FREE_PAD_TOKENS = 512


def padded_groups(seq_lens: np.ndarray) -> list[np.ndarray]:
    """Sequence indices grouped for padded forwards, longest first; each group pads little."""
    order = np.argsort(-seq_lens, kind="stable")
    groups: list[np.ndarray] = []
    start = 0
    while start < len(order):
        longest, real, end = int(seq_lens[order[start]]), 0, start
        while end < len(order):
            padded = (end - start + 1) * longest
            if end > start and padded - (real + int(seq_lens[order[end]])) > max(MAX_PAD_SHARE * padded, FREE_PAD_TOKENS):
                break
            real += int(seq_lens[order[end]])
            end += 1
        groups.append(order[start:end])
        start = end
    return groups


class ModelRunner:
    """The generic transformers path: pad the batch (right padding), run, unpad.

    A batch runs as one or more padded forwards (``padded_groups``), so a long sequence does not
    make every short one of its batch pay its length. The output is always the flat layout
    ``[num_tokens, hidden]`` that pooling consumes, in the batch's order.
    """

    def __init__(self, model: torch.nn.Module, device: torch.device, pad_token_id: int) -> None:
        self.model = model
        self.device = device
        self.pad_token_id = pad_token_id
        # BERT-family encoders take segment ids; decoders reject the argument.
        self.uses_token_type_ids = getattr(model.config, "type_vocab_size", 0) > 0

    @torch.inference_mode()
    def forward(self, batch: BatchMetadata) -> torch.Tensor:  # [num_tokens, hidden]
        groups = padded_groups(batch.seq_lens)
        if len(groups) == 1:  # one forward, in the batch's own order
            return self._padded_forward(batch, np.arange(batch.num_seqs))
        token_positions = np.arange(batch.num_tokens)

        def place(group: np.ndarray, hidden: torch.Tensor) -> None:
            """A group's tokens go back to where they sit in the batch's flat layout."""
            out[torch.from_numpy(_gather(token_positions, batch.cu_seqlens, group)).to(out.device)] = hidden

        first, *rest = groups
        hidden = self._padded_forward(batch, first)  # [group tokens, hidden]: it sizes the output
        out = hidden.new_empty(batch.num_tokens, hidden.shape[1])
        place(first, hidden)
        for group in rest:  # one group's states held at a time
            place(group, self._padded_forward(batch, group))
        return out

    def _padded_forward(self, batch: BatchMetadata, group: np.ndarray) -> torch.Tensor:  # [group tokens, hidden]
        """One padded forward over the batch's sequences ``group``; their real tokens, in group order."""
        seq_lens_cpu = torch.from_numpy(batch.seq_lens[group]).long()  # [num_seqs]
        max_len = int(seq_lens_cpu.max())
        # [num_seqs, max_len] boolean mask of real tokens; row-major order matches the group's flat layout.
        token_mask_cpu = torch.arange(max_len).unsqueeze(0) < seq_lens_cpu.unsqueeze(1)
        input_ids_cpu = torch.full((len(group), max_len), self.pad_token_id, dtype=torch.long)
        input_ids_cpu[token_mask_cpu] = torch.from_numpy(_gather(batch.input_ids, batch.cu_seqlens, group))
        inputs = {
            "input_ids": input_ids_cpu.to(self.device),
            "attention_mask": token_mask_cpu.long().to(self.device),
        }
        if self.uses_token_type_ids:
            token_type_ids_cpu = torch.zeros_like(input_ids_cpu)  # [num_seqs, max_len]
            if batch.token_type_ids is not None:
                token_type_ids_cpu[token_mask_cpu] = torch.from_numpy(
                    _gather(batch.token_type_ids, batch.cu_seqlens, group))
            inputs["token_type_ids"] = token_type_ids_cpu.to(self.device)
        outputs = self.model(**inputs)
        hidden = outputs.last_hidden_state  # [num_seqs, max_len, hidden]
        return hidden[token_mask_cpu.to(self.device)]  # [group tokens, hidden]


def _gather(flat: np.ndarray, cu_seqlens: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The tokens of sequences ``group`` of a flat array, back to back in group order."""
    return np.concatenate([flat[cu_seqlens[i]:cu_seqlens[i + 1]] for i in group])
