"""The body of ``POST /v1/embeddings``: OpenAI's fields (``model``, ``input``, ``dimensions``,
``encoding_format``, ``user``) and poolq's ``long_documents``, and the limits a request must keep.

``input`` comes in OpenAI's four shapes (a string, a list of strings, one token array, a list of
token arrays) and is read as one list of inputs; token ids are the model's own (no special
tokens), not OpenAI's tiktoken ids.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from fastapi import HTTPException, status
from fastapi.exceptions import RequestValidationError
from pydantic import ConfigDict, Field, PlainValidator, WithJsonSchema, field_validator

from poolq.engine.loading.registry import MAX_MODEL_NAME_CHARS
from poolq.jobs import LaneInput, LongDocuments, Settings, estimated_tokens
from poolq.jobs.lane.lane_messages import CHARS_PER_TOKEN
from poolq.jobs.spec.job_spec import PromptOptions

MAX_TOKEN_ID = 2**31 - 1  # any vocabulary fits; larger numbers are no token id of any model

_TOKEN_ARRAY = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": MAX_TOKEN_ID}, "minItems": 1}
_INPUT_SCHEMA = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        _TOKEN_ARRAY,
        {"type": "array", "items": _TOKEN_ARRAY, "minItems": 1},
    ],
    "description": "a text, a list of texts, one array of the model's token ids (no special tokens), or a list "
                   "of such arrays",
}
_SHAPES = "input must be a string, a list of strings, a list of token ids or a list of lists of token ids"


def _is_token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_ID


def _is_token_array(value: object) -> bool:
    return isinstance(value, list) and all(_is_token(token) for token in value)


def parse_inputs(value: object) -> list[str] | list[list[int]]:
    """OpenAI's four shapes of ``input`` as one list of inputs (texts, or token arrays); a
    ValueError naming the first item that fits none of them."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not value:
        raise ValueError(f"{_SHAPES}, with at least one input")
    if all(isinstance(item, str) for item in value):
        return value
    if all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        bad = next((i for i, token in enumerate(value) if not _is_token(token)), None)
        if bad is not None:
            raise ValueError(f"input[{bad}] = {value[bad]} is not a token id (0..{MAX_TOKEN_ID})")
        return [value]
    if all(isinstance(item, list) for item in value):
        bad = next((i for i, item in enumerate(value) if not _is_token_array(item)), None)
        if bad is not None:
            raise ValueError(f"input[{bad}] is not a list of token ids (integers 0..{MAX_TOKEN_ID})")
        return value
    first = "a string" if isinstance(value[0], str) else "a token array" if isinstance(value[0], list) else "a token id"
    raise ValueError(f"{_SHAPES}; this list starts with {first} but does not hold only such items")


EmbeddingInputs = Annotated[list[str] | list[list[int]], PlainValidator(parse_inputs), WithJsonSchema(_INPUT_SCHEMA)]


class EmbeddingsBody(PromptOptions):
    """OpenAI's embeddings request, with poolq's ``long_documents`` beside it (the openai client's ``extra_body``)."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(min_length=1, max_length=MAX_MODEL_NAME_CHARS,
                       description="a model the server serves (as in jobs: a name or an allowed Hub id; GET /v1/models)")
    input: EmbeddingInputs
    dimensions: int | None = Field(None, ge=1, description="Matryoshka: keep the first N dimensions (as a job's "
                                                          "output.dimensions)")
    encoding_format: Literal["float", "base64"] = Field("float", description="base64: little-endian float32 bytes")
    user: str | None = Field(None, description="accepted and ignored")
    long_documents: LongDocuments = Field(
        default_factory=LongDocuments, description="inputs longer than the model's window, as in a job (use the "
        "corpus job's, so queries are cut as its documents were); one vector per input: error, truncate or chunked")

    @field_validator("long_documents")
    @classmethod
    def _one_vector_per_input(cls, value: LongDocuments) -> LongDocuments:
        return value.one_vector_per_input("this endpoint")


def check_limits(inputs: Sequence[LaneInput], settings: Settings, prompt: str = "") -> None:
    """Empty inputs and inputs too long alone: 400 naming the input; too many inputs or too many
    tokens in all: 413. ``prompt``: the text put before every input, whose tokens each input costs too."""
    if len(inputs) > settings.lane.embeddings_max_inputs:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE,
                            f"{len(inputs)} inputs; at most {settings.lane.embeddings_max_inputs} per request")
    budget = settings.embeddings_request_tokens
    prompt_tokens = int(len(prompt) / CHARS_PER_TOKEN)
    with_prompt = f" with its prompt of about {prompt_tokens} tokens" if prompt_tokens else ""
    problems, total = [], 0
    for index, item in enumerate(inputs):
        tokens = estimated_tokens(item) + prompt_tokens
        total += tokens
        if not item:
            problems.append(_problem(index, "empty_input", f"input {index} is empty"))
        elif tokens > budget:
            size = f"{len(item)} token ids" if isinstance(item, list) else f"{len(item)} characters"
            problems.append(_problem(index, "input_too_long", f"input {index} has {size} (about {tokens} tokens"
                                     f"{with_prompt}); a request holds at most about {budget} tokens (embed long "
                                     "documents with a job: POST /v1/jobs)"))
    if problems:
        raise RequestValidationError(problems)
    if total > budget:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE,
                            f"the inputs come to about {total} tokens{with_prompt.replace('its', 'their')}; at most "
                            f"about {budget} per request (send fewer inputs per request, or embed them with a job: "
                            "POST /v1/jobs)")


def _problem(index: int, kind: str, message: str) -> dict:
    return {"loc": ("body", "input", index), "type": kind, "msg": message}
