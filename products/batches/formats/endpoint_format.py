"""What a batch endpoint is to poolq: how one request body becomes job records, and how the
records' results become the response body. One implementation per endpoint, routed by its URL."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, field_validator

from poolq.engine import ModelSpec
from poolq.jobs.spec.job_spec import LongDocuments, PromptOptions

NonEmptyText = Annotated[str, StringConstraints(min_length=1)]


class RequestProblem(ValueError):
    """A request that cannot be served: its error line's code, message and field (``param``)."""

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code, self.param = code, param


class PoolqExtension(PromptOptions):
    """``body.poolq``: poolq's own options on a request (the same on every line of a batch)."""

    model_config = ConfigDict(extra="forbid")
    long_documents: LongDocuments = Field(default_factory=LongDocuments)

    @field_validator("long_documents")
    @classmethod
    def _one_result_per_input(cls, value: LongDocuments) -> LongDocuments:
        return value.one_vector_per_input("a batch response")


@dataclass(frozen=True)
class ParsedRequest:
    model: str
    records: list[dict]  # the job records' fields (text; query for pairs), one per result
    options: dict = field(default_factory=dict)  # what the response needs besides the results
    extension: PoolqExtension = field(default_factory=PoolqExtension)


@dataclass(frozen=True)
class RecordResult:
    """One record's result as its part row holds it."""

    index: int  # the record's position in its request
    value: Any  # the task's value column (an embedding: a list of floats; a score: a float)
    num_tokens: int
    fields: dict  # the carried fields the format asked for (``included_fields``)


@dataclass(frozen=True)
class ModelOutput:
    """What a batch's job computes for its model where that differs from a job's default, and what each
    request's response then needs to know of the model (merged into its options)."""

    dimensions: int | None = None  # the job's output.dimensions; None: the job's default
    options: dict = field(default_factory=dict)


class EndpointFormat(ABC):
    task: str  # the poolq task the endpoint runs
    value_column: str  # the part column holding each record's result
    included_fields: tuple[str, ...] = ()  # record fields the response needs back (beyond the result)

    @abstractmethod
    def parse(self, body: object) -> ParsedRequest:
        """The request body's records and options; ``RequestProblem`` naming what is wrong."""

    def model_output(self, model_spec: ModelSpec) -> ModelOutput:
        """What the batch's job computes on ``model_spec`` for this endpoint's responses: the job's default."""
        return ModelOutput()

    @abstractmethod
    def respond(self, request: dict, results: list[RecordResult], model: str, request_id: str) -> dict:
        """The response body for one request (``request``: its options); ``RequestProblem`` if none can be made."""


Body = TypeVar("Body", bound=BaseModel)


def validate_body(model: type[Body], body: object) -> Body:
    """``body`` as ``model``; a ``RequestProblem`` naming the first wrong field (``body.input``)."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        where, message = first_problem(exc)
        where = ".".join(part for part in ("body", where) if part)
        raise RequestProblem("invalid_request", f"{where}: {message}", where) from None


def first_problem(exc: ValidationError) -> tuple[str, str]:
    """The field path and message of the error that says most: for a value of one type in a union
    of several (``input``: a string or a list), the error of its own type's branch, not the others'
    "should be a valid string"; union tags (``list[constrained-str]``) are left out of the path."""
    errors = exc.errors()
    error = next((e for e in errors if not e["type"].endswith("_type")), errors[0])
    path = ".".join(str(part) for part in error["loc"] if isinstance(part, int) or part.isidentifier())
    return path, error["msg"]


def usage(results: list[RecordResult]) -> dict:
    tokens = sum(result.num_tokens for result in results)
    return {"prompt_tokens": tokens, "total_tokens": tokens}
