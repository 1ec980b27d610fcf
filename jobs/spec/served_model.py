"""A served model as ``GET /v1/models`` describes it: OpenAI's model object plus poolq's fields. Shared by
the server (jobs/served_models.py), the Python client and the CLI."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ServedModel(BaseModel):
    """One model, in OpenAI's shape (``id``, ``object``, ``created``, ``owned_by``) plus poolq's fields."""

    id: str
    object: Literal["model"] = "model"
    created: int = Field(0, description="unix time of the model's files on this host (0: unknown)")
    owned_by: str = Field(description="the Hub organization, or poolq for packaged and configured models")
    tasks: list[str] = Field(description="the tasks a job (or /v1/embeddings, for embed) may ask of it")
    dimensions: int = Field(description="size of its embed vectors when a request names no dimensions: after any Dense "
                                        "module, cut to its truncate_dim (sentence-transformers' get_embedding_dimension); "
                                        "hidden size otherwise")
    max_dimensions: int | None = Field(None, description="size of its embed vectors uncut: the most a request's dimensions "
                                                         "may name (null from a server before this field)")
    truncate_dim: int | None = Field(None, description="the size its embed vectors are cut to when a request names no "
                                                       "dimensions (sentence-transformers' truncate_dim); null: no cut")
    matryoshka_dimensions: list[int] | None = Field(None, description="the Matryoshka sizes it declares, largest first: "
                                                    "its truncate_dim and those its model card's loss was trained for")
    window: int = Field(description="tokens per model sequence by default (longer documents: long_documents)")
    pooling: str
    normalized: bool
    prompts: dict[str, str] = Field(default_factory=dict, description="its named prompts (prompt_name)")
    default_prompt_name: str | None = None
    loaded: bool = Field(description="a live compute worker has it loaded now (no load wait)")
    loaded_workers: int = Field(0, description="live compute workers holding it loaded now")
    resident_bytes: int = Field(0, description="bytes of its weights and buffers those workers hold now (summed)")
    loads: int = Field(0, description="times the live workers loaded it, each since its own start")
    evictions: int = Field(0, description="times the live workers unloaded it to make room for another model")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ServedModel]
