"""The answer of ``POST /v1/embeddings`` in OpenAI's shape: ``{"object": "list", "data": [...],
"model", "usage"}``; a vector is a list of floats, or (``base64``) its little-endian float32 bytes."""
from __future__ import annotations

import base64
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from poolq.jobs import EmbeddingReply


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int = Field(description="the input's position in the request")
    embedding: list[float] | str = Field(description="the vector; with encoding_format=base64, its little-endian "
                                                     "float32 bytes in base64")


class EmbeddingUsage(BaseModel):
    prompt_tokens: int = Field(description="tokens the model ran (special tokens included), as a job's usage")
    total_tokens: int


class EmbeddingList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage


def embedding_list(reply: EmbeddingReply, model: str, encoding_format: str) -> dict:
    """The response body (a plain dict: a large answer is encoded once, not validated again)."""
    data = [{"object": "embedding", "index": index, "embedding": encoded(vector, encoding_format)}
            for index, vector in enumerate(reply.vectors())]
    tokens = reply.prompt_tokens
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def encoded(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":  # OpenAI's: little-endian float32 bytes
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.astype(np.float32).tolist()
