"""``/v1/embeddings`` in a batch: OpenAI's request body, one record per input string.

A line answers as ``/v1/embeddings`` does with the same body. The batch's job computes each input's
vector once, at the model's full size, and each line cuts its own: to its ``dimensions``, L2-normalized
again on a normalizing model (a job's ``output.dimensions``), or, naming none, to the model's
``truncate_dim`` as sentence-transformers' ``encode`` cuts (not normalized again). A model without
``truncate_dim`` has its full size as the job's default, so its batch jobs name no dimensions."""
from __future__ import annotations

import base64
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from poolq.engine import ModelSpec
from poolq.jobs.tasks.embed_task import model_output_dimensions
from poolq.products.batches.formats.endpoint_format import (
    EndpointFormat,
    ModelOutput,
    NonEmptyText,
    ParsedRequest,
    PoolqExtension,
    RecordResult,
    RequestProblem,
    usage,
    validate_body,
)

MAX_INPUTS = 2048  # OpenAI's limit of inputs per embeddings request
DEFAULT_DIMENSIONS = "default_dimensions"  # a request's option: the model's truncate_dim, its size when it names none


class EmbeddingsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    input: NonEmptyText | Annotated[list[NonEmptyText], Field(min_length=1, max_length=MAX_INPUTS)]
    dimensions: int | None = Field(None, ge=1)
    encoding_format: Literal["float", "base64"] = "float"
    user: str | None = None  # accepted and ignored, as by OpenAI-compatible servers
    poolq: PoolqExtension = Field(default_factory=PoolqExtension)


class EmbeddingsFormat(EndpointFormat):
    task = "embed"
    value_column = "embedding"

    def parse(self, body: object) -> ParsedRequest:
        if isinstance(body, dict) and isinstance(body.get("input"), list) and body["input"] \
                and not isinstance(body["input"][0], str):
            raise RequestProblem("invalid_input", "body.input: token-id inputs are not supported here; send text",
                                 "body.input")
        parsed = validate_body(EmbeddingsBody, body)
        texts = [parsed.input] if isinstance(parsed.input, str) else parsed.input
        return ParsedRequest(parsed.model, [{"text": text} for text in texts],
                             {"dimensions": parsed.dimensions, "encoding_format": parsed.encoding_format}, parsed.poolq)

    def model_output(self, model_spec: ModelSpec) -> ModelOutput:
        """A model with a ``truncate_dim``: its full vectors (a line may ask up to them), and that size for lines
        naming none. Its output is known loadable: the batch's lines were checked against it."""
        full = model_output_dimensions(model_spec)
        if model_spec.truncate_dim is None or model_spec.truncate_dim >= full:
            return ModelOutput()
        return ModelOutput(dimensions=full, options={DEFAULT_DIMENSIONS: model_spec.truncate_dim})

    def respond(self, request: dict, results: list[RecordResult], model: str, request_id: str) -> dict:
        data = [{"object": "embedding", "index": result.index,
                 "embedding": _encoded(_sized(np.asarray(result.value, dtype=np.float32), request.get("dimensions"),
                                              request.get(DEFAULT_DIMENSIONS)),
                                       request.get("encoding_format", "float"))}
                for result in results]
        return {"object": "list", "data": data, "model": model, "usage": usage(results)}


def _sized(vector: np.ndarray, dimensions: int | None, default: int | None = None) -> np.ndarray:
    """The first ``dimensions`` components, L2-normalized again when the whole vector was (Matryoshka);
    naming none, the first ``default`` (the model's truncate_dim), as they are (sentence-transformers' cut)."""
    if dimensions is None:
        return vector if default is None else vector[:default]
    if dimensions == len(vector):
        return vector
    if dimensions > len(vector):
        raise RequestProblem("invalid_dimensions", f"body.dimensions: {dimensions} is more than the model's "
                             f"{len(vector)} dimensions", "body.dimensions")
    kept = vector[:dimensions]
    if abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3:
        kept = kept / max(float(np.linalg.norm(kept)), 1e-12)
    return kept


def _encoded(vector: np.ndarray, encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":  # OpenAI's: little-endian float32 bytes
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.astype(np.float32).tolist()
