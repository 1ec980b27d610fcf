"""Runs a batch through the model and returns token states in the flat layout."""
from __future__ import annotations

import torch

from poolq.engine.batch import BatchMetadata

# The dtype weights load in; int8's are float32 until the encoder is quantized (models/int8_encoder.py).
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.float32}


def torch_dtype(name: str) -> torch.dtype:
    return _DTYPES[name]


class ModelRunner:
    """The generic transformers path: pad the batch (right padding), run, unpad.

    Inputs arrive length-sorted from the scheduler, so padding waste stays small. The output
    is always the flat layout ``[num_tokens, hidden]`` that pooling consumes.
    """

    def __init__(self, model: torch.nn.Module, device: torch.device, pad_token_id: int) -> None:
        self.model = model
        self.device = device
        self.pad_token_id = pad_token_id
        # BERT-family encoders take segment ids; decoders reject the argument.
        self.uses_token_type_ids = getattr(model.config, "type_vocab_size", 0) > 0

    @torch.inference_mode()
    def forward(self, batch: BatchMetadata) -> torch.Tensor:  # [num_tokens, hidden]
        seq_lens_cpu = torch.from_numpy(batch.seq_lens).long()  # [num_seqs]
        max_len = batch.max_seqlen
        # [num_seqs, max_len] boolean mask of real tokens; row-major order matches the flat layout.
        token_mask_cpu = torch.arange(max_len).unsqueeze(0) < seq_lens_cpu.unsqueeze(1)
        input_ids_cpu = torch.full((batch.num_seqs, max_len), self.pad_token_id, dtype=torch.long)
        input_ids_cpu[token_mask_cpu] = torch.from_numpy(batch.input_ids)
        inputs = {
            "input_ids": input_ids_cpu.to(self.device),
            "attention_mask": token_mask_cpu.long().to(self.device),
        }
        if self.uses_token_type_ids:
            token_type_ids_cpu = torch.zeros_like(input_ids_cpu)  # [num_seqs, max_len]
            if batch.token_type_ids is not None:
                token_type_ids_cpu[token_mask_cpu] = torch.from_numpy(batch.token_type_ids)
            inputs["token_type_ids"] = token_type_ids_cpu.to(self.device)
        outputs = self.model(**inputs)
        hidden = outputs.last_hidden_state  # [num_seqs, max_len, hidden]
        return hidden[token_mask_cpu.to(self.device)]  # [num_tokens, hidden]
