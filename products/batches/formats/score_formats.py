"""vLLM's ``/v1/score`` and ``/v1/rerank`` in a batch: one record per (query, text) pair, scored
by the job's score task (a cross-encoder where the model is one, else cosine or MaxSim)."""
from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from poolq.products.batches.formats.endpoint_format import (
    EndpointFormat,
    NonEmptyText,
    ParsedRequest,
    PoolqExtension,
    RecordResult,
    RequestProblem,
    usage,
    validate_body,
)

Texts = NonEmptyText | Annotated[list[NonEmptyText], Field(min_length=1, max_length=10_000)]


class ScoreBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    text_1: Texts
    text_2: Texts
    user: str | None = None
    poolq: PoolqExtension = Field(default_factory=PoolqExtension)


class RerankBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    query: NonEmptyText
    documents: Annotated[list[NonEmptyText], Field(min_length=1, max_length=10_000)]
    top_n: int = Field(0, ge=0, description="the best N documents; 0: all of them")
    return_documents: bool = True
    user: str | None = None
    poolq: PoolqExtension = Field(default_factory=PoolqExtension)


class ScoreFormat(EndpointFormat):
    task = "score"
    value_column = "score"

    def parse(self, body: object) -> ParsedRequest:
        parsed = validate_body(ScoreBody, body)
        firsts = [parsed.text_1] if isinstance(parsed.text_1, str) else parsed.text_1
        seconds = [parsed.text_2] if isinstance(parsed.text_2, str) else parsed.text_2
        if len(firsts) == 1:
            firsts = firsts * len(seconds)
        if len(firsts) != len(seconds):
            raise RequestProblem("invalid_request", f"body.text_1 has {len(firsts)} texts and body.text_2 "
                                 f"{len(seconds)}: give one text_1, or as many as text_2", "body.text_1")
        return ParsedRequest(parsed.model, [{"query": first, "text": second} for first, second in zip(firsts, seconds)],
                             {}, parsed.poolq)

    def respond(self, request: dict, results: list[RecordResult], model: str, request_id: str) -> dict:
        data = [{"index": result.index, "object": "score", "score": float(result.value)} for result in results]
        return {"id": request_id, "object": "list", "model": model, "data": data, "usage": usage(results)}


class RerankFormat(EndpointFormat):
    task = "score"
    value_column = "score"
    included_fields = ("text",)  # the documents come back in the results

    def parse(self, body: object) -> ParsedRequest:
        parsed = validate_body(RerankBody, body)
        records = [{"query": parsed.query, "text": document} for document in parsed.documents]
        return ParsedRequest(parsed.model, records, {"top_n": parsed.top_n, "return_documents": parsed.return_documents},
                             parsed.poolq)

    def respond(self, request: dict, results: list[RecordResult], model: str, request_id: str) -> dict:
        ranked = sorted(results, key=lambda result: (-float(result.value), result.index))
        if request.get("top_n"):
            ranked = ranked[: request["top_n"]]
        entries = []
        for result in ranked:
            entry: dict = {"index": result.index, "relevance_score": float(result.value)}
            if request.get("return_documents", True):
                entry["document"] = {"text": result.fields.get("text")}
            entries.append(entry)
        return {"id": request_id, "model": model, "usage": {"total_tokens": usage(results)["total_tokens"]},
                "results": entries}
