"""The endpoints a batch may name, each with its format: validated once, when the batch is created."""
from __future__ import annotations

from poolq.products.batches.formats.embeddings_format import EmbeddingsFormat
from poolq.products.batches.formats.endpoint_format import EndpointFormat
from poolq.products.batches.formats.score_formats import RerankFormat, ScoreFormat

ENDPOINT_FORMATS: dict[str, EndpointFormat] = {
    "/v1/embeddings": EmbeddingsFormat(),
    "/v1/score": ScoreFormat(),
    "/v1/rerank": RerankFormat(),
}
