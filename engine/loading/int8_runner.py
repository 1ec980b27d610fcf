"""dtype int8 at load time: the packed encoder quantized and measured, or the model refused."""
from __future__ import annotations

import logging

import torch

from poolq.engine.batch import BatchMetadata
from poolq.engine.models.int8_encoder import Int8Refused, quantize_encoder
from poolq.engine.models.packed_bert import PackedBertEncoder
from poolq.engine.request import TruncationSide
from poolq.engine.runners.packed_runner import PackedRunner
from poolq.engine.tokenizer import TextTokenizer

log = logging.getLogger(__name__)


def quantize_runner(runner: object, tokenizer: TextTokenizer, window_tokens: int) -> float:
    """Quantize ``runner``'s encoder in place; the lowest cosine of int8 vs float32 it measured.
    ``Int8Refused`` for a model without the packed forward, or one int8 would serve worse."""
    # int8_encoder quantizes PackedBertEncoder's layers; the other packed families have no int8 path
    if not isinstance(runner, PackedRunner) or not isinstance(runner.encoder, PackedBertEncoder):
        raise Int8Refused("dtype int8 is available for BERT-family encoders (the packed forward); use float32 or "
                          "bfloat16 for this model")

    def forward(texts: list[str]) -> list[torch.Tensor]:
        ids = [tokenizer.finish(content, window_tokens, TruncationSide.END).token_ids
               for content in tokenizer.count_and_tokenize(texts)]
        batch = BatchMetadata.from_sequences(range(len(ids)), ids)
        states = runner.forward(batch)  # [num_tokens, hidden]
        return list(torch.split(states, [len(seq) for seq in ids]))

    lowest = quantize_encoder(runner.encoder, forward)
    log.info("int8 encoder: cosine to float32 >= %.4f on the held-out calibration passages", lowest)
    return lowest
